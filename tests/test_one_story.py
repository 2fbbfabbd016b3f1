"""Issue 32, one result, one story: `compare` names reports that are not one machine's runs of one verb before any
comparison (exit 2) and heads findings by their status; `diagnose`'s headline says what failed first in every view;
`report --html/--markdown/--junit` says what it wrote.

The documents are reports recorded on one NVIDIA H200 (`vm`, bus id 0000:00:06.0, driver 580.159.04:
tests/fixtures/h200-*/README.md) and a `check --bundle` of the recorded H200 bundle.
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.report.compare import compare_documents
from gpuready.report.compare_view import render_compare

BENCH = FIXTURES / "h200-bench" / "bench-760M-bf16-mb4.json"
BUNDLE = FIXTURES / "h200-collect"


@pytest.fixture(scope="module")
def check_report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("check") / "check.json"
    assert cli.main(["check", "--bundle", str(BUNDLE), "--out", str(out), "--json"]) in (0, 1)
    return json.loads(out.read_text())


def shown(document: dict, lang: str = "en") -> str:
    buffer = io.StringIO()
    render_compare(document, lang, False, Console(file=buffer, width=200, color_system=None))
    return buffer.getvalue()


# --- compare: what is compared with what ---------------------------------------------------------------------------

def test_a_check_and_a_bench_are_named_as_two_kinds_of_report_and_exit_2(check_report, tmp_path, capsys):
    """A check of the H200 (49 findings) and a bench on it: no check the one ran is in the other, so bench.decision's
    warn is no news; the console says which verbs before anything else, and the exit code is 2."""
    document = compare_documents(check_report, json.loads(BENCH.read_text()))
    assert document["comparable"] is False and document["exit_code"] == ExitCode.USAGE
    assert document["differences"] == [{"name": "verb", "base": "check", "new": "bench"}]
    assert document["newly_failing"] == document["newly_warning"] == []
    assert "bench.decision" in {entry["check_id"] for entry in document["findings_unmatched"]["new_only"]}
    text = shown(document)
    assert "Newly" not in text and "nothing got worse" not in text
    said = text.index("Not one machine's runs before and after: report of check → bench.")
    assert said < text.index("Unchanged:") < text.index("Result: not comparable as a whole (exit code 2)")
    base = tmp_path / "check.json"
    base.write_text(json.dumps(check_report))
    assert cli.main(["compare", str(base), str(BENCH)]) == ExitCode.USAGE
    assert "Not one machine's runs" in capsys.readouterr().out


def test_another_set_of_gpus_is_another_machine(check_report):
    """The same check with its GPU on bus 0000:00:07.0: named with both bus ids, exit 2 even though nothing changed."""
    other = json.loads(json.dumps(check_report).replace("0000:00:06.0", "0000:00:07.0"))
    document = compare_documents(check_report, other)
    assert document["comparable"] is False and document["exit_code"] == ExitCode.USAGE
    assert [difference["name"] for difference in document["differences"]] == ["gpus"]
    assert "GPUs 1 × H200 SXM (0000:00:06.0) → 1 × H200 SXM (0000:00:07.0)" in shown(document)
    assert "GPU 1 × H200 SXM (0000:00:06.0) → 1 × H200 SXM (0000:00:07.0)" in shown(document, "zh")


def test_a_driver_update_on_the_same_machine_is_named_and_compared(check_report):
    """Before and after a driver update is what compare is for: said first, comparable, exit 0 when nothing got
    worse."""
    updated = copy.deepcopy(check_report)
    updated["facts"]["driver_version"] = "590.44.01"
    document = compare_documents(check_report, updated)
    assert document["comparable"] is True and document["exit_code"] == ExitCode.READY
    assert document["differences"] == [{"name": "driver", "base": "580.159.04", "new": "590.44.01"}]
    assert "The same run and machine, but: driver 580.159.04 → 590.44.01." in shown(document)


def _finding(check_id: str, status: str, dtype: str | None = None) -> dict:
    return {"check_id": check_id, "status": status, "subject": {"host": "vm"}, "message": f"{check_id} {dtype}",
            **({"message_values": {"dtype": dtype}} if dtype else {})}


def test_headings_follow_statuses():
    """memory_bw.low pass → fail is newly failing; validate.gpu_shared pass → warn newly warning, under its own
    heading (never under "failing"); exit 1 for the failure alone."""
    base = {"host": "vm", "findings": [_finding("memory_bw.low", "pass"), _finding("validate.gpu_shared", "pass")]}
    new = {"host": "vm", "findings": [_finding("memory_bw.low", "fail"), _finding("validate.gpu_shared", "warn")]}
    document = compare_documents(base, new)
    assert [entry["check_id"] for entry in document["newly_failing"]] == ["memory_bw.low"]
    assert [entry["check_id"] for entry in document["newly_warning"]] == ["validate.gpu_shared"]
    assert document["exit_code"] == ExitCode.NOT_READY
    text = shown(document)
    failing, warning = text.index("Newly failing (1)"), text.index("Newly warning (1)")
    assert failing < text.index("memory_bw.low vm: pass → fail") < warning < text.index("validate.gpu_shared vm")
    assert "Result: 0 measurement(s) worse, 1 finding(s) newly failing, 1 newly warning; exit code 1." in text
    only_warning = compare_documents(base, {"host": "vm", "findings": [_finding("memory_bw.low", "pass"),
                                                                       _finding("validate.gpu_shared", "warn")]})
    assert "Newly failing" not in shown(only_warning) and only_warning["exit_code"] == ExitCode.READY


def test_findings_listed_in_another_order_pair_by_what_they_name():
    """compute.low for bf16, fp16, tf32 passing, then listed tf32, fp16, bf16 with bf16 failing: bf16 with bf16."""
    base = {"host": "vm", "findings": [_finding("compute.low", "pass", dtype) for dtype in ("bf16", "fp16", "tf32")]}
    new = {"host": "vm", "findings": [_finding("compute.low", "pass", "tf32"), _finding("compute.low", "pass", "fp16"),
                                      _finding("compute.low", "fail", "bf16")]}
    document = compare_documents(base, new)
    assert [entry["message_values"] for entry in document["newly_failing"]] == [{"dtype": "bf16"}]
    assert document["findings_unchanged"] == 2


# --- diagnose: the headline says what failed first ------------------------------------------------------------------

NCCL_SHM = """\
node1:41588:41837 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device
node1:41588:41837 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-1 (size 9637888)
"""
"""NCCL's own warnings of a /dev/shm too small (Docker's 64 MB default), as NCCL 2.x prints them (include/shm.h)."""


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("logs")
    (folder / "nccl-debug.log").write_text(NCCL_SHM)
    out = folder / "report.json"
    assert cli.main(["diagnose", str(folder / "nccl-debug.log"), "--out", str(out), "--json"]) == ExitCode.NOT_READY
    return json.loads(out.read_text())


def test_every_view_heads_an_unknown_verdict_with_what_failed(diagnosed, tmp_path, capsys):
    """A log alone: the machine's verdict stays unknown (exit 1 for the failure), but the first line of the console,
    the Markdown, the HTML and the JUnit says `FAIL nccl.shm_too_small: …`, and the second that there is not enough
    evidence to judge the whole machine."""
    assert diagnosed["verdict"] == "unknown" and diagnosed["exit_code"] == ExitCode.NOT_READY
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(diagnosed))
    capsys.readouterr()
    html, xml = tmp_path / "r.html", tmp_path / "r.xml"
    cli.main(["report", str(saved), "--html", str(html), "--junit", str(xml)])
    cli.main(["report", str(saved), "--markdown", "-"])
    markdown = capsys.readouterr().out
    cli.main(["report", str(saved)])
    console = capsys.readouterr().out
    flowing = " ".join(console.split())  # piped, the console wraps at 80 columns
    assert flowing.startswith("inputs: FAIL nccl.shm_too_small: NCCL could not create its shared-memory segments of "
                              "9,637,888 bytes (9.2 MiB) in /dev/shm (")
    assert flowing.index("not enough evidence to judge the whole machine (single node: UNKNOWN") \
        < flowing.index("Not enough evidence: the inputs") < flowing.index("1 fail, 0 warn")
    assert "**FAIL nccl.shm\\_too\\_small: NCCL could not create" in markdown
    assert markdown.index("**FAIL nccl.shm") < markdown.index("not enough evidence to judge the whole machine")
    page = html.read_text()
    assert '<p class="verdict not_ready">FAIL nccl.shm_too_small: NCCL could not create' in page
    assert "<p>not enough evidence to judge the whole machine: single node: UNKNOWN" in page
    out = xml.read_text()
    assert out.index("FAIL nccl.shm_too_small: NCCL") < out.index("not enough evidence to judge the whole machine") \
        < out.index("verdict: UNKNOWN")
    cli.main(["report", str(saved), "--lang", "zh"])
    assert capsys.readouterr().out.splitlines()[0].startswith("输入文件 inputs: 失败 FAIL nccl.shm_too_small：")


def test_a_title_is_the_messages_opening_clause():
    from gpuready.report.headline import title_of
    assert title_of("CUDA refused peer access (cudaErrorPeerAccessUnsupported).") == \
        "CUDA refused peer access (cudaErrorPeerAccessUnsupported)."
    assert title_of("NCCL found no usable interface (`Bootstrap : no socket`): its bootstrap fails.") == \
        "NCCL found no usable interface (`Bootstrap : no socket`)"
    assert title_of("NCCL 使用 lo：回环地址。其他节点无法连接。") == "NCCL 使用 lo"
    assert title_of("x" * 300) == "x" * 119 + "…"


# --- report: what was written ---------------------------------------------------------------------------------------

def test_report_says_which_files_it_wrote_and_keeps_the_reports_exit_code(diagnosed, tmp_path, capsys):
    """`report R --html F --junit G` prints one line per file (its path and size in bytes) and exits with the report's
    own code (1: a finding fails); with `--markdown -` on stdout the lines go to stderr."""
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(diagnosed))
    html, xml = tmp_path / "r.html", tmp_path / "r.xml"
    capsys.readouterr()
    assert cli.main(["report", str(saved), "--html", str(html), "--junit", str(xml)]) == ExitCode.NOT_READY
    out = capsys.readouterr().out.splitlines()
    assert out == [f"--html: wrote {html} ({html.stat().st_size:,} bytes)",
                   f"--junit: wrote {xml} ({xml.stat().st_size:,} bytes)"]
    assert cli.main(["report", str(saved), "--html", str(html), "--markdown", "-", "--lang", "zh"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("## ") and f"--html：已写入 {html}（" in captured.err
