"""`gpuready report` (issue 22): saved documents rendered again on the console or as --junit/--markdown/--html files,
the exit code the worst of the documents' own; a file that is not a report is one sentence (exit 2) and the others are
still rendered. check, validate, burn and bench write the same files beside their own report, each path checked
before any work."""

import argparse
import json
import os
import sys
import types
from pathlib import Path

import pytest
from junitparser import JUnitXml

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.verbs.report import document_exit_code
from gpuready.cli.report_files import write_report_files

BURN = FIXTURES / "h200-burn" / "burn-60s-report.json"  # ready, exit 0
VALIDATE_SHARED = FIXTURES / "h200-shared-gpu" / "validate-foreign-loop.json"  # not ready, exit 1
VALIDATE_STOPPED = FIXTURES / "h200-shared-gpu" / "validate-sigterm.json"  # stopped by SIGTERM, exit 143
H200_BUNDLE = FIXTURES / "h200-collect"


def run(capsys, *argv):
    code = cli.main(["report", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_document_prints_its_console_view_and_exits_with_its_code(capsys):
    code, out, err = run(capsys, VALIDATE_SHARED)
    assert code == ExitCode.NOT_READY and err == ""
    assert out.splitlines()[0] == "vm: NOT READY" and "FAIL compute.low" in out and "==>" not in out


def test_the_exit_code_is_the_worst_of_the_documents(capsys):
    """0 (the burn), 1 (validate beside a foreign process) and 143 (validate stopped by SIGTERM): a signal outranks
    the rest (DESIGN.md §2)."""
    code, out, _err = run(capsys, BURN, VALIDATE_SHARED, VALIDATE_STOPPED)
    assert code == 143
    assert [line for line in out.splitlines() if line.startswith("==> ")] == [
        f"==> {BURN} <==", f"==> {VALIDATE_SHARED} <==", f"==> {VALIDATE_STOPPED} <=="]
    assert run(capsys, BURN, VALIDATE_SHARED)[0] == ExitCode.NOT_READY


def test_a_file_that_is_not_a_report_is_one_sentence_and_the_others_still_render(capsys, tmp_path):
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"verdict": "ready", "findings": [')
    code, out, err = run(capsys, H200_BUNDLE / "manifest.json", BURN, corrupt, tmp_path / "absent.json")
    assert code == ExitCode.USAGE
    assert err.splitlines() == [
        f"gpuready: {H200_BUNDLE / 'manifest.json'} is not a gpuready report (a JSON object with findings or a "
        "verdict, as --json and --out write it); the other files are still rendered",
        f"gpuready: report {corrupt}: not valid JSON (Expecting value: line 1 column 35 (char 34)); the other files "
        "are still rendered",
        f"gpuready: report {tmp_path / 'absent.json'}: cannot read it (No such file or directory); the other files are "
        "still rendered"]
    assert out.splitlines()[0] == "vm: READY" and "burn: 8 passed" in out


def test_a_lone_bad_file_is_said_without_the_others(capsys, tmp_path):
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    code, out, err = run(capsys, "--lang", "zh", listed)
    assert (code, out) == (ExitCode.USAGE, "")
    assert err == (f"gpuready: {listed} 不是 gpuready 报告（--json 和 --out 写出的、含 findings 或 verdict 的 JSON 对象）\n")


def test_report_files_hold_every_document_and_replace_the_console(capsys, tmp_path):
    """--junit and --markdown: one suite and one section per document; stdout only says what was written (issue
    32). The burn has 8 findings (all pass), the validate 12 (6 fail, 1 skip)."""
    junit, summary = tmp_path / "ci.xml", tmp_path / "ticket.md"
    code, out, err = run(capsys, BURN, VALIDATE_SHARED, "--junit", junit, "--markdown", summary)
    assert (code, err) == (ExitCode.NOT_READY, "")
    assert [line.split(" (")[0] for line in out.splitlines()] == [f"--junit: wrote {junit}", f"--markdown: wrote {summary}"]
    report = JUnitXml.fromfile(str(junit))
    assert [(suite.name, suite.tests, suite.failures) for suite in report] == [("burn/vm", 8, 0),
                                                                              ("validate/vm", 12, 6)]
    headings = [line for line in summary.read_text().splitlines() if line.startswith("## ")]
    assert headings == ["## gpuready burn: vm", "## gpuready validate: vm"]


def test_an_older_document_without_an_exit_code_exits_as_its_verdict_says(capsys, tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"verdict": "not_ready", "findings": [
        {"check_id": "pcie.link_degraded", "status": "fail", "message": "x8 of x16"}]}))
    code, out, _err = run(capsys, old, "--markdown", tmp_path / "old.md")
    assert code == ExitCode.NOT_READY
    assert "- **FAIL** `pcie.link_degraded`" in (tmp_path / "old.md").read_text()
    assert [document_exit_code(document) for document in (
        {"verdict": "ready"}, {"verdict": "unknown"}, {}, {"exit_code": True, "verdict": "ready"},
        {"exit_code": 77, "verdict": "ready_with_warnings"}, {"exit_code": 4})] == [0, 2, 2, 0, 0, 4]


@pytest.mark.parametrize("option", ["--junit", "--markdown", "--html"])
def test_an_output_path_is_checked_before_anything_is_read(capsys, tmp_path, option):
    """A folder that does not exist: one sentence, exit 2, before the (absent) input is even looked at."""
    code, out, err = run(capsys, tmp_path / "absent.json", option, tmp_path / "no" / "such" / "file")
    assert (code, out) == (ExitCode.USAGE, "")
    assert err == (f"gpuready: {option} {tmp_path / 'no' / 'such' / 'file'}: the folder {tmp_path / 'no' / 'such'} "
                   "does not exist (gpuready does not create it)\n")


def test_an_output_path_that_is_a_folder_or_a_fifo_is_refused(capsys, tmp_path):
    code, _out, err = run(capsys, BURN, "--junit", tmp_path)
    assert code == ExitCode.USAGE and err == f"gpuready: --junit {tmp_path} is a folder; give a file name\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code, _out, err = run(capsys, BURN, "--markdown", fifo)
    assert code == ExitCode.USAGE
    assert err == f"gpuready: --markdown {fifo} is not a regular file (a FIFO); give a file name\n"


def test_a_file_that_cannot_be_written_after_the_work_is_said_and_the_others_are_written(capsys, tmp_path):
    """Checked at start, gone at the end: the folder of --junit removed, a FIFO put in --markdown's place (never
    opened: it would block). Exit 2 at least; the console's JSON and the other files are complete."""
    gone = tmp_path / "gone"
    gone.mkdir()
    fifo = tmp_path / "pipe.md"
    os.mkfifo(fifo)
    args = argparse.Namespace(junit=gone / "ci.xml", markdown=fifo, html=None, lang="en", verbose=False,
                              fail_on="fail")
    gone.rmdir()
    assert write_report_files([json.loads(BURN.read_text())], args) == ExitCode.USAGE
    assert capsys.readouterr().err.splitlines() == [
        f"gpuready: --junit {gone / 'ci.xml'}: cannot write it (No such file or directory); the other reports are "
        "complete",
        f"gpuready: --markdown {fifo} is not a regular file (a FIFO); give a file name"]


def test_html_is_the_html_module_s_and_its_absence_is_said(capsys, tmp_path, monkeypatch):
    """--html calls gpuready.report.html.render_html(documents, lang) (its own tests are test_html_report.py's);
    a gpuready without that module says so and exits 3, the other files still written."""
    calls = []

    def render_html(documents, lang):
        calls.append(([d["host"] for d in documents], lang))
        return "<html>page</html>"
    fake = types.ModuleType("gpuready.report.html")
    fake.render_html = render_html
    monkeypatch.setitem(sys.modules, "gpuready.report.html", fake)
    page = tmp_path / "page.html"
    assert run(capsys, BURN, "--html", page, "--lang", "zh")[0] == ExitCode.READY
    assert calls == [(["vm"], "zh")] and page.read_text() == "<html>page</html>"
    monkeypatch.setitem(sys.modules, "gpuready.report.html", None)
    code, _out, err = run(capsys, BURN, "--html", page, "--markdown", tmp_path / "m.md")
    assert code == ExitCode.TOOL_ERROR and (tmp_path / "m.md").exists()
    assert err == ("gpuready: --html: this gpuready has no HTML report (gpuready.report.html); the other reports are "
                   "complete\n")


def test_a_report_file_on_stdout_replaces_the_console(capsys, tmp_path):
    """`--markdown -` (a CI step summary): the Markdown alone on stdout, the same text as the file; with --json too,
    one sentence and exit 2 before any work."""
    summary = tmp_path / "summary.md"
    assert run(capsys, BURN, "--markdown", summary)[0] == ExitCode.READY
    code, out, err = run(capsys, BURN, "--markdown", "-")
    assert code == ExitCode.READY and err == "" and out == summary.read_text(encoding="utf-8")
    assert cli.main(["check", "--bundle", str(H200_BUNDLE), "--json", "--junit", "-"]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and \
        captured.err == "gpuready: --json and --junit - both write to stdout; send one of them to a file\n"
    assert cli.main(["check", "--bundle", str(H200_BUNDLE), "--junit", "-"]) == ExitCode.READY
    [suite] = list(JUnitXml.fromstring(capsys.readouterr().out.encode()))
    assert (suite.tests, suite.failures, suite.skipped) == (60, 0, 12)


def test_check_writes_the_same_files_beside_its_report(capsys, tmp_path):
    """`check --bundle` on the recorded H200: 60 cases (12 skipped), the warning a failure with --fail-on warn, and the
    Markdown the report verb writes from the saved JSON is the same text."""
    junit, summary, saved = tmp_path / "ci.xml", tmp_path / "check.md", tmp_path / "check.json"
    code = cli.main(["check", "--bundle", str(H200_BUNDLE), "--junit", str(junit), "--markdown", str(summary),
                     "--out", str(saved), "--fail-on", "warn"])
    capsys.readouterr()
    assert code == ExitCode.NOT_READY
    [suite] = list(JUnitXml.fromfile(str(junit)))
    assert (suite.tests, suite.failures, suite.skipped) == (60, 1, 12)
    again = tmp_path / "again.md"
    assert run(capsys, saved, "--markdown", again)[0] == ExitCode.NOT_READY
    assert again.read_text() == summary.read_text()
    assert summary.read_text().startswith("## gpuready check: vm\n")


def test_check_refuses_an_output_path_before_any_work(capsys, tmp_path):
    code = cli.main(["check", "--bundle", str(tmp_path / "no-bundle"), "--markdown", str(tmp_path / "x" / "m.md")])
    assert code == ExitCode.USAGE
    assert capsys.readouterr().err.startswith(f"gpuready: --markdown {tmp_path / 'x' / 'm.md'}: the folder ")


@pytest.mark.parametrize("verb", ["check", "validate", "burn", "bench", "report"])
def test_every_reporting_verb_has_the_three_options(verb):
    shown = cli.build_parser(verb).verb_parser(verb).visible_options()
    assert {"--html", "--junit", "--markdown"} <= set(shown)


def test_the_verb_is_listed_in_the_help(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())  # the help wraps at the terminal's width
    assert "report render saved reports again: console, HTML, JUnit XML, Markdown" in shown


def test_the_report_verb_help_in_chinese(capsys):
    with pytest.raises(SystemExit):
        cli.build_parser("report", "zh").parse_args(["report", "--help"])
    out = "".join(capsys.readouterr().out.split())  # Chinese wraps between characters
    assert "同时把Markdown摘要写入FILE" in out and "报告文件（所在文件夹必须已存在" in out


def test_a_path_in_the_sentence_is_as_given(capsys):
    """Relative paths are said as typed (no resolving): the user recognises them."""
    code, _out, err = run(capsys, BURN, "--junit", Path("no-such-folder") / "ci.xml")
    assert code == ExitCode.USAGE
    assert err.startswith("gpuready: --junit no-such-folder/ci.xml: the folder no-such-folder does not exist")
