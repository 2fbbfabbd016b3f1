"""Issue 20: nothing hostile reaches the terminal. Text from outside (log lines, file names, host and GPU names) is
shown with its control characters escaped (`printable`), and never read as rich markup."""

import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from gpuready.cli import main as cli
from gpuready.report.console import render_console
from gpuready.safe_text import printable

FIXTURES = Path(__file__).parent / "fixtures"
OSC_TITLE = "\x1b]0;pwned\x07"
OSC_LINK = "\x1b]8;;http://x\x1b\\"
DCS = "\x1bPq#0;2;0;0;0\x1b\\"
RESET = "\x1bc"
CSI = "\x1b[2J\x1b[31m"
C1_CSI = "\x9b2J"
BEL = "\x07"
HOSTILE = OSC_TITLE + OSC_LINK + DCS + RESET + CSI + C1_CSI + BEL + "\x7f\x85\r\x00"
MARKUP = "[bold]b[/bold] [link=http://x]y[/link]"
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_printable_escapes_every_c0_but_tab_and_newline_del_and_c1():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable(OSC_TITLE) == "\\x1b]0;pwned\\x07"
    assert printable("\x9b\x80\x9f\x7f\x00\r") == "\\x9b\\x80\\x9f\\x7f\\x00\\x0d"
    assert printable("µ 就绪 \xa0") == "µ 就绪 \xa0"  # printable non-ASCII is kept
    for code in [*range(0x20), *range(0x7f, 0xa0)]:
        shown = printable(chr(code))
        assert not RAW.search(shown) or chr(code) in "\t\n"


def _document(hostile):
    subject = {"host": "node" + hostile, "gpu": {"index": 0}}
    return {
        "host": "host" + hostile, "verdict": "verdict" + hostile, "judged_for": "scope" + hostile,
        "verdicts": {"single_node": "not_ready", "multi_node": "x" + hostile},
        "not_enough_evidence": "evidence" + hostile,
        "facts": {"gpus": [{"index": 0, "bus_id": "bus" + hostile, "name": "NVIDIA H200" + hostile,
                            "compute_capability": "9.0", "pcie": "pcie" + hostile}]},
        "findings": [
            {"check_id": "nccl.shm" + hostile, "status": "fail", "category": "nccl", "subject": subject,
             "message": "message" + hostile + MARKUP, "fix": "fix" + hostile + MARKUP,
             "consequence_of": "cause" + hostile,
             "evidence": [{"file": "/logs/rank" + hostile + ".log", "line": 3, "text": "line" + hostile + MARKUP}]},
            {"check_id": "gpu.x", "status": "odd" + hostile, "subject": {"host": "h", "nic": "nic" + hostile},
             "message": "m" + hostile},
            {"check_id": "gpu.y", "status": "skip", "message": "skipped" + hostile},
        ],
        "measurements": [{"name": "busbw" + hostile, "unit": "gb_per_s" + hostile, "value": 1.0,
                          "subject": {"host": "h" + hostile},
                          "method": {"strategy": "ddp" + hostile, "world_size": 8}}],
        "strategies": [{"name": "fsdp" + hostile, "fits": True, "bottleneck": "b" + hostile,
                        "reasons": ["r" + hostile]}],
    }


def _render(document, verbose, lang):
    stream = io.StringIO()
    render_console(document, Console(file=stream, width=400, force_terminal=False), verbose=verbose, lang=lang)
    return stream.getvalue()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("verbose", [False, True])
def test_console_shows_controls_escaped_and_no_markup(verbose, lang):
    out = _render(_document(HOSTILE), verbose, lang)
    assert not RAW.search(out), repr(RAW.search(out))
    for shown in ("host\\x1b]0;pwned\\x07", "message\\x1b]0;pwned", "\\x1b]8;;http://x\\x1b\\", "\\x1bPq#0",
                  "\\x1bc", "\\x1b[2J\\x1b[31m", "\\x9b2J", "\\x7f\\x85\\x0d\\x00", "NVIDIA H200\\x1b]0;pwned",
                  "/logs/rank\\x1b]0;pwned", "h\\x1b]0;pwned", "bus\\x1b]0;", "busbw\\x1b]0;", "fsdp\\x1b]0;"):
        assert shown in out, shown
    plain = _render(_document(""), verbose, lang)
    assert plain.count(MARKUP) >= 3  # message, fix, evidence: shown as written, not read as markup (no bold, no link)


def test_json_report_keeps_controls_as_json_escapes(tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text("step 1" + HOSTILE + "\n")
    cli.main(["diagnose", str(log), "--json"])
    out = capsys.readouterr().out
    assert not RAW.search(out.replace("\n", ""))


def _hostile_log(tmp_path: Path) -> Path:
    """The shm incident (an NCCL log) with escape sequences on its NCCL WARN lines, in a file whose name holds one."""
    text = (FIXTURES / "diagnose" / "nccl" / "shm-ci-infra-490.log").read_text()
    lines = [line + " " + HOSTILE + MARKUP if "NCCL WARN" in line else line for line in text.splitlines()]
    try:
        path = tmp_path / ("rank0" + OSC_TITLE + ".log")
        path.write_text("\n".join(lines) + "\n")
    except OSError:  # a file system that refuses the name: the lines alone
        path = tmp_path / "rank0.log"
        path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("options", [[], ["--verbose"], ["--lang", "zh"], ["--lang", "zh", "--verbose"]])
def test_diagnose_end_to_end_prints_no_raw_control(tmp_path, capsys, monkeypatch, options):
    monkeypatch.setenv("COLUMNS", "2000")  # rich's width: one line per row, so the escaped forms are not wrapped
    path = _hostile_log(tmp_path)
    code = cli.main(["diagnose", str(path), *options])
    captured = capsys.readouterr()
    assert code == 1
    for out in (captured.out, captured.err):
        assert not RAW.search(out), repr(RAW.search(out))
    assert "nccl.shm_too_small" in captured.out
    # the reader drops ANSI sequences from quoted lines (evidence.py); what is left (DEL, C1) is shown escaped
    assert "\\x7f\\x85" + MARKUP in captured.out
    if "\x1b" in path.name:
        assert "rank0\\x1b]0;pwned\\x07.log" in captured.out


@pytest.mark.parametrize("argv", [["check", "--bundle"], ["diagnose"]])
def test_error_sentences_on_stderr_show_controls_escaped(tmp_path, capsys, argv):
    missing = tmp_path / f"bundle{HOSTILE.replace(chr(0), '')}"  # a file name from an archive or a paste
    assert cli.main([*argv, str(missing)]) == 2
    err = capsys.readouterr().err
    assert not RAW.search(err.replace("\n", "")), repr(err)
    assert printable(OSC_TITLE) in err and err.startswith("gpuready: ")
