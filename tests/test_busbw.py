"""busbw/algbw arithmetic checked against rows nccl-tests printed on real machines (tests/fixtures/published/).

Each fixture keeps a few rows of real nccl-tests output with its source URL and the rank count read from the
run's own device list. gpuready's conversion, applied to the published size, time and rank count, must give the
published algbw and busbw columns to their printed precision (2 decimals). The printed time is itself rounded,
so the check allows the bandwidth range that the time's last printed digit spans, nothing more.
"""

from pathlib import Path

import pytest

from gpuready.busbw import algbw_gb_per_s, busbw_factor, busbw_gb_per_s, element_count, size_sweep

PUBLISHED = Path(__file__).parent / "fixtures" / "published"


def _published(name):
    """(ranks, rows) of a fixture; a row: size, count, and (time_us, algbw, busbw) out-of-place and in-place."""
    ranks, rows = None, []
    for line in (PUBLISHED / name).read_text().splitlines():
        if line.startswith("# ranks:"):
            ranks = int(line.split(":")[1])
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split()
        rows.append({"size": int(fields[0]), "count": int(fields[1]),
                     "runs": [tuple(fields[5:8]), tuple(fields[9:12])]})
    assert ranks and rows, name
    return ranks, rows


def _span(text):
    """Seconds covered by a printed microsecond figure (its last digit rounded)."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    half = 0.5 * 10 ** -decimals
    return (float(text) - half) * 1e-6, (float(text) + half) * 1e-6


def _reproduces(printed, low, high):
    return low - 0.005 <= float(printed) <= high + 0.005


CASES = [
    # fixture, collective, published rank count (from the run's "Rank N" lines)
    ("all_reduce_16x_h100.txt", "all_reduce", 16),
    ("all_reduce_2x_h200.txt", "all_reduce", 2),
    ("all_gather_16x_b200.txt", "all_gather", 16),
    ("all_gather_2x_b200.txt", "all_gather", 2),
]


@pytest.mark.parametrize("name, collective, ranks", CASES)
def test_published_rows_reproduce_algbw_and_busbw(name, collective, ranks):
    fixture_ranks, rows = _published(name)
    assert fixture_ranks == ranks
    for row in rows:
        for time_us, algbw, busbw in row["runs"]:
            fast, slow = _span(time_us)
            assert _reproduces(algbw, algbw_gb_per_s(row["size"], slow), algbw_gb_per_s(row["size"], fast)), \
                (name, row["size"], time_us, algbw)
            assert _reproduces(busbw, busbw_gb_per_s(collective, ranks, row["size"], slow),
                               busbw_gb_per_s(collective, ranks, row["size"], fast)), \
                (name, row["size"], time_us, busbw)


def test_published_rows_tell_the_collectives_apart():
    # The 16-rank rows only fit their own collective: all_gather's rows do not fit all_reduce's conversion, and the
    # reverse, so the check above would catch a wrong factor.
    _, gather = _published("all_gather_16x_b200.txt")
    _, reduce = _published("all_reduce_16x_h100.txt")
    top_gather, top_reduce = gather[-1], reduce[-1]  # 8 GiB rows
    time_us, _, busbw = top_gather["runs"][0]  # 30970 us, busbw 260.03
    assert not _reproduces(busbw, *sorted(busbw_gb_per_s("all_reduce", 16, top_gather["size"], t)
                                          for t in _span(time_us)))
    time_us, _, busbw = top_reduce["runs"][0]  # 47535 us, busbw 338.82
    assert not _reproduces(busbw, *sorted(busbw_gb_per_s("all_gather", 16, top_reduce["size"], t)
                                          for t in _span(time_us)))


def test_published_8gib_rows_literally():
    # The headline rows, written out: all_reduce 8 GiB on 16 H100 in 47535 us -> 180.71 / 338.82 GB/s;
    # all_gather 8 GiB on 16 B200 in 30970 us -> 277.36 / 260.03 GB/s (fixtures above, with sources).
    assert algbw_gb_per_s(8589934592, 47535e-6) == pytest.approx(180.71, abs=0.01)
    assert busbw_gb_per_s("all_reduce", 16, 8589934592, 47535e-6) == pytest.approx(338.82, abs=0.015)
    assert algbw_gb_per_s(8589934592, 30970e-6) == pytest.approx(277.36, abs=0.01)
    assert busbw_gb_per_s("all_gather", 16, 8589934592, 30970e-6) == pytest.approx(260.03, abs=0.01)
    # Two ranks: nccl-tests prints busbw = algbw for all_reduce (factor 1) and busbw = algbw / 2 for all_gather.
    assert busbw_gb_per_s("all_reduce", 2, 8589934592, 269368e-6) == pytest.approx(31.89, abs=0.005)
    assert busbw_gb_per_s("all_gather", 2, 1073741824, 14640e-6) == pytest.approx(36.67, abs=0.005)


@pytest.mark.parametrize("name, collective, ranks", CASES)
def test_published_count_column(name, collective, ranks):
    # nccl-tests' count column: elements of the per-rank buffer for all_reduce (size / 4 for float), elements
    # per rank's chunk for all_gather (size / ranks / 4). gpuready's element_count returns the whole buffer:
    # for all_gather, the rank chunk times the ranks.
    _, rows = _published(name)
    for row in rows:
        count = element_count(collective, row["size"], ranks, 4)
        assert (count if collective == "all_reduce" else count // ranks) == row["count"], (name, row["size"])


def test_published_size_column_is_a_sweep_by_two():
    # all_reduce_perf -b 8 -e 8G -f 2 printed 1 MiB ... 8 GiB doubling (fixture rows start at 1 MiB).
    _, rows = _published("all_reduce_16x_h100.txt")
    assert size_sweep(1048576, 8589934592) == [row["size"] for row in rows]
    assert size_sweep(8, 64) == [8, 16, 32, 64]


def test_single_rank_and_unknown_collective():
    # One rank moves nothing: nccl-tests prints busbw 0 with 1 rank (factor 2(n-1)/n = 0; nccl-tests#71, #294).
    assert busbw_gb_per_s("all_reduce", 1, 8589934592, 0.1) == 0.0
    # broadcast / reduce / send_recv: busbw = algbw whatever the rank count (nccl-tests doc/PERFORMANCE.md).
    for collective in ("broadcast", "reduce", "send_recv"):
        assert busbw_gb_per_s(collective, 8, 10**9, 0.01) == pytest.approx(100.0)
    # reduce_scatter and alltoall share all_gather's (n-1)/n (PERFORMANCE.md; no published rows stored here):
    # 8 ranks -> 7/8.
    for collective in ("reduce_scatter", "all_to_all"):
        assert busbw_factor(collective, 8) == 0.875 and busbw_factor(collective, 2) == 0.5
    with pytest.raises(ValueError):
        busbw_factor("gather_scatter", 2)
    with pytest.raises(ValueError):
        busbw_factor("all_reduce", 0)
