"""Every catalogue id the source names exists in both languages.

`said("gpu.lost.lost")` with a mistyped id builds a finding that only breaks when it is rendered, in whichever
language and code path first reaches it. Reading the ids out of the source finds every one of them, the rare paths
too (a fix for a board nobody here has): a literal id must be in the English and the Chinese catalogue, an id built
with an f-string must match at least one id of both, each branch of a conditional id likewise.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpuready.i18n import catalogue

SOURCE = Path(__file__).resolve().parent.parent / "src" / "gpuready"
ID_TAKERS = {"said", "sentence", "said_nested", "message", "say"}
"""Functions whose first argument is a catalogue id (`say` is the report writers' `message` in one language)."""


def id_patterns(node: ast.expr) -> list[re.Pattern] | None:
    """The ids an argument can be, as patterns; None where it is not written in the call (a variable)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [re.compile(re.escape(node.value))]
    if isinstance(node, ast.JoinedStr):
        parts = [re.escape(part.value) if isinstance(part, ast.Constant) else ".+" for part in node.values]
        return [re.compile("".join(parts))]
    if isinstance(node, ast.IfExp):
        branches = [id_patterns(node.body), id_patterns(node.orelse)]
        return None if None in branches else branches[0] + branches[1]
    return None


def named_ids() -> list[tuple[str, re.Pattern]]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name not in ID_TAKERS:
                continue
            for pattern in id_patterns(node.args[0]) or []:
                found.append((f"{path.relative_to(SOURCE)}:{node.lineno}", pattern))
    return found


def test_the_source_names_hundreds_of_ids():
    """The reader itself: it finds the ids (a reader that finds none would pass the test below for nothing)."""
    places = named_ids()
    assert len(places) > 1000
    assert ("checks/gpu.py", "gpu.lost.lost") in {(where.split(":")[0], pattern.pattern.replace("\\", ""))
                                                   for where, pattern in places}


def test_a_mistyped_id_is_found():
    tree = ast.parse('said("gpu.lost.lostt")\nsaid(f"gpu.present.unusable_{cause}")\n'
                     'said("a.b" if x else "gpu.lost.lost")')
    patterns = [id_patterns(call.value.args[0]) for call in tree.body]
    ids = catalogue("en")
    assert not any(pattern.fullmatch(known) for known in ids for pattern in patterns[0])
    assert any(patterns[1][0].fullmatch(known) for known in ids)
    assert [any(pattern.fullmatch(known) for known in ids) for pattern in patterns[2]] == [False, True]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_id_the_source_names_is_catalogued(lang):
    ids = catalogue(lang)
    missing = [f"{where} {pattern.pattern}" for where, pattern in named_ids()
               if not any(pattern.fullmatch(known) for known in ids)]
    assert missing == []
