"""diagnose's nccl-tests reader: busbw judged at large sizes against the topology or --expect, #wrong, out of bounds.

Inputs: real nccl-tests outputs (tests/fixtures/published, tests/fixtures/diagnose/nccl_tests, sources in their
READMEs). Rows marked CONSTRUCTED below are written here in nccl-tests' format with self-consistent numbers
(algbw = size / time, busbw = algbw × 2(n-1)/n) for cases no public output shows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuready.facts import nccl_tests as parse
from gpuready.evidence.build import build_facts
from gpuready.facts.log_lines import feed_text
from helpers import judged
from gpuready.facts.nccl_tests_reader import NcclTestsReader

FIXTURES = Path(__file__).parent / "fixtures"
PUBLISHED = FIXTURES / "published"
OURS = FIXTURES / "diagnose" / "nccl_tests"
DGX_H100 = FIXTURES / "public" / "dgx-h100-nvswitch"

# CONSTRUCTED: an 8×H100 (DGX H100 bus numbers, as in tests/fixtures/public/dgx-h100-nvswitch) ring all_reduce
# reaching ~360 GB/s busbw, the ring figure sjeaugey gives in NVIDIA/nccl-tests#212 (~370 effective).
H100_8X_RING = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 33554432 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid 498607 on ubuntu-server device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid 498607 on ubuntu-server device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid 498607 on ubuntu-server device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid 498607 on ubuntu-server device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid 498607 on ubuntu-server device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid 498607 on ubuntu-server device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid 498607 on ubuntu-server device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid 498607 on ubuntu-server device  7 [0xdb] NVIDIA H100 80GB HBM3
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    33554432       8388608     float     sum      -1    358.0   93.73  164.03      0    357.1   93.96  164.43      0
  4294967296    1073741824     float     sum      -1    21001  204.51  357.89      0    21010  204.43  357.75      0
  8589934592    2147483648     float     sum      -1    41733  205.83  360.20      0    41790  205.55  359.71      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 293.999
#
# Collective test concluded: all_reduce_perf
"""


def run(text: str, source: str = "nccl.txt", facts=None, expect: float | None = None):
    reader = feed_text(NcclTestsReader(), source, text)
    options = {"expect_busbw_gb_per_s": expect} if expect is not None else {}
    findings = judged(reader, host="inputs", facts=facts, **options)
    return reader, {finding.check_id: finding for finding in findings}, findings


@pytest.fixture(scope="module")
def dgx_h100_facts():
    return build_facts({"nvidia-smi-q.txt": (DGX_H100 / "nvidia-smi-q.txt").read_text(),
                        "nvidia-smi-topo.txt": (DGX_H100 / "nvidia-smi-topo.txt").read_text()})


# -- busbw against the topology / --expect ----------------------------------------------------------------------

def test_8x_h100_nvswitch_ring_passes_against_its_topology(dgx_h100_facts):
    _, found, _ = run(H100_8X_RING, facts=dgx_h100_facts)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == "pass"
    assert finding.observed["busbw_gb_per_s"] == 360.2
    assert finding.observed["size_bytes"] == 8589934592
    assert finding.observed["placement"] == "out-of-place"
    assert finding.expected == 369.0  # NVLink 450 GB/s per direction × 0.82 ([nccl] nvlink_efficiency)
    assert "8× NVIDIA H100 80GB HBM3" in finding.message and "all_reduce" in finding.message
    quoted = [evidence.line for evidence in finding.evidence]
    assert quoted == [16, 17]  # the rows judged (4 and 8 GiB), never the 32 MiB one (line 15)


def test_8x_h100_against_expect_360_passes_and_480_warns_and_800_fails(dgx_h100_facts):
    assert run(H100_8X_RING, expect=360)[1]["nccl_tests.busbw_low"].status.value == "pass"
    warned = run(H100_8X_RING, facts=dgx_h100_facts, expect=480)[1]["nccl_tests.busbw_low"]
    assert warned.status.value == "warn"  # 360.2 / 480 = 75 %: below 90 %, above 50 %
    assert warned.expected == 480.0 and "75%" in warned.message and warned.fix
    assert run(H100_8X_RING, expect=800)[1]["nccl_tests.busbw_low"].status.value == "fail"  # 45 %


