"""Issue 32, hostile input round 3: each class reproduced by a small generator, and each fails closed (one sentence,
a documented exit code, bounded time and memory).

- JSON input: the nesting count before the parser reads an unterminated string of `\\"` repeats once, not once per
  quote (it was quadratic: 64 KB took 16 s);
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.options import InputFileError, json_depth, read_json_input


def _one_sentence(capsys, argv: list[str], code: int = ExitCode.USAGE) -> str:
    got = cli.main(argv)
    error = capsys.readouterr().err
    assert got == code, (argv, got, error)
    assert error.startswith("gpuready: ") and error.count("\n") == 1, (argv, error)
    assert "Traceback" not in error and "internal error" not in error, (argv, error)
    return error


# --- JSON input: one pass over the text --------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "depth"), [
    ("1", 0),
    ("[]", 1),
    ('{"a": [[1], {"b": []}]}', 4),
    ('["[[[[", "{{{{"]', 1),                      # brackets inside strings do not count
    ('["\\"[[[", "\\\\", [[]]]', 3),              # an escaped quote does not end the string; an escaped backslash does
    ('[[["unterminated [[[[[[', 3),               # an unterminated string reaches to the end
    ('["a\\\n[[[[[["]', 1),                       # a backslash before a newline escapes it (the parser refuses it later)
    ("]]]][[", 0),                                # closing first: the depth is counted from the start
    ("[" * 100 + "]" * 100, 100),
    ("[{}]" * 1000, 2),
])
def test_json_depth_counts_brackets_outside_strings(text, depth):
    assert json_depth(text) == depth


def test_json_depth_stops_early_once_past_the_limit():
    assert 65 <= json_depth("[" * 100_000, 64) < 100_000


@pytest.mark.parametrize("hostile", [
    '["' + '\\"' * (256 << 10),                   # the input: minutes before (quadratic), now a moment
    '{"a": "' + '\\"\\\\' * (128 << 10),
    '"' * (256 << 10) + '[',
])
def test_an_unterminated_string_of_escaped_quotes_is_refused_as_json(tmp_path, hostile, capsys):
    path = tmp_path / "report.json"
    path.write_text(hostile, encoding="utf-8")
    with pytest.raises(InputFileError, match="not valid JSON"):
        read_json_input(path, "report", max_bytes=1 << 20)
    error = _one_sentence(capsys, ["report", str(path)])
    assert "not valid JSON" in error


def test_nesting_is_still_bounded_and_strings_still_parse(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"s": "[[[[[[[[", "a": ' + "[" * 65 + "]" * 65 + "}", encoding="utf-8")
    with pytest.raises(InputFileError, match="nested deeper than 64 levels"):
        read_json_input(deep, "report")
    fine = tmp_path / "fine.json"
    document = {"s": "[[[[\\\"]]]]" * 100, "a": [[[[]]]] * 10}
    fine.write_text(json.dumps(document), encoding="utf-8")
    assert read_json_input(fine, "report") == document
