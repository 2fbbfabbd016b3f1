"""NCCL's own INFO lines for validate's communicators across nodes: the variables a rank gets, and the lines it reads
back from its own file after its collectives (issue 33: the transport NCCL used, beside each busbw figure).

NCCL's env docs (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html): NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=INIT,NET (the communicator's Init line, `NET/IB : Using …`, and the channel lines `via NET/IB/0`,
printed under INIT|P2P and NET), NCCL_DEBUG_FILE with `%h` (the host name up to its first dot) and `%p` (the pid). A
user's own value of any of them is kept: only those unset are added.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path
from typing import Any, Mapping

from gpuready.facts.nccl_log import MARKERS

FILE_NAME = "nccl.%h.%p.log"
MAX_READ_BYTES = 4 * 2**20
"""Most bytes read from one rank's file: INIT,NET at INFO is a few hundred lines per communicator."""
MAX_LINES = 2000
"""Most NCCL lines one rank hands back (the reader keeps bounded tables anyway)."""
MAX_LINE_CHARS = 400


def wants_nccl_lines(spec: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    """A rank of validate's collectives on the NCCL backend whose group spans more than one node (torchrun's
    WORLD_SIZE above LOCAL_WORLD_SIZE)."""
    backend = spec.get("backend") or ("nccl" if spec.get("device") == "cuda" else "gloo")
    world, local = int(environ.get("WORLD_SIZE") or 1), int(environ.get("LOCAL_WORLD_SIZE") or environ.get("WORLD_SIZE")
                                                              or 1)
    return backend == "nccl" and "collectives" in (spec.get("workloads") or ()) and world > local


def nccl_debug_env(environ: Mapping[str, str], run_dir: Path) -> dict[str, str]:
    """The variables to add for a rank: NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE in `run_dir`,
    each only where the user has not set it (an empty value counts as set: it is theirs)."""
    wanted = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": str(run_dir / FILE_NAME)}
    return {name: value for name, value in wanted.items() if name not in environ}


def own_log_path(pattern: str, host: str | None = None, pid: int | None = None) -> Path:
    """The file NCCL writes for this process: NCCL_DEBUG_FILE's `%h` → the host name up to its first dot, `%p` → the
    pid, `%%` → `%` (NCCL src/debug.cc)."""
    host = (host or socket.gethostname()).split(".")[0]
    pid = os.getpid() if pid is None else pid
    return Path(re.sub(r"%[hp%]", lambda m: {"%h": host, "%p": str(pid), "%%": "%"}[m.group()], pattern))


def read_own_lines(environ: Mapping[str, str], host: str | None = None, pid: int | None = None) -> dict[str, Any]:
    """This rank's NCCL lines, for its result: {"file", "nccl_debug", "lines": [[number, text], …], "truncated"};
    `error` instead of lines where the file cannot be read (NCCL_DEBUG_FILE unset: the lines went to the rank's
    output)."""
    found: dict[str, Any] = {"nccl_debug": environ.get("NCCL_DEBUG"), "lines": [], "truncated": False}
    pattern = environ.get("NCCL_DEBUG_FILE")
    if not pattern:
        return {**found, "error": "NCCL_DEBUG_FILE unset"}
    path = own_log_path(pattern, host, pid)
    found["file"] = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_READ_BYTES + 1)
    except OSError as error:
        return {**found, "error": error.strerror or str(error)}
    found["truncated"] = len(raw) > MAX_READ_BYTES
    markers = re.compile(MARKERS)
    for number, line in enumerate(raw[:MAX_READ_BYTES].decode("utf-8", "replace").splitlines(), 1):
        if markers.search(line):
            if len(found["lines"]) >= MAX_LINES:
                found["truncated"] = True
                break
            found["lines"].append([number, line[:MAX_LINE_CHARS]])
    return found
