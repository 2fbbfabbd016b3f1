"""The layout's figures, as the issue counts them: rooms, arrows, arrows running back up, circles (rooms and files),
nevers broken, function-local imports that no heavy package excuses, functions over 80 lines. Prints a line each,
then the offenders.

    python benchmarks/layout.py [--list]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from layout_graph import (arrows_back_up, circles, long_functions, nevers_broken, read_layout,  # noqa: E402
                          room_circles)


def main() -> None:
    layout = read_layout()
    figures = {
        "rooms": sorted(layout.rooms),
        "arrows": [f"{a} → {b}" for a, b in sorted(layout.arrows)],
        "arrows back up": arrows_back_up(layout),
        "room circles": [" ↔ ".join(c) for c in room_circles(layout)],
        "file circles": [" ↔ ".join(c) for c in circles(layout.module_arrows)],
        "nevers broken": nevers_broken(layout),
        "local imports not excused": [f"{i.where} {target}" for i, target in layout.local_imports],
        "functions over 80 lines": long_functions(),
    }
    for name, items in figures.items():
        print(f"{name}: {len(items)}")
    if "--list" in sys.argv:
        for name, items in figures.items():
            if name not in ("rooms", "arrows"):
                for item in items:
                    print(f"  {name}: {item}")


if __name__ == "__main__":
    main()
