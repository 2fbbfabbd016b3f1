"""`gpuready validate|bench --nnodes`: torchrun runs the verb as every rank of this node; where this node hosts the
rendezvous store, gpuready also watches the run, to write the report if rank 0 dies before it does."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
from typing import Callable

from gpuready.i18n import choose_language, in_language, said
from gpuready.model import worst_exit_code
from gpuready.safe_text import tell
from gpuready.runner.local import TERMINATE_GRACE_S
from gpuready.runner.progress import RDZV_STORE_VARIABLE
from gpuready.runner.rendezvous_store import host_rendezvous_store
from gpuready.runner.torchrun import RunObserver, torchrun_command
from gpuready.signals import Stopped, exit_code_for

TORCHRUN_OPTIONS = {"--nnodes": 1, "--nproc-per-node": 1, "--rdzv-endpoint": 1}
"""gpuready's options that torchrun takes itself (with how many values follow): not passed on to the ranks."""


def rank_arguments(argv: list[str]) -> list[str]:
    """The verb's own arguments (argv after the verb), without those torchrun takes itself."""
    passed, skip = [], 0
    for item in argv[1:]:
        if skip:
            skip -= 1
            continue
        name = item.split("=", 1)[0]
        if name in TORCHRUN_OPTIONS:
            skip = 0 if "=" in item else TORCHRUN_OPTIONS[name]
            continue
        passed.append(item)
    return passed


def run_under_torchrun(args: argparse.Namespace, argv: list[str], verb: str, nproc: int, store_node_report,
                       emit: Callable) -> int:
    """Run `torchrun ... -m gpuready VERB` on this node with `nproc` ranks; `store_node_report(outcome)` writes the
    report (through `emit`) if rank 0 dies before it does. The exit code: the run's verdict where rank 0 or this
    observer wrote it, else torchrun's."""
    lang = choose_language(args.lang)
    store, host_here, note = host_rendezvous_store(args.rdzv_endpoint, args.startup_timeout)
    tell(in_language(note, lang))
    command = torchrun_command(args.nnodes, nproc, args.rdzv_endpoint, verb, rank_arguments(argv),
                               rdzv_conf=None if host_here is None else f"is_host={str(host_here).lower()}")
    tell(" ".join(command))
    # The ranks build their group on the rendezvous store (RDZV_STORE_VARIABLE), so torchrun's rank-0 agent need
    # not listen with a second store on every interface (TORCH_DISABLE_SHARE_RDZV_TCP_STORE).
    env = {**os.environ, RDZV_STORE_VARIABLE: args.rdzv_endpoint, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    torchrun = subprocess.Popen(command, env=env)
    stopped_by: str | None = None
    observer = None
    if store is not None:  # this node hosts the store: watch the run too, in case rank 0 dies before it reports
        observer = RunObserver(verb, store, args.nnodes * nproc, args.startup_timeout)
    try:
        code = torchrun.wait()
    except (KeyboardInterrupt, Stopped) as stop:
        # torchrun passes SIGTERM on to the ranks, whose rank 0 writes the partial report; then it is waited for
        stopped_by = "SIGINT" if isinstance(stop, KeyboardInterrupt) else stop.name
        torchrun.send_signal(signal.SIGTERM)
        try:
            code = torchrun.wait(timeout=30 + TERMINATE_GRACE_S)  # torchrun's own grace before SIGKILL is 30 s
        except subprocess.TimeoutExpired:
            torchrun.kill()
            code = torchrun.wait()
    try:
        if observer is not None:  # if rank 0 died before writing the report, it is written here
            report = observer.report_if_rank0_died(args.log_dir, store_node_report, interrupted_by=stopped_by)
            if report is not None:
                tell(in_language(said("runner.rank0_report_here"), lang))
                return worst_exit_code(emit(report, args), code if 0 <= code < 128 else 0)
            written = observer.rank0_exit_code()
            if written is not None:  # the run's verdict, not torchrun's view of this node's ranks
                return written
    finally:
        del store  # kept listening until this node's torchrun has left the rendezvous
    return exit_code_for(stopped_by) if stopped_by else code
