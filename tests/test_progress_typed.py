"""Typed progress (gpuready/progress.py): a rank posts fields (phase, step, figures with units, a catalogue id) through
the store, never prose; the display and the watchdog say them in the reader's language."""

from __future__ import annotations

import io
import json

from gpuready.i18n import message, said
from gpuready.progress import Figure
from gpuready.report.progress_line import BenchProgress, ProgressLine, bench_plan, burn_plan, burn_progress
from gpuready.runner.progress import PROGRESS_KEY, ProgressReporter, read_progress
from gpuready.runner.watchdog import where
from helpers import FakeStore


class Stream(io.StringIO):
    def isatty(self):
        return False


def _posted(store: FakeStore, rank: int = 0) -> dict:
    return json.loads(store.get(PROGRESS_KEY.format(rank=rank)))


def test_a_training_step_goes_through_the_store_as_fields_and_reads_in_english_and_chinese():
    store = FakeStore()
    ProgressReporter(store, 0, None, 10).post("train", said("op.train.step", strategy="ddp"), step=2, total=8)
    sent = _posted(store)
    assert (sent["step"], sent["total"], sent["warm_up"], sent["operation"]) == (2, 8, False, "")
    assert sent["message_id"] == "op.train.step" and sent["message_values"] == {"strategy": "ddp"}  # no prose
    post = read_progress(store, 1)[0]
    assert post.operation == "ddp step 2"
    assert message(post.operation.said.msg_id, "zh", **post.operation.said.values) == "ddp 第 2 步"
    describe = BenchProgress([("single", 1), ("ddp", 2)], 8, lambda strategy, world_size: 100 * world_size)
    describe({0: post}, 1.0, run=1)
    ProgressReporter(store, 0, None, 10).post("train", said("op.train.step", strategy="ddp"), step=4, total=8)
    status = describe(read_progress(store, 1), 2.0, run=1)  # steps 3 to 5 in 1 s: 0.5 s a step of 200 tokens
    lines = {lang: ProgressLine("bench", bench_plan("tiny", 2, "cpu", [("single", 1), ("ddp", 2)], 1, 7), describe,
                                stream=Stream(), lang=lang).line(status, elapsed=False) for lang in ("en", "zh")}
    # 3 steps left at 0.5 s: 1.5 s, said as about 2 s
    assert lines["en"] == "bench: ddp×2 steps 5/8, 400 tokens/s, about 2 s left, run 2/2", lines["en"]
    assert lines["zh"] == "bench：ddp×2 计时步 5/8，400 tokens/s，约剩 2 秒，第 2/2 次运行", lines["zh"]


def test_burn_figures_go_through_the_store_with_their_units_and_sum_over_workers():
    store = FakeStore()
    for rank, (gemms, tflops, errors) in enumerate(((1200, 650.4, 0), (1100, 640.2, 1))):
        ProgressReporter(store, rank, None, 10 + rank).post(
            "burn", said("op.burn.gemms"), errors=errors,
            figures=[Figure(value=gemms, unit="gemms"), Figure(value=tflops, unit="tflops")])
    assert _posted(store, 1)["figures"] == [{"value": 1100, "unit": "gemms"}, {"value": 640.2, "unit": "tflops"}]
    posts = read_progress(store, 2)
    assert posts[1].operation == "1100 GEMMs, 640 TFLOP/s, 1 error(s)"  # the live table's status column
    status = burn_progress(60.0, 10.0, samples=lambda: 7)(posts, 14.0)
    assert status.rate == "2,300 GEMMs, 1,291 TFLOP/s, 1 error(s), 7 telemetry samples"
    lines = {lang: ProgressLine("burn", burn_plan(2, "cuda", "bf16", 60), burn_progress(60.0, 10.0, None),
                                stream=Stream(), lang=lang).line(status, elapsed=False) for lang in ("en", "zh")}
    assert lines["en"] == ("burn: gemm 2/60 s, 2,300 GEMMs, 1,291 TFLOP/s, 1 error(s), 7 telemetry samples, "
                           "about 58 s left, 2 worker(s) reporting")
    assert lines["zh"] == ("burn：GEMM 2/60 s，2,300 次 GEMM，1,291 TFLOP/s，1 个错误，7 个遥测采样，约剩 58 秒，"
                           "2 个 worker 在上报")


def test_the_watchdog_names_a_stuck_collective_as_it_did_when_ranks_posted_prose():
    store = FakeStore()
    reporter = ProgressReporter(store, 0, None, 10)
    reporter.post("collectives", said("op.collective", collective="all_reduce", placement="in_place"),
                  figures=[Figure(value=1024, unit="bytes")])
    post = read_progress(store, 1)[0]
    assert post.operation == "all_reduce 1024 B in_place"
    assert where(post, 0.0).english() == "; its last report: collectives: all_reduce 1024 B in_place (operation #1, " \
                                         "0 s ago)"
    reporter.post("finishing", "destroy_process_group")  # a name stays as it was posted
    assert where(read_progress(store, 1)[0], 0.0).english() == "; its last report: finishing: destroy_process_group " \
                                                               "(operation #2, 0 s ago)"


def test_a_post_the_reader_cannot_fully_use_is_read_without_its_bad_parts():
    store = FakeStore()
    store.set(PROGRESS_KEY.format(rank=0), json.dumps({
        "rank": 0, "phase": "burn", "operation": "", "message_id": "op.burn.gemms", "message_values": {},
        "figures": [{"value": "many", "unit": "gemms"}, {"unit": "tflops"}, {"value": 3, "unit": "gemms"}],
        "from_a_later_version": True, "sequence": 4}))
    post = read_progress(store, 1)[0]
    assert [(figure.value, figure.unit) for figure in post.figures] == [(3, "gemms")]
    assert post.operation == ""  # the message lacks its values: not said rather than said wrong


def test_bench_progress_counts_the_rate_from_the_first_timed_step_as_the_final_figure_does():
    """Warm-up steps (compilation, allocator growth) at 2 s each, then timed steps at 0.25 s: once two timed steps are
    seen, the live rate is 100 tokens / 0.25 s = 400 tokens/s, what the median of timed steps gives at the end, not
    the average over warm-up and timed steps (which a CPU bench showed as 509 against a final 1,338)."""
    store = FakeStore()
    describe = BenchProgress([("single", 1)], 10, lambda strategy, world_size: 100)
    clock = 0.0
    for step in range(3):  # warm-up: 0, 2, 4 s
        ProgressReporter(store, 0, None, 10).post("train", said("op.train.step", strategy="single"), step=step,
                                                   total=10, warm_up=True)
        describe(read_progress(store, 1), clock)
        clock += 2.0
    clock -= 2.0 - 0.25
    for step in range(3, 7):  # timed: 4.25, 4.5, 4.75, 5.0 s
        ProgressReporter(store, 0, None, 10).post("train", said("op.train.step", strategy="single"), step=step,
                                                   total=10)
        status = describe(read_progress(store, 1), clock)
        clock += 0.25
    assert status.rate == "400 tokens/s", status.rate
