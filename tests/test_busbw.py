"""busbw/algbw arithmetic against nccl-tests' factors (src/*.cu, doc/PERFORMANCE.md)."""

import pytest

from gpuready.workloads.busbw import algbw_gb_per_s, busbw_factor, busbw_gb_per_s, element_count, size_sweep


@pytest.mark.parametrize("ranks, all_reduce, gather", [(1, 0.0, 0.0), (2, 1.0, 0.5), (4, 1.5, 0.75), (8, 1.75, 0.875)])
def test_factors(ranks, all_reduce, gather):
    assert busbw_factor("all_reduce", ranks) == all_reduce
    for collective in ("all_gather", "reduce_scatter", "all_to_all"):
        assert busbw_factor(collective, ranks) == gather
    for collective in ("broadcast", "reduce", "send_recv"):
        assert busbw_factor(collective, ranks) == 1.0


def test_nccl_tests_row():
    # nccl-tests 8×H200 ring all_reduce: 16 GiB in 81.8 ms → algbw 210.0, busbw 367.5 GB/s (factor 1.75).
    size = 16 * 2**30
    assert algbw_gb_per_s(size, 0.0818) == pytest.approx(210.0, rel=1e-3)
    assert busbw_gb_per_s("all_reduce", 8, size, 0.0818) == pytest.approx(367.5, rel=1e-3)


def test_sizes_and_counts():
    assert size_sweep(8, 64) == [8, 16, 32, 64]
    assert element_count("all_reduce", 1024, 8, 4) == 256
    # all_gather: per-rank chunk rounded down to 16 B, S = total output
    assert element_count("all_gather", 1000, 8, 4) == 8 * (112 // 4)
    with pytest.raises(ValueError):
        busbw_factor("gather_scatter", 2)
