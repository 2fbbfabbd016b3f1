"""The layers of docs/architecture.md hold: read from the source, every import counted (a function-local one too).

Each test names the offenders, `file:line`, so a failure says what to move.
"""

from __future__ import annotations

from layout_graph import (LAYERS, Import, arrows_back_up, circles, imports_of, level_of, long_functions,
                          nevers_broken, read_layout, room_circles, room_of)

LAYOUT = read_layout()


def test_no_import_runs_back_up_a_layer():
    assert arrows_back_up(LAYOUT) == []


def test_no_rule_of_the_layers_is_broken():
    assert nevers_broken(LAYOUT) == []


def test_no_circle_between_rooms_or_between_files():
    assert room_circles(LAYOUT) == []
    assert circles(LAYOUT.module_arrows) == []


def test_functions_import_late_only_what_is_heavy():
    late = [f"{statement.where} {target}" for statement, target in LAYOUT.local_imports]
    assert late == []


def test_no_function_is_longer_than_80_lines():
    assert long_functions() == []


def test_every_room_has_a_layer():
    for room in LAYOUT.rooms:
        assert level_of(room) in range(len(LAYERS)), room


# The reader itself, on sources written for it: what it must see and what it must not count.

def test_a_function_local_import_is_seen_and_marked_late():
    source = ("import re\n"
              "from gpuready.model import Finding\n"
              "def judge():\n"
              "    from gpuready.verbs.plan import run\n"
              "    import torch\n")
    found = imports_of(source, "gpuready.checks.pcie", "pcie.py")
    assert [(i.where, i.module, i.local) for i in found] == [
        ("pcie.py:1", "re", False), ("pcie.py:2", "gpuready.model", False),
        ("pcie.py:4", "gpuready.verbs.plan", True), ("pcie.py:5", "torch", True)]


def test_rooms_are_packages_top_level_modules_and_single_verbs():
    assert room_of("gpuready.verbs.plan.cli") == "verbs/plan"
    assert room_of("gpuready.facts.nvml") == "facts"
    assert room_of("gpuready.pipeline") == "pipeline"
    assert room_of("torch.cuda") is None


def test_circles_are_found_with_every_member_and_nothing_else():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": set(), "f": {"f"}}
    assert circles(edges) == [["a", "b", "c"]]


def test_a_verb_importing_another_verb_breaks_a_rule(tmp_path):
    package = tmp_path / "gpuready"
    for folder in ("verbs/plan", "verbs/bench"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "verbs" / "__init__.py").write_text("")
    (package / "verbs" / "plan" / "memory.py").write_text("X = 1\n")
    (package / "verbs" / "bench" / "run.py").write_text("def f():\n    from gpuready.verbs.plan.memory import X\n")
    layout = read_layout(tmp_path)
    assert [line.split(" (")[0] for line in nevers_broken(layout)] == ["verbs/bench → verbs/plan"]
    assert [f"{i.where}" for i, _ in layout.local_imports] == ["gpuready/verbs/bench/run.py:2"]
    assert isinstance(layout.local_imports[0][0], Import)