def test_two_hosts_are_not_judged_against_one_nodes_topology(dgx_h100_facts):
    text = (OURS / "all_reduce_16x_h100_a3mega.txt").read_text()
    _, found, _ = run(text, facts=dgx_h100_facts)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == "skip"
    assert "16× NVIDIA H100 80GB HBM3" in finding.message and "2 hosts" in finding.message
    assert "338.8" in finding.message and "--expect" in finding.message
    assert finding.observed["ranks"] == 16 and finding.observed["avg_busbw_gb_per_s"] == 70.742
    assert found["nccl_tests.out_of_bounds"].status.value == "pass"
    assert found["nccl_tests.wrong"].status.value == "pass"
    with_expect = run(text, facts=dgx_h100_facts, expect=400)[1]["nccl_tests.busbw_low"]
    assert with_expect.status.value == "warn"  # 338.82 / 400 = 85 %


@pytest.mark.parametrize("name, expect, status, busbw, ranks", [
    ("all_reduce_16x_h100.txt", None, "skip", 338.82, 16),
    ("all_reduce_16x_h100.txt", 340, "pass", 338.82, 16),
    ("all_reduce_2x_h200.txt", 32, "pass", 31.89, 2),
    ("all_reduce_2x_h200.txt", 40, "warn", 31.89, 2),
    ("all_gather_2x_b200.txt", 45, "pass", 45.14, 2),
    ("all_gather_16x_b200.txt", 600, "fail", 268.59, 16),
])
def test_published_rows_without_header(name, expect, status, busbw, ranks):
    _, found, _ = run((PUBLISHED / name).read_text(), source=name, expect=expect)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == status
    assert finding.observed["busbw_gb_per_s"] == busbw
    assert finding.observed["ranks"] == ranks  # from busbw/algbw: nccl-tests' factor
    if expect is None:
        assert "338.8 GB/s" in finding.message and "--expect" in finding.message


def test_all_gather_without_header_names_its_collective_and_ranks():
    _, found, _ = run((OURS / "all_gather_16x_gke_no_header.txt").read_text(), expect=370)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == "pass"
    assert finding.observed["collective"] == "all_gather" and finding.observed["ranks"] == 16
    assert finding.observed["busbw_gb_per_s"] == 376.64 and finding.observed["placement"] == "in-place"


# -- the footer average is never judged --------------------------------------------------------------------------

def test_avg_bus_bandwidth_alone_is_not_judged():
    _, found, findings = run("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 70.742 \n", expect=50)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == "skip"
    assert "never judged by itself" in finding.message and "70.742" in finding.message
    assert [f.check_id for f in findings if f.status.value in ("warn", "fail")] == []


def test_avg_line_does_not_change_the_verdict_on_rows():
    # the 16×H100 footer says 70.7 GB/s; with --expect 300 the rows at 8 GiB (338.8) pass
    _, found, _ = run((OURS / "all_reduce_16x_h100_a3mega.txt").read_text(), expect=300)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == "pass" and "not judged" in finding.message


# -- data checks --------------------------------------------------------------------------------------------------

def test_wrong_elements_fail_with_the_row_quoted():
    # CONSTRUCTED: the 2×H200 published rows with #wrong set on one row (nccl-tests prints the count there)
    rows = (PUBLISHED / "all_reduce_2x_h200.txt").read_text().splitlines()
    bad = "   268435456      67108864     float     sum      -1   8635.4   31.09   31.09     12   8653.9   31.02   31.02      0"
    text = "\n".join(rows[:13] + [bad] + rows[14:]) + "\n"
    _, found, _ = run(text, source="wrong.txt")
    finding = found["nccl_tests.wrong"]
    assert finding.status.value == "fail"
    assert finding.observed == 1
    assert [(e.file, e.line, e.text) for e in finding.evidence] == [("wrong.txt", 14, bad)]
    assert "12 wrong" in finding.message


def test_out_of_bounds_failed_is_a_fail():
    text = (OURS / "all_reduce_16x_h100_a3mega.txt").read_text().replace(
        "# Out of bounds values : 0 OK", "# Out of bounds values : 50 FAILED")
    _, found, _ = run(text, source="oob.txt")
    finding = found["nccl_tests.out_of_bounds"]
    assert finding.status.value == "fail" and finding.observed == 50
    assert finding.evidence[0].text == "# Out of bounds values : 50 FAILED"


def test_not_checked_rows_skip_the_data_check():
    # li-plus/playground cuda/nccl.md: sendrecv_perf rows with N/A in-place (format as published)
    text = ("   134217728      33554432     float     sum      -1   1211.2  110.81  110.81    N/A   1211.8  110.76  110.76    N/A\n")
    _, found, _ = run(text)
    assert found["nccl_tests.wrong"].status.value == "skip"


# -- cut and interleaved rows -------------------------------------------------------------------------------------

