"""A local run's progress as plain lines on stderr: the plan, then each phase change of the lowest rank (--json
output stays clean). The live display the renderers will own replaces it."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable


def phase_printer(predicted_s: float, device: str, ranks: int, options: Any) -> Callable[[dict], None]:
    """Print the plan now; the function returned prints each phase change as the ranks post it."""
    started = time.monotonic()
    print(f"gpuready validate: {ranks} rank(s) on {device}, workloads {', '.join(options.only)}"
          f"{' (quick)' if options.quick else ''}; predicted about {predicted_s:.0f} s", file=sys.stderr)
    last: dict[int, str] = {}

    def show(posts) -> None:
        for rank, post in sorted(posts.items()):
            phase = post.phase
            if last.get(rank) != phase and rank == min(posts):
                try:
                    print(f"  [{time.monotonic() - started:5.1f} s] {phase}: {post.operation}", file=sys.stderr)
                except BrokenPipeError:  # nobody reads stderr any more: the run and its report go on
                    pass
            last[rank] = phase
    return show
