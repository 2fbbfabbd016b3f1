"""Every option of every verb, defined once: its spelling, type (with range and unit) and meaning, and the groups
verbs share (target GPUs, model, training run, cluster, power, output, input limits).

A verb adds an option by its concept name (`add(parser, "nnodes")`), so one concept has one spelling, one type and
one unit everywhere; a verb may word the meaning or the default for itself. Names follow torchrun (--nnodes,
--nproc-per-node, --rdzv-endpoint) and Hugging Face (a model's config.json) where those exist.

Meanings are catalogue text (domain `cli`: `cli.option.<concept>`, a verb's own `cli.<verb>.<option>`), which the
parser (gpuready.cli.usage.Parser) says in the user's language.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from gpuready.cli import option_kinds as kind
from gpuready.i18n import DEFAULT_LANGUAGE, Said, message, said
from gpuready.cli.usage import in_language
from gpuready.cli.report_files import REPORT_FILES, ReportFile
from gpuready.estimate.memory import LOGITS
from gpuready.evidence.limits import DEFAULT_LIMITS, InputLimits, MIB as BYTES_PER_MIB
from gpuready.safe_text import tell
from gpuready.shapes import PRESETS

if TYPE_CHECKING:
    from gpuready.evidence.limits import InputLimits


@dataclass(frozen=True)
class Option:
    """An option; what it does is the catalogue's `cli.option.<concept>` (domain `cli`), without its range: --help
    appends the type's range and unit."""

    flags: tuple[str, ...]
    settings: dict[str, Any] = field(default_factory=dict)
    """argparse's keywords: type, metavar, choices, action, default."""


OPTIONS: dict[str, Option] = {
    # what is judged or measured
    "bundle": Option(("--bundle",), {"type": Path, "metavar": "PATH"}),
    "fast": Option(("--fast",), {"action": "store_true"}),
    "gpus": Option(("--gpus",), {"metavar": "LIST"}),
    "device": Option(("--device",), {"choices": ("auto", "cuda", "cpu"), "default": "auto"}),
    "ranks": Option(("--ranks",), {"type": kind.RANKS, "metavar": "N"}),
    "oversubscribe": Option(("--oversubscribe",), {"action": "store_true"}),
    "exclusive": Option(("--exclusive",), {"action": "store_true"}),
    "timeout": Option(("--timeout",), {"type": kind.TIMEOUT_S, "metavar": "S"}),
    "startup_timeout": Option(("--startup-timeout",), {"type": kind.TIMEOUT_S, "default": 300.0, "metavar": "S"}),
    "interval": Option(("--interval",), {"type": kind.INTERVAL_S, "default": 1.0, "metavar": "S"}),
    "log_dir": Option(("--log-dir",), {"type": Path, "metavar": "DIR"}),
    # cluster (torchrun's names)
    "nnodes": Option(("--nnodes",), {"type": kind.NODES, "metavar": "N"}),
    "nproc_per_node": Option(("--nproc-per-node",), {"type": kind.PROCS_PER_NODE, "metavar": "G"}),
    "rdzv_endpoint": Option(("--rdzv-endpoint",), {"metavar": "HOST:PORT"}),
    # the model (a preset, a Hugging Face config.json, or its shape)
    "preset": Option(("--preset",), {"metavar": "NAME"}),
    "model_config": Option(("--model-config",), {"type": Path, "metavar": "FILE"}),
    "family": Option(("--family",), {"choices": ("gpt2", "llama"), "default": "gpt2"}),
    **{name: Option((f"--{name.replace('_', '-')}",), {"type": kind.SHAPE[name], "metavar": "N"})
       for name in kind.SHAPE},
    # the training run
    "seq": Option(("--seq",), {"type": kind.TOKENS, "metavar": "S"}),
    "micro_batch": Option(("--micro-batch",), {"type": kind.MICRO_BATCH, "metavar": "B"}),
    "global_batch": Option(("--global-batch",), {"type": kind.GLOBAL_BATCH, "metavar": "B"}),
    "precision": Option(("--precision",), {"choices": ("amp-bf16", "bf16"), "default": "amp-bf16"}),
    "recompute": Option(("--recompute",), {"choices": ("none", "selective", "full"), "default": "none"}),
    "logits": Option(("--logits",), {"choices": LOGITS, "default": LOGITS[0]}),
    "validate_report": Option(("--validate-report",), {"type": Path, "metavar": "REPORT"}),
    "strategies": Option(("--strategies",), {"metavar": "LIST"}),
    # power
    "psu_watts": Option(("--psu-watts",), {"type": kind.WATTS, "metavar": "W"}),
    "circuit": Option(("--circuit",), {"type": kind.circuit, "metavar": "CIRCUIT"}),
    # output
    "json": Option(("--json",), {"action": "store_true"}),
    "out": Option(("--out",), {"type": Path, "metavar": "FILE"}),
    "fail_on": Option(("--fail-on",), {"choices": ("fail", "warn"), "default": "fail"}),
    "verbose": Option(("--verbose", "-v"), {"action": "store_true"}),
    "lang": Option(("--lang",), {"choices": ("en", "zh"), "default": None}),
    **{name: Option((f"--{name}",), {"type": Path, "metavar": "FILE", "action": ReportFile})
       for name in REPORT_FILES},  # --html, --junit, --markdown: checked when read, before any work
}


