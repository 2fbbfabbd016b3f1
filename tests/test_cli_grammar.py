"""One command-line grammar (issue 21): one spelling, type and unit per concept in every verb, the README's option
table equal to the parsers, old spellings working for one release with a notice, and a mistyped verb or option
answered with the nearest one."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import pytest

from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.cli.option_groups import OLD_PRESETS, RENAMED
from gpuready.cli.option_kinds import circuit
from gpuready.cli.option_table import BEGIN, END, option_table, shown_actions, verb_parsers
from gpuready.shapes import PRESETS
from gpuready.options import UsageError

README = Path(__file__).resolve().parents[1] / "docs" / "options.md"  # the option table's page (issue 32)
SYNONYMS = [("--hf-config", "--model-config"), ("--ffn", "--ffn-hidden"), ("--nodes", "--nnodes"),
            ("--gpus-per-node", "--nproc-per-node"), ("--measured", "--validate-report"),
            ("--circuit-watts", "--circuit"), ("--strategy", "--strategies"), ("--config", "--model-config"),
            ("--world-size", "--nproc-per-node"), ("--num-nodes", "--nnodes"), ("--watts", "--psu-watts")]
"""Pairs the field (or our previous release) spells one concept with: at most one of each pair is visible."""
SAME_FLAG_OTHER_TYPE = {
    "--out": "collect writes a bundle (a folder or a .tar.gz) there, the other verbs the JSON report: each verb's "
             "output, one spelling",
    "--port": "launch takes 0 for a port free here when the script is written; diagnose net probes a real port",
}


def _visible() -> dict[str, list[tuple[str, argparse.Action]]]:
    """flag → [(verb, action)] of every option --help shows."""
    found: dict[str, list[tuple[str, argparse.Action]]] = defaultdict(list)
    for verb, sub in verb_parsers(cli.build_parser()):
        for action in shown_actions(sub):
            for flag in action.option_strings:
                found[flag].append((verb, action))
    return found


def test_the_readme_table_is_what_the_parsers_say():
    text = README.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    assert text[start:end] == option_table(), "run: python -m gpuready.cli.option_table, and paste it into docs/options.md"


def test_no_two_verbs_spell_one_concept_two_ways():
    visible = _visible()
    flags_of_dest: dict[str, set[str]] = defaultdict(set)
    for flag, uses in visible.items():
        for verb, action in uses:
            if flag.startswith("--"):
                flags_of_dest[action.dest].add(flag)
    assert {dest: flags for dest, flags in flags_of_dest.items() if len(flags) > 1} == {}
    for old, new in SYNONYMS:
        assert not (old in visible and new in visible), (old, new)
    for flag, uses in visible.items():  # one flag, one type (so one range and one unit)
        if flag in SAME_FLAG_OTHER_TYPE:
            continue
        assert len({id(action.type) for _verb, action in uses}) == 1, (flag, [verb for verb, _ in uses])
        assert len({action.dest for _verb, action in uses}) == 1, flag


def test_gpus_is_a_list_of_gpus_wherever_it_is_visible():
    for verb, action in _visible()["--gpus"]:
        assert action.type is None and action.metavar == "LIST", verb


def test_old_spellings_are_hidden_from_help():
    for verb, sub in verb_parsers(cli.build_parser()):
        shown = sub.format_help()
        for renamed in RENAMED.get(verb, ()):
            assert f"{renamed.old} " not in shown and f"{renamed.old}\n" not in shown, (verb, renamed.old)


# --- old spellings: each still works, with one line on stderr ---------------------------------------------------

OLD_AND_NEW = [
    ("check", ["--circuit-watts", "3680"], ["--circuit", "3680"], "circuit"),
    ("plan", ["--hf-config", "c.json"], ["--model-config", "c.json"], "model_config"),
    ("plan", ["--nodes", "2"], ["--nnodes", "2"], "nnodes"),
    ("plan", ["--measured", "r.json"], ["--validate-report", "r.json"], "validate_report"),
    ("plan", ["--strategy", "ddp"], ["--strategies", "ddp"], "strategies"),
    ("bench", ["--ffn", "512"], ["--ffn-hidden", "512"], "ffn_hidden"),
    ("launch", ["torchrun", "--gpus-per-node", "4"], ["torchrun", "--nproc-per-node", "4"], "nproc_per_node"),
]


@pytest.mark.parametrize("verb, old, new, dest", OLD_AND_NEW)
def test_an_old_spelling_parses_as_the_new_one_and_says_so(capsys, verb, old, new, dest):
    parsed_old = cli.build_parser().parse_args([verb, *old])
    notice = capsys.readouterr().err
    parsed_new = cli.build_parser().parse_args([verb, *new])
    assert getattr(parsed_old, dest) == getattr(parsed_new, dest)
    name = next(word for word in old if word.startswith("--"))
    assert notice.count("\n") == 1 and notice.startswith(f"gpuready: {name} is now {new[old.index(name)]}"), notice
    assert capsys.readouterr().err == ""  # the new spelling says nothing


def test_every_old_spelling_has_its_test():
    tested = {(verb, next(word for word in old if word.startswith("--"))) for verb, old, _new, _dest in OLD_AND_NEW}
    declared = {(verb, renamed.old) for verb, entries in RENAMED.items() for renamed in entries}
    assert declared - tested == {("plan", "--gpus")}  # its own test below: it was a total, not per node


def _plan_json(capsys, *argv: str) -> tuple[int, dict, str]:
    code = cli.main(["plan", *argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_plan_old_gpus_count_is_all_gpus_and_says_the_new_spelling(capsys):
    base = ["--preset", "gpt2-small", "--machine", "8xH100-SXM (2 nodes)"]
    code_old, old, error = _plan_json(capsys, *base, "--nodes", "2", "--gpus", "8")
    code_new, new, quiet = _plan_json(capsys, *base, "--nnodes", "2", "--nproc-per-node", "4")
    assert "--gpus is now --nproc-per-node" in error and "--nodes is now --nnodes" in error and quiet == ""
    assert code_old == code_new and old["strategies"] == new["strategies"]
    assert old["facts"]["plan"]["machine"]["gpus_per_node"] == 4


def test_plan_old_spellings_still_run(capsys, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 100}))
    report = Path(__file__).parent / "fixtures" / "plan" / "h200-validate-compute.json"
    code, old, error = _plan_json(capsys, "--hf-config", str(config), "--machine", "1xH200-SXM",
                                  "--strategy", "single", "--measured", str(report))
    code_new, new, quiet = _plan_json(capsys, "--model-config", str(config), "--machine", "1xH200-SXM",
                                      "--strategies", "single", "--validate-report", str(report))
    assert code == code_new == ExitCode.READY and quiet == "" and error.count("\n") == 3
    assert old["strategies"] == new["strategies"] and [row["name"] for row in new["strategies"]] == ["single"]


def test_launch_old_count_still_writes_the_script(capsys):
    assert cli.main(["launch", "slurm", "--nnodes", "2", "--gpus-per-node", "8", "--", "train.py"]) == 0
    captured = capsys.readouterr()
    assert "#SBATCH --gpus-per-node=8" in captured.out
    assert captured.err == "gpuready: --gpus-per-node is now --nproc-per-node; the old spelling goes in the next " \
                           "release\n"


def test_check_old_circuit_watts_judges_the_same(capsys):
    bundle = Path(__file__).parent / "fixtures"
    candidates = sorted(path for path in bundle.rglob("nvidia-smi-q.xml"))
    if not candidates:
        pytest.skip("no recorded bundle")
    folder = str(candidates[0].parent)
    codes = []
    for flag in ("--circuit-watts", "--circuit"):
        codes.append(cli.main(["check", "--bundle", folder, flag, "1000", "--json"]))
        report = json.loads(capsys.readouterr().out)
        budget = [f for f in report["findings"] if f["check_id"] == "power.budget"]
        codes.append([f["message"] for f in budget])
    assert codes[0] == codes[2] and codes[1] == codes[3]


@pytest.mark.parametrize("old, new", sorted(OLD_PRESETS.items()))
def test_an_old_preset_name_is_the_same_shape(capsys, old, new):
    assert cli.build_parser().parse_args(["bench", "--preset", old]).preset == new
    assert capsys.readouterr().err == f"gpuready: preset {old} is now {new}; the old name goes in the next release\n"
    assert new in PRESETS


def test_plan_and_bench_take_the_same_presets():
    parser = cli.build_parser()
    choices = {verb: next(a.choices for a in sub._actions if "--preset" in a.option_strings)
               for verb, sub in verb_parsers(parser) if verb in ("plan", "bench")}
    assert choices["plan"] == choices["bench"] == tuple(PRESETS)


# --- the circuit: one option for check (watts) and plan (a named circuit) ------------------------------------------

@pytest.mark.parametrize("text, watts, shown", [("3680", 3680, "3680W"), ("230V/16A", 3680, "230V/16A"),
                                                ("120V20A", 2400, "120V20A"), ("2.2kW", 2200, "2.2kW"),
                                                ("household", None, "household")])
def test_circuit_takes_watts_or_a_named_circuit(text, watts, shown):
    value = circuit(text)
    assert value > 0 and value.text == shown
    if watts is not None:
        assert float(value) == watts


@pytest.mark.parametrize("text", ["a big one", "nan", "-5", "0", "1e400", "99999999V99999999A", ""])
def test_a_wrong_circuit_is_one_sentence(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a circuit"):
        circuit(text)


# --- mistakes: the nearest verb, option or choice ------------------------------------------------------------------

def test_a_mistyped_verb_names_the_nearest_and_every_verb(capsys):
    assert cli.main(["chek"]) == ExitCode.USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "did you mean check?" in error
    assert all(verb in error for verb in cli.VERBS)
    assert cli.main(["zzzz"]) == ExitCode.USAGE
    assert "did you mean" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, nearest", [(["check", "--bundel", "x"], "--bundle"),
                                           (["--bundel", "x"], "--bundle"),
                                           (["plan", "--nnodse", "2"], "--nnodes"),
                                           (["validate", "--nprocs-per-node", "2"], "--nproc-per-node"),
                                           (["bench", "--strategy-list", "ddp"], "--strategies"),
                                           (["plan", "--preset", "llama2-7B"], "llama2-7b")])
def test_a_mistyped_option_or_choice_names_the_nearest(capsys, argv, nearest):
    assert cli.main(argv) == ExitCode.USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"did you mean {nearest}?" in error, error


def test_the_parser_raises_usage_errors_not_system_exit():
    with pytest.raises(UsageError, match="did you mean --interval"):
        cli.build_parser().parse_args(["monitor", "--intervall", "2"])
