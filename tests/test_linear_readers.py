"""Every reader of untrusted text is linear in its input: fed n and then 8n bytes of a pathological shape (runs of one
character, blank lines, repeated markers, one endless line, nesting, many driver loads), the time grows about 8-fold,
never the 64-fold of a quadratic reader (the 64 KiB of `=` that once took 16 s in the sniffer, the blank lines that
hung diagnose). Throughput per reader: benchmarks/reader_scaling.py."""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linear_inputs import PIECES, READERS, SHAPES

SMALL = 32 * 1024
RATIO_BELOW = 24  # linear is 8, quadratic 64: room for a loaded CI machine's noise
TOO_FAST_TO_JUDGE_S = 0.05
MOST_S = 5.0  # 256 KiB at 0.05 MB/s: far beyond any linear reader here (the old sniffer took 16 s on 64 KiB)


def _seconds(reader, text: str, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):  # the fastest run: a busy machine's pauses (CI, other processes) are not the reader's
        start = time.perf_counter()
        try:
            reader(text)
        except Exception:  # refusing a shape is fine; how long refusing takes is what counts
            pass
        best = min(best, time.perf_counter() - start)
    return best


def _ratio(reader, small: str, big: str, label: str) -> tuple[float, str]:
    t_small, t_big = _seconds(reader, small, 3), _seconds(reader, big, 2)
    # a reader that looks at a bounded head (the sniffer's 64 KiB) hides its growth from the ratio: its time is bounded
    assert t_big < MOST_S, f"{label}: {t_big:.1f} s for {len(big) // 1024} KiB"
    if t_big < TOO_FAST_TO_JUDGE_S:
        return 0.0, ""
    return t_big / max(t_small, 1e-4), f"{label}: {t_small:.3f} s at n, {t_big:.3f} s at 8n"


def _assert_linear(reader, small: str, big: str, label: str) -> None:
    ratio, said = _ratio(reader, small, big, label)
    if ratio >= RATIO_BELOW:  # once more, 4 times larger: noise does not repeat itself, a quadratic reader does
        ratio, said = _ratio(reader, small * 4, big * 4, label)
    assert ratio < RATIO_BELOW, said


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reader", READERS)
def test_reader_is_linear_on_pathological_shapes(reader, shape):
    make = SHAPES[shape]
    _assert_linear(READERS[reader], make(SMALL), make(8 * SMALL), f"{reader} on {shape}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6), reader=st.sampled_from(sorted(READERS)))
def test_reader_is_linear_on_generated_repetitions(pieces, reader):
    unit = "".join(pieces)
    small = unit * max(1, SMALL // len(unit))
    _assert_linear(READERS[reader], small, small * 8, f"{reader} on repeated {unit!r}")
