"""SIGTERM and SIGHUP: stop cleanly, keep what was measured, and never leave ranks behind.

The parent (the `gpuready` process that started the ranks) turns the signals into an exception in its main
thread, as Ctrl-C already is, so the runner stops its ranks and the verb writes a partial report.

A rank cannot do that: its main thread may sit in a collective inside C++ for minutes, and Python runs signal
handlers only between bytecodes of the main thread. So a rank blocks the signals in every thread and one thread
waits for them with `sigwait`; it acts at once whatever the main thread is doing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1
PARENT_PID_VARIABLE = "GPUREADY_PARENT_PID"
"""Set by the local runner: the rank checks its parent is still this PID after asking to die with it."""


class Stopped(BaseException):
    """SIGTERM or SIGHUP reached the parent (a BaseException, like KeyboardInterrupt: no `except Exception` eats it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


def exit_without_teardown(code: int) -> None:
    """End this process with `code`. One that imported torch ends at once (os._exit) after flushing standard output
    and error: the interpreter's teardown of torch, and of CUDA and NCCL in a rank, only frees what the process's
    end frees anyway, and a local `validate` waits for it twice (its rank's exit, then its own). With a CUDA context
    and an NCCL group on an H200 the way out took 0.50-0.72 s with the teardown and 0.12-0.15 s without; with gloo on
    the 2-core VM 0.78-0.89 s and 0.03-0.04 s (benchmarks/validate_exit.py). gpuready's own files are closed before
    this is called. A process without torch, or one measured by coverage (whose data is written at exit), exits the
    usual way."""
    if "torch" not in sys.modules or "coverage" in sys.modules:
        raise SystemExit(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone away: nothing more to say to it
            pass
    os._exit(code)


def exit_code_for(signal_name: str | None) -> int:
    """128 + the signal's number, as shells report a process the signal ended: 130 SIGINT, 143 SIGTERM, 129 SIGHUP."""
    return 128 + int(getattr(signal.Signals, signal_name or "SIGINT", signal.SIGINT))


@contextmanager
def stop_signals_raise() -> Iterator[None]:
    """In the parent's main thread: SIGTERM and SIGHUP raise Stopped while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_stopped(signum: int, _frame: object) -> None:
        raise Stopped(signum)

    previous = {sig: signal.signal(sig, raise_stopped) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def handle_stop_signals_in_thread(on_signal: Callable[[int], None]) -> None:
    """In a rank, before any other thread starts: block SIGTERM/SIGHUP in every thread (threads inherit the mask)
    and call `on_signal(signum)` from a dedicated thread when one arrives. `on_signal` should end the process."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)

    def wait() -> None:
        signum = signal.sigwait(STOP_SIGNALS)
        try:
            on_signal(signum)
        finally:
            os._exit(exit_code_for(signal.Signals(signum).name))

    threading.Thread(target=wait, daemon=True, name="gpuready-signals").start()


def die_with_parent() -> None:
    """Linux: the kernel sends this rank SIGKILL when its parent dies, even by SIGKILL (PR_SET_PDEATHSIG).

    A parent that died before the call is caught by comparing with the PID the local runner handed down."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    expected = os.environ.get(PARENT_PID_VARIABLE)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(exit_code_for("SIGKILL"))
