"""Every option of every verb, defined once: its spelling, type (with range and unit) and meaning, and the groups
verbs share (target GPUs, model, training run, cluster, power, output, input limits).

A verb adds an option by its concept name (`add(parser, "nnodes")`), so one concept has one spelling, one type and
one unit everywhere; a verb may word the meaning or the default for itself. Names follow torchrun (--nnodes,
--nproc-per-node, --rdzv-endpoint) and Hugging Face (a model's config.json) where those exist.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuready import option_kinds as kind

if TYPE_CHECKING:
    from gpuready.bundle.archive import InputLimits


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    meaning: str
    """What the option does, without its range: --help appends the type's range and unit."""
    settings: dict[str, Any] = field(default_factory=dict)
    """argparse's keywords: type, metavar, choices, action, default."""


OPTIONS: dict[str, Option] = {
    # what is judged or measured
    "bundle": Option(("--bundle",), "read a support bundle (folder or .tar.gz) instead of this machine",
                     {"type": Path, "metavar": "PATH"}),
    "fast": Option(("--fast",), "do not import torch (versions from package metadata)", {"action": "store_true"}),
    "gpus": Option(("--gpus",), "GPUs to use: NVML indices, bus ids or UUIDs, comma-separated", {"metavar": "LIST"}),
    "device": Option(("--device",), "where to run: cuda (one rank per GPU), cpu (CPU ranks), auto (cuda where there "
                                    "is a GPU)", {"choices": ("auto", "cuda", "cpu"), "default": "auto"}),
    "ranks": Option(("--ranks",), "ranks to start", {"type": kind.RANKS, "metavar": "N"}),
    "oversubscribe": Option(("--oversubscribe",), "allow more CPU ranks than usable CPUs (up to 4 per CPU)",
                            {"action": "store_true"}),
    "exclusive": Option(("--exclusive",), "fail before anything runs when another process computes on a selected GPU",
                        {"action": "store_true"}),
    "timeout": Option(("--timeout",), "seconds one operation may take before its rank counts as hung",
                      {"type": kind.TIMEOUT_S, "metavar": "S"}),
    "startup_timeout": Option(("--startup-timeout",), "seconds for the ranks to start and connect (default 300)",
                              {"type": kind.TIMEOUT_S, "default": 300.0, "metavar": "S"}),
    "interval": Option(("--interval",), "sampling interval (default 1 s)",
                       {"type": kind.INTERVAL_S, "default": 1.0, "metavar": "S"}),
    "log_dir": Option(("--log-dir",), "rank logs and NCCL flight-recorder dumps", {"type": Path, "metavar": "DIR"}),
    # cluster (torchrun's names)
    "nnodes": Option(("--nnodes",), "nodes the job spans", {"type": kind.NODES, "metavar": "N"}),
    "nproc_per_node": Option(("--nproc-per-node",), "processes per node, one per GPU (default: the GPUs here)",
                             {"type": kind.PROCS_PER_NODE, "metavar": "G"}),
    "rdzv_endpoint": Option(("--rdzv-endpoint",), "torchrun rendezvous endpoint with --nnodes, the same on every node",
                            {"metavar": "HOST:PORT"}),
    # the model (a preset, a Hugging Face config.json, or its shape)
    "preset": Option(("--preset",), "a model preset", {"metavar": "NAME"}),
    "model_config": Option(("--model-config",), "a Hugging Face config.json (no weights; a regular file, at most "
                                                "1 MiB)", {"type": Path, "metavar": "FILE"}),
    "family": Option(("--family",), "the architecture of an explicit shape",
                     {"choices": ("gpt2", "llama"), "default": "gpt2"}),
    **{name: Option((f"--{name.replace('_', '-')}",), meaning, {"type": kind.SHAPE[name], "metavar": "N"})
       for name, meaning in (("layers", "transformer layers"), ("hidden", "model width"), ("heads", "attention heads"),
                             ("kv_heads", "key/value heads (grouped-query attention; default --heads)"),
                             ("ffn_hidden", "MLP width (Hugging Face: intermediate_size or n_inner)"),
                             ("vocab", "vocabulary size"))},
    # the training run
    "seq": Option(("--seq",), "sequence length", {"type": kind.TOKENS, "metavar": "S"}),
    "micro_batch": Option(("--micro-batch",), "sequences per GPU per step", {"type": kind.MICRO_BATCH, "metavar": "B"}),
    "global_batch": Option(("--global-batch",), "sequences per optimizer step, all GPUs together",
                           {"type": kind.GLOBAL_BATCH, "metavar": "B"}),
    "precision": Option(("--precision",), "amp-bf16: bf16 autocast over fp32 weights; bf16: bf16 weights", {"choices": ("amp-bf16", "bf16"), "default": "amp-bf16"}),
    "recompute": Option(("--recompute",), "activation recomputation", {"choices": ("none", "selective", "full"),
                                                                      "default": "none"}),
    "validate_report": Option(("--validate-report",), "a validate report (--out): its measured figures replace "
                                                      "assumptions", {"type": Path, "metavar": "REPORT"}),
    "strategies": Option(("--strategies",), "parallel strategies to consider, comma-separated", {"metavar": "LIST"}),
    # power
    "psu_watts": Option(("--psu-watts",), "PSU capacity, to judge the power budget",
                        {"type": kind.WATTS, "metavar": "W"}),
    "circuit": Option(("--circuit",), "the branch circuit, to judge the power budget",
                      {"type": kind.circuit, "metavar": "CIRCUIT"}),
    # output
    "json": Option(("--json",), "print only the JSON report", {"action": "store_true"}),
    "out": Option(("--out",), "also write the JSON report to FILE, a regular file whose folder exists (checked "
                              "before any work), or - for the JSON alone on stdout", {"type": Path, "metavar": "FILE"}),
    "fail_on": Option(("--fail-on",), "warn: warnings exit 1 too", {"choices": ("fail", "warn"), "default": "fail"}),
    "verbose": Option(("--verbose", "-v"), "list skipped checks too", {"action": "store_true"}),
    "lang": Option(("--lang",), "English or Chinese (zh); default: GPUREADY_LANG, else LANGUAGE / LC_ALL / "
                                "LC_MESSAGES / LANG (zh_* is Chinese)", {"choices": ("en", "zh"), "default": None}),
}


