"""Issue 32, hostile input round 3: each class reproduced by a small generator, and each fails closed (one sentence,
a documented exit code, bounded time and memory).

- JSON input: the nesting count before the parser reads an unterminated string of `\\"` repeats once, not once per
  quote (it was quadratic: 64 KB took 16 s);
- catalogue text inside catalogue text: a saved report's `message_values` nested 22 levels through
  `pcie.aer.device_both.fix` (which names `{address}` twice) doubled at every level (hundreds of MB); now at most
  `MAX_SAID_DEPTH` levels are rendered and one message is at most `MAX_MESSAGE_CHARS` characters;
- a lone surrogate (`"\\ud800"` in a JSON file) crashed every text output with exit 3; now it is written as U+FFFD
  on stdout and stderr (`safe_streams`), in every file (`encoded`) and in what `read_json_input` returns;
- a saved report is validated when read (`model.document_problem`: a finding whose `status` is a list is "not a
  gpuready report: …", exit 2), and a `started_at` in year 9999 with an offset no longer overflows `--junit`;
- an nvml.json that lists one bus id twice, the second reading with 12 uncorrectable ECC errors, was READY WITH
  WARNINGS; the duplicate is named (exit 2) and the worst reading is judged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.i18n import MAX_MESSAGE_CHARS, MAX_SAID_DEPTH, message, said
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
    ('["a\\\n[[[[[["]', 1),                       # a backslash escapes a newline too (the parser refuses it)
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


# --- catalogue text that doubles at every level ------------------------------------------------------------------

SUBJECT = {"host": "h", "gpu": None, "peer": None, "nic": None, "rank": None}


def _doubling_values(levels: int) -> dict:
    values: dict = {"address": "0000:01:00.0"}
    for _ in range(levels):
        values = {"address": {"message_id": "pcie.aer.device_both.fix", "message_values": values}}
    return values


def saved_report(findings: list[dict], **top) -> dict:
    return {"schema_version": "1", "tool_version": "0.1", "run_id": "r", "started_at": "2026-01-01T00:00:00+00:00",
            "host": "h", "verdict": "not_ready", "verdicts": {"single_node": "not_ready", "multi_node": "not_ready"},
            "exit_code": 1, "findings": findings, "measurements": [], "series": [], "facts": {}, **top}


def _doubling_report(levels: int = 22) -> dict:
    values = {"count": 1, "uncorrected": 1, "corrected": 0, "device_class": "NIC", "product": "p", "last_line": "l",
              **_doubling_values(levels)}
    finding = {"check_id": "pcie.aer", "category": "pcie", "status": "fail", "subject": SUBJECT, "observed": "x",
               "expected": "y", "message": "m", "fix": "f", "refs": [], "evidence": [], "consequence_of": None,
               "message_id": "pcie.aer.device_both", "message_values": values}
    return saved_report([finding])


def test_nested_catalogue_text_is_bounded_in_depth_and_length():
    text = message("pcie.aer.device_both.fix", "en", **_doubling_values(22))
    assert len(text) <= MAX_MESSAGE_CHARS + 10            # 2**22 copies of the template before
    assert text.count("Check device") <= 2 ** (MAX_SAID_DEPTH + 1)
    assert "…" in text
    # three levels, as the catalogue's own texts nest, render whole
    shallow = message("pcie.aer.device_both.fix", "en", **_doubling_values(3))
    assert shallow.count("Check device") == 1 + 2 + 4 + 8 and shallow.count("0000:01:00.0") == 16
    assert "…" not in shallow


def test_one_message_is_cut_at_the_cap_in_either_language():
    long_value = "x" * (MAX_MESSAGE_CHARS * 3)
    english = message("pcie.aer.device_both.fix", "en", address=long_value)
    chinese = message("pcie.aer.device_both.fix", "zh", address=long_value)
    assert english.endswith("…(cut)") and len(english) == MAX_MESSAGE_CHARS + len("…(cut)")
    assert chinese.endswith("…（已截断）") and len(chinese) == MAX_MESSAGE_CHARS + len("…（已截断）")
    assert said("pcie.aer.device_both.fix", address=long_value).english() == english


@pytest.mark.parametrize("extra", [[], ["--lang", "zh"], ["--verbose"]])
def test_report_of_a_doubling_document_stays_small_on_the_console(tmp_path, capsys, extra):
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(_doubling_report()), encoding="utf-8")
    assert cli.main(["report", str(path), *extra]) == ExitCode.NOT_READY
    out = capsys.readouterr().out
    assert "pcie.aer" in out and len(out) < 1 << 20


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_report_files_and_compare_of_a_doubling_document_stay_small(tmp_path, capsys, lang):
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(_doubling_report()), encoding="utf-8")
    files = {"--html": tmp_path / "r.html", "--junit": tmp_path / "r.xml", "--markdown": tmp_path / "r.md"}
    argv = ["report", str(path), "--lang", lang]
    argv += [item for option, file in files.items() for item in (option, str(file))]
    assert cli.main(argv) == ExitCode.NOT_READY
    for file in files.values():
        assert 0 < file.stat().st_size < 2 << 20, file
    capsys.readouterr()
    cli.main(["compare", str(path), str(path), "--lang", lang])
    captured = capsys.readouterr()
    assert len(captured.out) + len(captured.err) < 1 << 20 and "Traceback" not in captured.err


# --- lone surrogates -----------------------------------------------------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"
REPLACEMENT = "\ufffd"


def _gpuready(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command as a user runs it: stdout and stderr are real UTF-8 pipes (pytest's capture is not)."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "GPUREADY_LANG": "en"}
    return subprocess.run([sys.executable, "-m", "gpuready", *argv], cwd=cwd, capture_output=True, env=env,
                          timeout=120)


def _surrogate_report(tmp_path: Path) -> Path:
    finding = {"check_id": "gpu.present", "category": "gpu", "status": "fail",
               "subject": {**SUBJECT, "host": "h\udfff"},
               "observed": "x\ud800", "expected": "y", "message": "bad \ud800 text", "fix": "f\udc00", "refs": [],
               "evidence": [], "consequence_of": None, "message_id": None, "message_values": None}
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(saved_report([finding], host="h\udfff")), encoding="ascii")  # `\ud800` escapes
    assert "\\ud800" in path.read_text()
    return path


@pytest.mark.parametrize("extra", [[], ["--lang", "zh"], ["--verbose"]])
def test_report_console_writes_a_lone_surrogate_as_the_replacement_character(tmp_path, extra):
    path = _surrogate_report(tmp_path)
    done = _gpuready("report", str(path), *extra, cwd=tmp_path)
    assert done.returncode == ExitCode.NOT_READY, done.stderr.decode()
    assert f"bad {REPLACEMENT} text" in done.stdout.decode("utf-8")


def test_report_files_write_a_lone_surrogate_as_the_replacement_character(tmp_path, capsys):
    path = _surrogate_report(tmp_path)
    files = {"--html": tmp_path / "r.html", "--junit": tmp_path / "r.xml", "--markdown": tmp_path / "r.md"}
    argv = ["report", str(path)] + [item for option, file in files.items() for item in (option, str(file))]
    assert cli.main(argv) == ExitCode.NOT_READY, capsys.readouterr().err
    for file in files.values():
        assert f"bad {REPLACEMENT} text" in file.read_bytes().decode("utf-8"), file


def test_compare_of_documents_with_a_lone_surrogate(tmp_path):
    path = _surrogate_report(tmp_path)
    other = tmp_path / "other.json"
    other.write_text(path.read_text().replace('"status": "fail"', '"status": "pass"'), encoding="ascii")
    done = _gpuready("compare", str(other), str(path), cwd=tmp_path)
    assert done.returncode in (ExitCode.READY, ExitCode.NOT_READY), done.stderr.decode()
    assert "internal error" not in done.stderr.decode() and REPLACEMENT in done.stdout.decode("utf-8")


def test_fleet_pages_with_a_lone_surrogate_in_host_and_unit(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    document = json.loads((FIXTURES / "h200-bench" / "bench-760M-bf16-mb4.json").read_text())
    for number, host in enumerate(["node\ud800", "n2", "n3"]):
        document["host"] = host
        for measurement in document.get("measurements", []):
            measurement["unit"] = "u\udc00"
        (folder / f"{number}.json").write_text(json.dumps(document), encoding="ascii")
    done = _gpuready("fleet", str(folder), "--html", "f.html", "--markdown", "f.md", cwd=tmp_path)
    assert done.returncode in (ExitCode.READY, ExitCode.NOT_READY), done.stderr.decode()
    assert "internal error" not in done.stderr.decode()
    assert f"node{REPLACEMENT}" in (tmp_path / "f.html").read_bytes().decode("utf-8")
    assert "fleet" in (tmp_path / "f.md").read_bytes().decode("utf-8")  # no outlier: the markdown names no node


@pytest.mark.parametrize("verb", ["check", "diagnose"])
def test_a_bundle_whose_gpu_name_holds_a_lone_surrogate(tmp_path, verb):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    nvml = json.loads((FIXTURES / "h200-collect" / "nvml.json").read_text())
    nvml["gpus"][0]["name"] = "NVIDIA H200 \ud800"
    (bundle / "nvml.json").write_text(json.dumps(nvml), encoding="ascii")
    argv = ["check", "--bundle", str(bundle)] if verb == "check" else ["diagnose", str(bundle)]
    done = _gpuready(*argv, "--html", "r.html", "--markdown", "r.md", "--junit", "r.xml", cwd=tmp_path)
    assert done.returncode in (ExitCode.READY, ExitCode.NOT_READY, ExitCode.USAGE), done.stderr.decode()
    assert "internal error" not in done.stderr.decode()
    console = _gpuready(*argv, "--verbose", cwd=tmp_path)
    assert console.returncode == done.returncode and "internal error" not in console.stderr.decode()
    assert f"H200 {REPLACEMENT}" in console.stdout.decode("utf-8") + (tmp_path / "r.html").read_text("utf-8")


# --- a saved report is validated when read; dates without overflow ---------------------------------------------------

def _finding(**changes) -> dict:
    return {"check_id": "gpu.present", "category": "gpu", "status": "fail", "subject": SUBJECT, "observed": [1, 2],
            "expected": {"a": 1}, "message": "m", "fix": None, "refs": [], "evidence": [], "consequence_of": None,
            "message_id": None, "message_values": None, **changes}


@pytest.mark.parametrize(("document", "named"), [
    (saved_report([_finding(status=["fail"])]), "findings[0].status is a JSON array where a JSON string belongs"),
    (saved_report([_finding(), _finding(message={"x": 1})]), "findings[1].message is a JSON object"),
    (saved_report([_finding(), 7]), "findings[1] is a JSON number where a JSON object belongs"),
    (saved_report([_finding(message_values=[1])]), "findings[0].message_values is a JSON array"),
    (saved_report([], verdicts="ready"), "verdicts is a JSON string where a JSON object belongs"),
    (saved_report([], exit_code=True), "exit_code is a JSON boolean where a JSON number belongs"),
    (saved_report([], started_at=20260101), "started_at is a JSON number"),
    (saved_report([], measurements=[{"name": "x", "value": "fast"}]), "measurements[0].value is a JSON string"),
])
def test_a_report_of_the_wrong_types_is_refused_in_one_sentence(tmp_path, capsys, document, named):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    for extra in ([], ["--junit", str(tmp_path / "r.xml")], ["--html", str(tmp_path / "r.html")]):
        error = _one_sentence(capsys, ["report", str(path), *extra])
        assert f"{path} is not a gpuready report: its {named}" in error, error
    assert not (tmp_path / "r.xml").exists() and not (tmp_path / "r.html").exists()
    assert "不是 gpuready 报告" in _one_sentence(capsys, ["report", str(path), "--lang", "zh"])
    assert named in _one_sentence(capsys, ["compare", str(path), str(path)])


def test_reports_of_this_version_and_older_ones_are_not_refused(tmp_path, capsys):
    older = {"verdict": "ready", "findings": [{"check_id": "gpu.present", "status": "pass", "observed": None}]}
    for number, document in enumerate([older, saved_report([_finding(status="unknown-status")])]):
        path = tmp_path / f"{number}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        assert cli.main(["report", str(path)]) in (ExitCode.READY, ExitCode.NOT_READY), capsys.readouterr().err


@pytest.mark.parametrize("started_at", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+05:00",
                                        "9999-12-31T23:59:59+00:00", "not a date", "2026-02-30T00:00:00"])
def test_junit_dates_do_not_overflow(tmp_path, capsys, started_at):
    path = tmp_path / "dated.json"
    path.write_text(json.dumps(saved_report([_finding()], started_at=started_at)), encoding="utf-8")
    assert cli.main(["report", str(path), "--junit", str(tmp_path / "r.xml")]) == ExitCode.NOT_READY
    written = (tmp_path / "r.xml").read_text(encoding="utf-8")
    expected = 'timestamp="9999-12-31T23:59:59"' if started_at.endswith("+00:00") else "timestamp="
    assert (expected in written) == started_at.endswith("+00:00"), written


# --- one GPU listed twice ------------------------------------------------------------------------------------------

def _twice_listed(tmp_path: Path, **second) -> Path:
    nvml = json.loads((FIXTURES / "h200-collect" / "nvml.json").read_text())
    again = {**nvml["gpus"][0], "index": 1, **second}
    nvml["gpus"].append(again)
    nvml["device_count"] = 2
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "nvml.json").write_text(json.dumps(nvml), encoding="utf-8")
    return bundle


def _check(bundle: Path, capsys) -> tuple[int, dict]:
    code = cli.main(["check", "--bundle", str(bundle), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_one_bus_id_listed_twice_is_named_and_its_worst_reading_judged(tmp_path, capsys):
    code, document = _check(_twice_listed(tmp_path, ecc_uncorrected_volatile=12, ecc_uncorrected_aggregate=12),
                            capsys)
    statuses = {finding["check_id"]: finding["status"] for finding in document["findings"]}
    assert statuses["health.ecc_uncorrected"] == "fail"          # the second reading's 12 errors
    assert document["verdict"] == "not_ready" and code == ExitCode.USAGE   # an input error: exit 2 wins over 1
    named = [finding for finding in document["findings"] if finding["check_id"] == "bundle.unreadable"]
    assert len(named) == 1 and "0000:00:06.0" in named[0]["message"] and "more than once" in named[0]["message"]
    assert len(document["facts"]["gpus"]) == 1


@pytest.mark.parametrize(("second", "check_id"), [
    ({"remapped_rows_uncorrectable": 3, "remap_failure": True}, "health.row_remap_failure"),
    ({"pcie_width_current": 4}, "pcie.link_degraded"),
])
def test_the_worse_reading_wins_whichever_comes_second(tmp_path, capsys, second, check_id):
    _code, document = _check(_twice_listed(tmp_path, **second), capsys)
    statuses = {finding["check_id"]: finding["status"] for finding in document["findings"]}
    assert statuses.get(check_id) in ("warn", "fail"), statuses


def test_a_gpu_listed_once_is_no_input_error(tmp_path, capsys):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "nvml.json").write_bytes((FIXTURES / "h200-collect" / "nvml.json").read_bytes())
    code, document = _check(bundle, capsys)
    assert code == ExitCode.READY and not any(f["check_id"] == "bundle.unreadable" for f in document["findings"])
