"""gpu.persistence beyond nvidia-smi: DCGM's note that persistence mode is off, and which cards may run without it.

DCGM prints DCGM_FR_PERSISTENCE_MODE_MSG ("Persistence mode for GPU %u is disabled.", NVIDIA/DCGM dcgm_errors.h) as an
`Info` row under its Persistence Mode deployment test, cut every 45 characters like every dcgmi diag message
(dcgmi/Diag.cpp, DATA_INFO_TAG_LEN). The tables below are built from those two format strings, not from a paste."""

from __future__ import annotations

from gpuready.model import Status
from helpers import findings, of, only

INFO_WIDTH = 45


def _row(name: str, info: str) -> str:
    return f"| {name:<25} | {info:<46} |"


def _table(note: str) -> str:
    pieces = [note[i:i + INFO_WIDTH] for i in range(0, len(note), INFO_WIDTH)]
    rows = [_row("Persistence Mode", "Pass"), _row("Info", pieces[0])] + [_row("", piece) for piece in pieces[1:]]
    rule = "+---------------------------+------------------------------------------------+"
    return "\n".join(["Successfully ran diagnostic for group.", rule, _row("Diagnostic", "Result"),
                      "+===========================+================================================+",
                      "|-----  Deployment  --------+------------------------------------------------|",
                      _row("Denylist", "Pass"), _row("NVML Library", "Pass"), *rows,
                      _row("Environment Variables", "Pass"), rule, ""])


def test_dcgm_info_row_on_persistence_off_warns_for_that_gpu(tmp_path):
    note = ('Persistence mode for GPU 3 is disabled. Enable persistence mode by running "nvidia-smi -i <gpuId> -pm 1 "'
            " as root.")
    path = tmp_path / "diag.txt"
    path.write_text(_table(note))
    found = findings(path)
    warned = only([f for f in found if f.status is not Status.PASS], "gpu.persistence")
    assert (warned.status, warned.message_id, warned.observed) == (Status.WARN, "gpu.persistence.off_dcgm", "Disabled")
    assert "GPU 3" in warned.message and any("dcgm_errors.h" in ref for ref in warned.refs)
    assert [e.line for e in warned.evidence] == [9, 10, 11]  # the Info row and its two continuations
    assert of(found, "dcgm.diag_failed") == []  # an Info row under a Pass is no failed test


def test_dcgm_table_without_the_note_raises_no_persistence_finding(tmp_path):
    path = tmp_path / "diag.txt"
    path.write_text(_table("Persistence mode checked on all GPUs."))
    assert [f for f in of(findings(path), "gpu.persistence") if f.status is not Status.PASS and
            f.status is not Status.SKIP] == []