def add(parser: argparse.ArgumentParser | argparse._ArgumentGroup, name: str, meaning: str | None = None,
        **settings: Any) -> argparse.Action:
    """Add the option of concept `name`; `meaning` and `settings` (a default, choices) may be the verb's own."""
    option = OPTIONS[name]
    merged = {**option.settings, **settings}
    return parser.add_argument(*option.flags, dest=name, help=with_range(option.meaning if meaning is None else meaning,
                                                                         merged.get("type")), **merged)


def with_range(meaning: str, kind_of: Any) -> str:
    """An option's help with its type, range and unit, from the argparse type itself."""
    describe = getattr(kind_of, "describe", "")
    return "; ".join(part for part in (meaning, describe) if part)


def add_target_gpus(parser: argparse.ArgumentParser, *, gpu_list: bool = True) -> None:
    """Which GPUs (or CPU ranks) a measuring verb runs on."""
    if gpu_list:
        add(parser, "gpus")
    add(parser, "oversubscribe")
    add(parser, "exclusive")


def add_cluster(parser: argparse.ArgumentParser, *, ranks_meaning: str) -> None:
    """A run over several nodes through torchrun: the same command on every node."""
    add(parser, "nnodes", "run on N nodes: builds and runs the torchrun command")
    add(parser, "nproc_per_node", ranks_meaning)
    add(parser, "rdzv_endpoint")


def add_model(parser: argparse.ArgumentParser, *, default_note: str = "") -> None:
    """The model: a preset, a Hugging Face config.json, or its shape (--family and the dimensions)."""
    from gpuready.shapes import PRESETS
    group = parser.add_argument_group("model (a preset, a Hugging Face config.json, or its shape)")
    add(group, "preset", "a model preset" + (f" ({default_note})" if default_note else "") + ": " + "|".join(PRESETS),
        type=preset, choices=tuple(PRESETS))
    add(group, "model_config")
    add(group, "family")
    for name in kind.SHAPE:
        add(group, name)


