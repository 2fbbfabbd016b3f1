"""plan's strategy ranking on described machines."""

from gpuready.shapes import PRESETS
from gpuready.estimate.machine import machine_from_description
from gpuready.estimate.memory import TrainSetup
from gpuready.verbs.plan.strategy import plan_inference, plan_training


def _plan(machine, model, seq, recompute="none"):
    setup = TrainSetup(shape=PRESETS[model], seq=seq, micro_batch=1, recompute=recompute)
    return plan_training(setup, machine_from_description(machine))


def test_llama2_7b_on_8xh100_ddp_does_not_fit_zero2_first():
    rows = _plan("8xH100-SXM", "llama2-7b", 4096)
    by = {r.strategy.name: r for r in rows}
    assert not by["ddp"].fits and by["ddp"].bottleneck == "memory"  # 16 B/param = 107.8 GB > 80 GB
    assert rows[0].strategy.name == "zero2" and rows[0].fits
    assert "ZeRO-2 before ZeRO-1: same communication, less memory" in rows[0].reasons
    names = [r.strategy.name for r in rows]
    assert names.index("zero2") < names.index("zero1")
    # offload comes after every fitting layout without it
    first_offload = min(i for i, r in enumerate(rows) if r.strategy.offload != "none")
    assert all(r.strategy.offload != "none" or not r.fits for r in rows[first_offload:])
    assert rows[0].step_time_s and rows[0].compute_s and rows[0].communication_s is not None


def test_llama2_7b_on_rtx4090_fsdp_over_8_fits_ddp_does_not():
    rows = _plan("8xRTX4090", "llama2-7b", 2048, recompute="full")
    by = {r.strategy.name: r for r in rows}
    assert not by["ddp"].fits
    assert by["fsdp"].fits  # 19.9 GB of 24 GB with full recompute
    assert any("beyond the NVLink domain of 1" in reason for reason in by["tp=8"].reasons)


def test_two_nodes_tp_never_spans_nodes_first():
    rows = _plan("8xH100-SXM (2 nodes)", "llama2-13b", 4096)
    assert rows[0].fits and rows[0].strategy.tp <= 8
    spanning = [r for r in rows if r.strategy.tp > 8]
    assert spanning and all(any("spans nodes" in reason for reason in r.reasons) for r in spanning)
    fitting = [r for r in rows if r.fits]
    assert all(r.strategy.tp <= 8 for r in fitting[: len(fitting) - len([s for s in spanning if s.fits])])
    assert any("inter-node busbw unknown" in reason for reason in rows[0].reasons)


def test_heads_that_do_not_split_are_invalid():
    rows = _plan("8xH100-SXM", "gpt2-small", 1024)  # 12 heads over TP=8
    by = {r.strategy.name: r for r in rows}
    assert by["tp=8"].bottleneck == "invalid" and not by["tp=8"].fits
    assert rows[-1].strategy.name == "tp=8" or not rows[-1].fits


def test_llama3_70b_inference():
    h100 = plan_inference(PRESETS["llama3-70b"], machine_from_description("8xH100-SXM"), batch=1, context=8192)
    by = {r["tp"]: r for r in h100}
    assert not by[1]["fits"]           # 141.1 GB of weights > 80 GB
    assert by[2]["fits"] and h100[0]["tp"] == 2 and "the fewest GPUs that fit" in h100[0]["notes"]
    h200 = {r["tp"]: r for r in plan_inference(PRESETS["llama3-70b"], machine_from_description("8xH200"), 1, 8192)}
    assert not h200[1]["fits"]         # 141.1 GB weights + 2.7 GB KV + context > 141 GB: one H200 is not enough
    assert h200[2]["fits"]
    small = plan_inference(PRESETS["llama2-7b"], machine_from_description("8xH100-SXM"), batch=1, context=4096)
    assert small[0]["tp"] == 1 and "one GPU suffices" in small[0]["notes"]