def add(parser: argparse.ArgumentParser | argparse._ArgumentGroup, name: str, meaning: Said | None = None,
        **settings: Any) -> argparse.Action:
    """Add the option of concept `name`; `meaning` and `settings` (a default, choices) may be the verb's own. The
    parser (gpuready.cli.usage.Parser, or its group) renders the help in the user's language."""
    option = OPTIONS[name]
    merged = {**option.settings, **settings}
    return parser.add_argument(*option.flags, dest=name, help=with_range(meaning or said(f"cli.option.{name}"),
                                                                         merged.get("type")), **merged)


def with_range(meaning: Said, kind_of: Any) -> Said:
    """An option's help with its type, range and unit, from the argparse type itself (option_kinds)."""
    range_words = getattr(kind_of, "range_words", None)
    return said("cli.help.with_range", meaning=meaning, range=range_words) if range_words else meaning


def add_target_gpus(parser: argparse.ArgumentParser, *, gpu_list: bool = True) -> None:
    """Which GPUs (or CPU ranks) a measuring verb runs on."""
    if gpu_list:
        add(parser, "gpus")
    add(parser, "oversubscribe")
    add(parser, "exclusive")


def add_cluster(parser: argparse.ArgumentParser, *, ranks_meaning: Said) -> None:
    """A run over several nodes through torchrun: the same command on every node."""
    add(parser, "nnodes", said("cli.option.nnodes.torchrun"))
    add(parser, "nproc_per_node", ranks_meaning)
    add(parser, "rdzv_endpoint")


def add_model(parser: argparse.ArgumentParser, *, default_note: Said | None = None) -> None:
    """The model: a preset, a Hugging Face config.json, or its shape (--family and the dimensions)."""
    group = parser.add_argument_group(said("cli.group.model"))
    meaning = said("cli.option.preset")
    if default_note:
        meaning = said("cli.help.note", meaning=meaning, note=default_note)
    add(group, "preset", said("cli.help.names", meaning=meaning, names="|".join(PRESETS)),
        type=preset_type(getattr(parser, "lang", DEFAULT_LANGUAGE)), choices=tuple(PRESETS))
    add(group, "model_config")
    add(group, "family")
    for name in kind.SHAPE:
        add(group, name)


