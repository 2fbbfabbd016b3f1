"""Every `gpuready …` command the tool prints (in a finding's fix, an error sentence, a script's comment, the message
catalogue) parses as printed: a user pastes it (issue 21). Collected from the source's string literals and the PO
catalogues; the words that stand for the user's values (HOST, PEER, DIR, PATH, N …) become example values."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from gpuready.cli.main import build_parser
from gpuready.options import UsageError

SOURCE = Path(__file__).resolve().parent.parent / "src" / "gpuready"
_COMMAND = re.compile(r"`(gpuready [^`\n]{0,300})`")
_SYNTAX = re.compile(r"[|\[\]{}]|\.\.\.|…")
"""A syntax summary (`launch torchrun|slurm|k8s`, `[--tar]`, `PATH...`), not a command to paste."""
_EXAMPLES = {"HOST": "node2", "PEER": "node2", "HEAD": "node1", "DIR": "/tmp/bundle", "PATH": "/tmp/x.log",
             "N": "2", "G": "8", "FILE": "/tmp/r.json", "PORT": "29500", "HOST:PORT": "node1:29500"}


def _printed_strings(path: Path) -> list[str]:
    """A module's string literals that reach users: every str constant but docstrings (f-strings' literal parts
    included); a PO file's whole text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return [text]
    tree = ast.parse(text)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings]


def printed_commands() -> list[tuple[str, str]]:
    """(file, command) for every backticked `gpuready VERB ARGS` the tool prints. A bare `gpuready VERB` is the verb's
    name in a sentence, not a command: only `gpuready collect` and `gpuready check`, which fixes tell users to run,
    must also run bare (tested below)."""
    found = set()
    for path in sorted(SOURCE.rglob("*")):
        if path.suffix not in (".py", ".po"):
            continue
        for literal in _printed_strings(path):
            for command in _COMMAND.findall(literal):
                if not _SYNTAX.search(command) and len(command.split()) > 2:
                    found.add((path.relative_to(SOURCE).as_posix(), command))
    return sorted(found)


COMMANDS = printed_commands()


def test_commands_were_found():
    assert {"gpuready diagnose net --peers PEER", "gpuready validate --only transfer"} <= \
        {command for _source, command in COMMANDS}


@pytest.mark.parametrize("kind", ["torchrun", "slurm"])
def test_the_commands_in_a_launch_scripts_comments_parse(kind):
    from gpuready.verbs.launch import launch_text

    script = launch_text(kind, nnodes=2, gpus_per_node=8, command=["train.py"], image=None, k8s_kind="job",
                         port=29500, name="train", facts=None, reports="reports")
    commands = re.findall(r"#[^\n]*?\b(gpuready (?:diagnose|check|validate|collect)[^)\n]*)", script)
    for command in commands:
        words = [_EXAMPLES.get(word, word) for word in shlex.split(command)[1:]]
        args = build_parser(words[0]).parse_args(words)
        assert args.paths != ["net"] or args.peers, command
    assert kind == "slurm" or commands  # the torchrun script says how to check its port


@pytest.mark.parametrize("source, command", COMMANDS, ids=[command for _source, command in COMMANDS])
def test_a_printed_command_parses_as_printed(source, command):
    words = [_EXAMPLES.get(word, word) for word in shlex.split(command.replace("\\'", "'"))[1:]]
    parser = build_parser(words[0] if words and not words[0].startswith("-") else None)
    try:
        args = parser.parse_args(words)
    except (UsageError, SystemExit) as error:
        pytest.fail(f"{source}: `{command}` does not parse: {error}")
    if getattr(args, "paths", None) == ["net"]:
        assert getattr(args, "peers", None), f"{source}: `{command}`: diagnose net needs --peers"


@pytest.mark.parametrize("verb", ["collect", "check"])
def test_the_verbs_fixes_name_bare_run_bare(verb):
    args = build_parser(verb).parse_args([verb])
    assert args.verb == verb if hasattr(args, "verb") else True
