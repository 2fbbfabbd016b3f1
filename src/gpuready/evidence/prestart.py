"""The outside programs of a live collection, started the moment gpuready starts.

nvidia-smi takes 0.2-0.3 s a call on a GPU machine (tests/fixtures/h200-collect/manifest.json: `-q -x` 0.31 s) and the
torch probe seconds, while Python spends about as long importing gpuready. `gpuready/__main__.py` starts them here,
before that import, for a live `check`; `collect.run_command` then takes the running process instead of starting its
own. This module stays light (the standard library only) so that they start within milliseconds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

TOOLS: dict[str, tuple[str, ...]] = {
    "nvidia-smi.txt": ("nvidia-smi",),
    "nvidia-smi-q.xml": ("nvidia-smi", "-q", "-x"),
    "nvidia-smi-topo.txt": ("nvidia-smi", "topo", "-m"),
    "nvidia-smi-topo-p2p.txt": ("nvidia-smi", "topo", "-p2p", "r"),
    "nvidia-smi-nvlink-s.txt": ("nvidia-smi", "nvlink", "-s"),
    "lspci-vv.txt": ("lspci", "-vv"),
    "ibv_devinfo.txt": ("ibv_devinfo",),
    "ip-addr.txt": ("ip", "-o", "addr"),
    "df.txt": ("df", "-P", "-B1"),
}
"""Bundle file → the tool that writes it, as is (the collectors with more to do than run one tool are collect.py's)."""
TORCH_PROBE: tuple[str, ...] = (sys.executable, "-m", "gpuready.facts.torch_probe")

_running: dict[tuple[str, ...], tuple[subprocess.Popen[str], float]] = {}


def launch(argv: tuple[str, ...] | list[str], c_locale: bool = True) -> subprocess.Popen[str]:
    """Start a tool with its output captured as text (undecodable bytes replaced), in the C locale (the parsers read
    English) unless told; OSError where it cannot start."""
    env = {**os.environ, "LC_ALL": "C"} if c_locale else None
    return subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            env=env)


def start(with_torch: bool) -> None:
    """Start every tool this machine has (and the torch probe, unless --fast); a tool that cannot start is left to
    the collector, which records why."""
    wanted = list(TOOLS.values()) + ([TORCH_PROBE] if with_torch else [])
    for argv in wanted:
        if argv in _running or shutil.which(argv[0]) is None:
            continue
        try:
            _running[argv] = (launch(argv, c_locale=argv != TORCH_PROBE), time.monotonic())
        except OSError:
            continue


def take(argv: tuple[str, ...] | list[str]) -> tuple[subprocess.Popen[str], float] | None:
    """The process started for `argv` and when (time.monotonic()), once; None where none was started."""
    return _running.pop(tuple(argv), None)