def add_power(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add(parser, "psu_watts")
    add(parser, "circuit")


def add_output(parser: argparse.ArgumentParser) -> None:
    """The report: console or JSON, a copy on disk, what fails the exit code."""
    for name in ("json", "out", "fail_on", "verbose"):
        add(parser, name)
    add_language(parser)
    add_report_files(parser)


def add_language(parser: argparse.ArgumentParser) -> None:
    """--lang en|zh: every verb's, so that `gpuready VERB --lang zh` (or `gpuready --lang zh VERB`) speaks Chinese
    whatever the verb; without it GPUREADY_LANG, then the locale (LANG=zh_CN.UTF-8), as i18n.choose_language says."""
    add(parser, "lang")


def add_report_files(parser: argparse.ArgumentParser) -> None:
    """--html, --junit, --markdown: the report as other files (verbs/report_files.py checks and writes them)."""
    group = parser.add_argument_group(said("cli.group.report_files"))
    for name in REPORT_FILES:
        add(group, name)


def add_input_limits(parser: argparse.ArgumentParser, *, whole_run: bool) -> None:
    """What is read of the inputs (README, "Input limits"): the defaults keep a run under 500 MB of memory."""
    limits = parser.add_argument_group(said("cli.group.input_limits"))
    limits.add_argument("--max-members", type=kind.MEMBERS, metavar="N", default=DEFAULT_LIMITS.max_members,
                        help=with_range(said("cli.option.max_members", default=DEFAULT_LIMITS.max_members),
                                        kind.MEMBERS))
    for name, field_name in (("--max-archive-mib", "max_archive_bytes"), ("--max-file-mib", "max_file_bytes"),
                             ("--max-held-mib", "max_held_bytes"),
                             *((("--max-input-mib", "max_input_bytes"),) if whole_run else ())):
        default_mib = getattr(DEFAULT_LIMITS, field_name) // BYTES_PER_MIB
        limits.add_argument(name, type=kind.MIB, metavar="MIB", dest=field_name, default=default_mib,
                            help=with_range(said(f"cli.option.{field_name}", default=default_mib), kind.MIB))


def input_limits(args: argparse.Namespace) -> InputLimits:
    """The --max-* options as the readers' InputLimits (in bytes)."""
    in_bytes = {name: getattr(args, name) * BYTES_PER_MIB for name in
                ("max_archive_bytes", "max_file_bytes", "max_held_bytes", "max_input_bytes") if hasattr(args, name)}
    return InputLimits(**{**DEFAULT_LIMITS.__dict__, **in_bytes, "max_members": args.max_members})


def comma_list(text: str | None, *, keep_empty: bool = False) -> tuple[str, ...]:
    """`a, b,,c` → ("a", "b", "c"): the items of a LIST option; with `keep_empty` an empty item stays, for the verb
    to name as unknown (a GPU or a workload called "")."""
    items = tuple(item.strip() for item in (text or "").split(",")) if text else ()
    return items if keep_empty else tuple(item for item in items if item)


# --- old spellings, kept for one release -----------------------------------------------------------------------

OLD_PRESETS = {"125M": "gpt2-small", "350M": "gpt2-medium", "760M": "gpt3-760m", "1.3B": "gpt3-1.3b",
               "2.7B": "gpt3-2.7b", "7B": "llama2-7b", "8B-llama": "llama3-8b"}
"""bench's preset names before plan's and bench's became one list (the same shapes)."""


@dataclass(frozen=True)
class Renamed:
    old: str
    new: str
    dest: str | None = None
    """Where the old spelling stores its value, where it is not the new option's (plan's --gpus was a total)."""
    kind_of: Any = None
    """The old spelling's own type, where it is not the new option's."""
    note: Said | None = None


RENAMED: dict[str, tuple[Renamed, ...]] = {
    "check": (Renamed("--circuit-watts", "--circuit"),),
    "plan": (Renamed("--hf-config", "--model-config"), Renamed("--nodes", "--nnodes"),
             Renamed("--measured", "--validate-report"), Renamed("--strategy", "--strategies"),
             Renamed("--gpus", "--nproc-per-node", dest="gpus_total", kind_of=kind.ALL_GPUS,
                     note=said("cli.renamed.plan_gpus"))),
    "bench": (Renamed("--ffn", "--ffn-hidden"),),
    "launch": (Renamed("--gpus-per-node", "--nproc-per-node"),),
}
"""Per verb, the spellings of the previous release: they still work, and each use says the new one on stderr."""


class _OldSpelling(argparse.Action):
    """Stores like the new option, after a one-line notice in the parser's language."""

    def __init__(self, option_strings: list[str], dest: str, *, renamed: Renamed, **settings: Any):
        super().__init__(option_strings, dest, **settings)
        self.renamed = renamed

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        names = {"old": self.renamed.old, "new": self.renamed.new}
        notice = said("cli.renamed.note", note=self.renamed.note, **names) if self.renamed.note \
            else said("cli.renamed", **names)
        tell(in_language(notice, getattr(parser, "lang", DEFAULT_LANGUAGE)))
        setattr(namespace, self.dest, values)


def add_old_spellings(parser: argparse.ArgumentParser, verb: str) -> None:
    """The verb's previous spellings, hidden from --help."""
    for renamed in RENAMED.get(verb, ()):
        new = parser._option_string_actions[renamed.new]
        parser.add_argument(renamed.old, action=_OldSpelling, renamed=renamed, dest=renamed.dest or new.dest,
                            type=renamed.kind_of or new.type, choices=None if renamed.kind_of else new.choices,
                            metavar=new.metavar, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


@lru_cache(maxsize=None)
def preset_type(lang: str) -> Callable[[str], str]:
    """--preset's type (one per language, so that plan's and bench's are one): an old bench name becomes its new one,
    with the notice in `lang`; others pass to argparse's choices."""
    def preset(text: str) -> str:
        new = OLD_PRESETS.get(text)
        if new is None:
            return text
        tell(message("cli.renamed.preset", lang, old=text, new=new))
        return new
    return preset
