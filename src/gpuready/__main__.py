"""`gpuready` and `python -m gpuready`.

A live `check` starts reading the machine before the rest of gpuready is imported: nvidia-smi and NVML take 0.2-0.5 s
each on a GPU machine (the torch probe, seconds), and importing gpuready's checks and readers takes about 0.3 s, so
overlapped they cost the longer of the two, not the sum. The tools start first (evidence/prestart.py, the standard
library only), then the in-process part (NVML, files) in a thread while the CLI is imported. The guess below only
starts work early: the parsed options decide, and a collection nobody asks for is dropped.
"""

import importlib
import sys

from gpuready.evidence import prestart


def live_check_with_torch(argv: list[str]) -> bool | None:
    """For `gpuready [check] [OPTIONS]` without --bundle or --help: whether the check imports torch (not --fast);
    None for any other command. argparse takes unambiguous prefixes of options (`--fas`), so prefixes count."""
    words = argv[:argv.index("--")] if "--" in argv else list(argv)
    while words and words[0].startswith("--lang"):
        words = words[1:] if "=" in words[0] else words[2:]
    if words and not words[0].startswith("-"):
        if words[0] != "check":
            return None
        words = words[1:]
    names = [word.split("=", 1)[0] for word in words if word.startswith("-")]
    if any(name == "-h" or _abbreviates(name, "--help", "--bundle", "--version") for name in names):
        return None
    return not any(_abbreviates(name, "--fast") for name in names)


def _abbreviates(name: str, *options: str) -> bool:
    return len(name) >= 3 and any(option.startswith(name) for option in options)


def entry() -> None:
    with_torch = live_check_with_torch(sys.argv[1:])
    if with_torch is not None:
        prestart.start(with_torch)  # the tools first: they run while the rest is imported
        importlib.import_module("gpuready.evidence.collect").start_early(with_torch)
    # The CLI, and with it every check and reader, is imported while the collection runs.
    importlib.import_module("gpuready.cli.main").entry()


if __name__ == "__main__":
    entry()
