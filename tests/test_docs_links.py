"""What ships (src/, README.md, docs/) points only at what its users have (issue 32): no path into the project's
private notes or this build machine, every relative Markdown link reaches a file, and every Markdown table renders as
one (each row has the header's column count; a row broken over two lines, or a bare `|` in a cell, fails)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TEXT_SUFFIXES = {".py", ".toml", ".po", ".md", ".json", ".txt", ".yaml", ".yml", ".html", ".js", ".css", ".cfg"}

PRIVATE = re.compile(
    r"\.\./shared/"                    # ../shared/DESIGN.md: the project's notes, beside the repository
    r"|(?<![\w/.-])shared/"            # shared/reference/…, shared/fixtures/… (a cluster path such as /shared/reports
                                       # or the fixture folder h200-shared/ is not one)
    r"|anchors-[a-z-]+\.md"            # the research notes by name
    r"|/work/"                         # this build machine
    r"|/(?:home|Users)/(?!<)[A-Za-z0-9_.-]+/")  # someone's home (`/home/<user>`, a placeholder, is fine)


def _shipped_files() -> list[Path]:
    files = [path for path in (ROOT / "src").rglob("*") if path.is_file() and path.suffix in TEXT_SUFFIXES
             and "__pycache__" not in path.parts and not any(part.endswith(".egg-info") for part in path.parts)]
    return [*files, *MARKDOWN]


def test_the_patterns_catch_what_they_are_for():
    for bad in ("see ../shared/DESIGN.md", "refs: shared/reference/x.md §5", "anchors-planning-diagnosis.md",
                "/work/main/src", "/home/alice/x"):
        assert PRIVATE.search(bad), bad
    for fine in ("--reports /shared/reports", "tests/fixtures/h200-shared/", "/home/<user>", "shared memory"):
        assert not PRIVATE.search(fine), fine


def test_no_shipped_file_points_at_private_notes_or_a_machine_path():
    found = []
    for path in _shipped_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            match = PRIVATE.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)!r}")
    assert found == []


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: path.name)
def test_relative_links_reach_a_file(page):
    missing = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        if not (page.parent / target.split("#", 1)[0]).exists():
            missing.append(target)
    assert missing == []


def _cells(row: str) -> int:
    """GFM's column count of a table row: the unescaped pipes (a pipe inside a code span splits the cell too)."""
    pipes = len(re.findall(r"(?<!\\)\|", row.strip()))
    return pipes - 1 if row.strip().endswith("|") else pipes


BLOCK_START = re.compile(r"\s*(?:[-*+] |\d+[.)] |#|```|>)")
"""A line that starts another block (a list item, a heading, a fence, a quote) ends a table, as GFM reads it; any
other line after a table's rows is one more row (the bogus rows a cell broken over two lines makes)."""


def _tables(text: str) -> list[list[tuple[int, str]]]:
    """Each table as its lines (number, text): from a `|` line followed by a delimiter row to the next blank line or
    the start of another block."""
    lines = text.splitlines()
    tables, fenced, number = [], False, 0
    while number < len(lines):
        line = lines[number]
        fenced ^= line.lstrip().startswith("```")
        nxt = lines[number + 1] if number + 1 < len(lines) else ""
        if not fenced and line.lstrip().startswith("|") and re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", nxt) and "-" in nxt:
            table = []
            while number < len(lines) and lines[number].strip() and not (table and BLOCK_START.match(lines[number])):
                table.append((number + 1, lines[number]))
                number += 1
            tables.append(table)
        number += 1
    return tables


def test_a_broken_row_is_seen():
    good = "| a | b |\n|---|---|\n| `x \\| y` | z |\n"
    assert all(_cells(line) == 2 for _, line in _tables(good)[0])
    broken = "| a | b |\n|---|---|\n| one | two\ncontinued |\n"
    assert any(not line.lstrip().startswith("|") for _, line in _tables(broken)[0])


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda path: path.name)
def test_every_table_row_has_the_header_columns(page):
    wrong = []
    for table in _tables(page.read_text(encoding="utf-8")):
        columns = _cells(table[0][1])
        for number, line in table:
            if not line.lstrip().startswith("|") or _cells(line) != columns:
                wrong.append(f"{page.name}:{number}: {_cells(line)} cells, header {columns}")
    assert wrong == []