def add_power(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    add(parser, "psu_watts")
    add(parser, "circuit")


def add_output(parser: argparse.ArgumentParser) -> None:
    """The report: console or JSON, a copy on disk, what fails the exit code."""
    for name in ("json", "out", "fail_on", "verbose", "lang"):
        add(parser, name)


def add_input_limits(parser: argparse.ArgumentParser, *, whole_run: bool) -> None:
    """What is read of the inputs (README, "Input limits"): the defaults keep a run under 500 MB of memory."""
    from gpuready.bundle.archive import DEFAULT_LIMITS, MIB as BYTES_PER_MIB
    limits = parser.add_argument_group("input limits")
    limits.add_argument("--max-members", type=kind.MEMBERS, metavar="N", default=DEFAULT_LIMITS.max_members,
                        help=with_range("archive members and folder entries looked at "
                                        f"(default {DEFAULT_LIMITS.max_members})", kind.MEMBERS))
    for name, field_name, what in (
            ("--max-archive-mib", "max_archive_bytes", "inflated from one archive or compressed file"),
            ("--max-file-mib", "max_file_bytes", "read of one tool output parsed whole"),
            ("--max-held-mib", "max_held_bytes", "of all tool outputs parsed whole, together"),
            *((("--max-input-mib", "max_input_bytes", "read from all inputs in one run"),) if whole_run else ())):
        default_mib = getattr(DEFAULT_LIMITS, field_name) // BYTES_PER_MIB
        limits.add_argument(name, type=kind.MIB, metavar="MIB", dest=field_name, default=default_mib,
                            help=with_range(f"MiB {what} (default {default_mib})", kind.MIB))


def input_limits(args: argparse.Namespace) -> InputLimits:
    """The --max-* options as the readers' InputLimits (in bytes)."""
    from gpuready.bundle.archive import DEFAULT_LIMITS, MIB as BYTES_PER_MIB, InputLimits
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
    note: str = ""


RENAMED: dict[str, tuple[Renamed, ...]] = {
    "check": (Renamed("--circuit-watts", "--circuit"),),
    "plan": (Renamed("--hf-config", "--model-config"), Renamed("--nodes", "--nnodes"),
             Renamed("--measured", "--validate-report"), Renamed("--strategy", "--strategies"),
             Renamed("--gpus", "--nproc-per-node", dest="gpus_total", kind_of=kind.ALL_GPUS,
                     note=" (GPUs per node, times --nnodes; --gpus names GPUs, as in validate and burn)")),
    "bench": (Renamed("--ffn", "--ffn-hidden"),),
    "launch": (Renamed("--gpus-per-node", "--nproc-per-node"),),
}
"""Per verb, the spellings of the previous release: they still work, and each use says the new one on stderr."""


class _OldSpelling(argparse.Action):
    """Stores like the new option, after a one-line notice."""

    def __init__(self, option_strings: list[str], dest: str, *, renamed: Renamed, **settings: Any):
        super().__init__(option_strings, dest, **settings)
        self.renamed = renamed

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from gpuready.report.safe_text import tell
        tell(f"{self.renamed.old} is now {self.renamed.new}{self.renamed.note}; the old spelling goes in the next "
             "release")
        setattr(namespace, self.dest, values)


def add_old_spellings(parser: argparse.ArgumentParser, verb: str) -> None:
    """The verb's previous spellings, hidden from --help."""
    for renamed in RENAMED.get(verb, ()):
        new = parser._option_string_actions[renamed.new]
        parser.add_argument(renamed.old, action=_OldSpelling, renamed=renamed, dest=renamed.dest or new.dest,
                            type=renamed.kind_of or new.type, choices=None if renamed.kind_of else new.choices,
                            metavar=new.metavar, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def preset(text: str) -> str:
    """--preset's type: an old bench name becomes its new one (with the notice); others pass to argparse's choices."""
    new = OLD_PRESETS.get(text)
    if new is None:
        return text
    from gpuready.report.safe_text import tell
    tell(f"preset {text} is now {new}; the old name goes in the next release")
    return new
