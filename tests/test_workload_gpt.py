"""The plain-torch GPT-2 / LLaMA model of workloads/gpt.py and the plan memory calibration's CPU smoke mode."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from gpuready.shapes import PRESETS, ModelShape  # noqa: E402
from gpuready.workloads.gpt import build_model  # noqa: E402

ROOT = Path(__file__).parents[1]
SEQ = 16


def tiny(family: str) -> ModelShape:
    if family == "llama":
        return ModelShape(name="tiny-llama", family="llama", layers=2, hidden=64, heads=4, kv_heads=2, vocab=128,
                          ffn_hidden=96, max_positions=64)
    return ModelShape(name="tiny-gpt2", layers=2, hidden=64, heads=4, vocab=128, max_positions=64)


def batch(seed: int = 0, size: int = 2):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 128, (size, SEQ), generator=generator)
    return ids, torch.randint(0, 128, (size, SEQ), generator=generator)


def model_for(family: str, attention: str = "flash", recompute: str = "none", seed: int = 0):
    torch.manual_seed(seed)
    return build_model(tiny(family), attention=attention, recompute=recompute)


@pytest.mark.parametrize("name", ["gpt2-small", "gpt2-medium", "gpt2-xl", "llama2-7b", "llama3-8b"])
def test_parameter_count_matches_shape(name):
    shape = PRESETS[name]
    with torch.device("meta"):
        model = build_model(shape)
    assert sum(p.numel() for p in model.parameters()) == shape.parameters()


def test_tied_and_untied_heads():
    with torch.device("meta"):
        gpt2, llama = build_model(PRESETS["gpt2-small"]), build_model(PRESETS["llama2-7b"])
    assert gpt2.lm_head.weight is gpt2.tokens.weight
    assert llama.lm_head.weight is not llama.tokens.weight
    assert gpt2.positions is not None and llama.positions is None


def test_unknown_options_are_refused():
    with pytest.raises(ValueError):
        build_model(tiny("gpt2"), attention="paged")
    with pytest.raises(ValueError):
        build_model(tiny("gpt2"), recompute="some")


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("attention", ["flash", "eager"])
@pytest.mark.parametrize("recompute", ["none", "full", "selective"])
def test_one_training_step(family, attention, recompute):
    model = model_for(family, attention, recompute)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids, labels = batch()
    loss = model(ids, labels)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    assert model(ids).shape == (2, SEQ, 128)


def test_loss_decreases_over_five_steps():
    model = model_for("gpt2")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ids, labels = batch()
    losses = []
    for _ in range(5):
        loss = model(ids, labels)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < losses[0]
    assert all(b < a for a, b in zip(losses, losses[1:]))


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_eager_and_flash_agree(family):
    flash = model_for(family, "flash")
    eager = model_for(family, "eager")
    eager.load_state_dict(flash.state_dict())
    ids, labels = batch()
    with torch.no_grad():
        assert abs(flash(ids, labels).item() - eager(ids, labels).item()) < 1e-4
        torch.testing.assert_close(flash(ids), eager(ids), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("recompute", ["full", "selective"])
@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_recompute_gives_the_same_gradients(family, recompute, attention):
    plain = model_for(family, attention, "none")
    checked = model_for(family, attention, recompute)
    checked.load_state_dict(plain.state_dict())
    ids, labels = batch()
    plain(ids, labels).backward()
    checked(ids, labels).backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), checked.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=0, msg=name)


def test_calibration_cpu_smoke(tmp_path):
    out = tmp_path / "cal.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plan_memory_calibration.py"), "--device", "cpu",
                           "--presets", "tiny", "--steps", "1", "--precisions", "amp-bf16", "bf16",
                           "--recompute", "none", "full", "--seq", "32", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["schema"] == "gpuready.plan_memory_calibration/1"
    assert document["versions"]["torch"]
    assert set(document["method"]["precisions"]) == {"amp-bf16", "bf16"}
    rows = document["rows"]
    assert len(rows) == 4
    for row in rows:
        assert row["status"] == "ok", row
        assert row["device"] == "cpu" and row["steps"] == 1 and row["seq"] == 32
        assert row["peak_allocated_bytes"] is None and row["max_rss_bytes"] > 0
        assert row["parameters"] == ModelShape(layers=2, hidden=64, heads=4, vocab=128).parameters()
    assert "tiny" in done.stdout


def test_calibration_refuses_unknown_preset(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plan_memory_calibration.py"), "--device", "cpu",
                           "--presets", "gpt5", "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "gpt5" in done.stderr
    assert not (tmp_path / "x.json").exists()