def test_cut_row_is_skipped_not_misread():
    path = FIXTURES / "public" / "pcie-4090-no-p2p" / "all_reduce_perf.txt"
    reader, found, _ = run(path.read_text(), source="4090.txt", expect=25)
    assert reader.facts().runs[0].rows == 11 and reader.facts().runs[0].skipped == 1
    finding = found["nccl_tests.busbw_low"]
    # the 64 MiB row is cut after its out-of-place half: the largest whole row is 32 MiB, below the judged sizes
    assert finding.status.value == "skip"
    assert "32.00 MiB" in finding.message and "1 row(s) cut" in finding.message


def test_value_cut_short_is_refused():
    good = "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0"
    cut = "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  33"
    assert parse.parse_row(good) is not None
    assert parse.parse_row(cut) is None
    # a digit lost from busbw keeps the token count: caught by the factor check across the two halves
    assert parse.parse_row(good.replace("337.35", "37.35")) is None
    # a timing cut short: algbw no longer equals size / time
    assert parse.parse_row(good.replace("47535", "4753")) is None


def test_interleaved_output_is_skipped():
    # NVIDIA/nccl#1453: rows with per-rank `[0]` tags inside them
    text = ("[0]     67108864      16777216     float     sum      -1[0]     24410    2.75    5.27      0[0]     24425"
            "    2.75    5.27      0\n"
            "   134217728      33554432 host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n")
    reader, found, _ = run(text, expect=10)
    assert sum(r.rows for r in reader.facts().runs) == 0
    assert "nccl_tests.wrong" not in found


def test_mpirun_tagged_output_is_read():
    text = "\n".join("[1,0]<stdout>:" + line for line in H100_8X_RING.splitlines()) + "\n"
    _, found, _ = run(text, expect=360)
    finding = found["nccl_tests.busbw_low"]
    assert finding.status.value == "pass" and finding.observed["ranks"] == 8


# -- several runs, bounded state -----------------------------------------------------------------------------------

def test_several_runs_in_one_file_are_judged_each():
    text = H100_8X_RING + (OURS / "all_reduce_16x_h100_a3mega.txt").read_text()
    _, _, findings = run(text, expect=380)
    busbw = [f for f in findings if f.check_id == "nccl_tests.busbw_low"]
    assert [f.status.value for f in busbw] == ["pass", "warn"]  # 360.2 = 94.8 % of 380; 338.82 = 89.2 %
    assert [f.observed["ranks"] for f in busbw] == [8, 16]


def test_state_is_bounded():
    row = "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0\n"
    reader = feed_text(NcclTestsReader(), "big.txt", row * 5000)
    assert reader.facts().runs[0].rows == 5000
    assert len(reader.facts().runs[0].largest) <= 3
    many = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20\n" + row) * 100
    reader = feed_text(NcclTestsReader(), "many.txt", many)
    assert len(reader.facts().runs) == 32 and reader.facts().runs_dropped == 68


# -- parser pieces --------------------------------------------------------------------------------------------------

def test_rank_line_and_bus_numbers():
    rank = parse.parse_rank("#  Rank  7 Group  0 Pid 498607 on ubuntu-server device  7 [0xdb] NVIDIA H100 80GB HBM3")
    assert (rank.rank, rank.host, rank.device, rank.name, rank.bus_number()) == (
        7, "ubuntu-server", 7, "NVIDIA H100 80GB HBM3", 0xDB)
    old = parse.parse_rank("   Rank  3 Pid 1821216 on AI-A100-Beethoven01 device  3 [0x00] NVIDIA A100-SXM4-40GB")
    assert old.rank == 3 and old.name == "NVIDIA A100-SXM4-40GB"
    assert parse.bus_number("0000:8c:00") == 0x8C and parse.bus_number("0000:3a:00.0") == 0x3A


def test_old_format_with_error_column():
    # NVIDIA/nccl-tests#44 (2×2080 Ti): no redop/root columns, float `error`
    columns = parse.parse_columns("#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error")
    row = parse.parse_row("    67108864       8388608   float   1568.3   21.40   21.40  0e+00   1560.9   21.50   21.50  0e+00",
                          columns)
    assert row is not None and row.best() == (21.5, "in-place") and not row.checked()


def test_infer_collective():
    assert parse.infer_collective("sum", -1, 1.875, None) == "all_reduce"
    assert parse.ranks_from_ratio("all_reduce", 1.875) == 16
    assert parse.infer_collective("none", -1, 0.9375, None) == "all_gather"
    assert parse.infer_collective("sum", -1, 0.875, None) == "reduce_scatter"
    assert parse.infer_collective("none", 0, 1.0, 8) == "broadcast"
    assert parse.infer_collective("sum", -1, 1.0, 8) == "send_recv"
