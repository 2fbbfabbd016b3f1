"""Measure the peak memory of real training steps, to calibrate `plan`'s memory estimator.

For each preset × precision × recompute × micro-batch, a fresh child process (so that one config's fragmentation
does not leak into the next) builds `gpuready.workloads.gpt.build_model(shape)` on the device, makes a
torch.optim.AdamW (fused=True on CUDA), resets the peak statistics, then runs --steps training steps (forward,
backward, optimizer step, zero_grad(set_to_none=True)) on random tokens, and reports
torch.cuda.max_memory_allocated() / max_memory_reserved() after the last step. A CUDA out-of-memory error is
status "oom" (the config does not fit), anything else "error", a child past --timeout-s "timeout", a config not
started because --budget-s ran out "skipped".

Precisions:
- amp-bf16: fp32 parameters, gradients and AdamW states; forward (and loss) under torch.autocast(bfloat16).
- bf16: model.to(torch.bfloat16); gradients and AdamW exp_avg / exp_avg_sq are bf16 too (torch.optim.AdamW keeps
  its states in the parameter dtype); no fp32 master weights.

On --device cpu (a smoke test) there is no allocator peak: the row records the process's max RSS
(getrusage ru_maxrss, which includes torch's own footprint) in `max_rss_bytes`, and the peak fields are null.

Run on one GPU (well inside 8 minutes on an H200):
    python benchmarks/plan_memory_calibration.py --out plan_memory_calibration.json
Smoke test on a CPU:
    python benchmarks/plan_memory_calibration.py --device cpu --presets tiny --steps 1 --out /tmp/cal.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))  # run from a checkout

SCHEMA = "gpuready.plan_memory_calibration/1"
DEFAULT_PRESETS = ("gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama2-7b")
BIG = ("gpt2-xl", "llama2-7b")  # also measured at --small-micro-batch
PRECISIONS = ("amp-bf16", "bf16")
METHOD = {
    "amp-bf16": "fp32 parameters, gradients and AdamW states; forward and loss under torch.autocast(device type, bfloat16)",
    "bf16": "model.to(bfloat16): parameters, gradients and AdamW exp_avg/exp_avg_sq all bf16 (AdamW keeps states "
            "in the parameter dtype), no fp32 master copy; no autocast",
}


def tiny_shape():
    from gpuready.shapes import ModelShape
    return ModelShape(name="tiny", layers=2, hidden=64, heads=4, vocab=128, max_positions=1024)


def resolve(name: str):
    from gpuready.shapes import PRESETS
    return tiny_shape() if name == "tiny" else PRESETS[name]


# ---------------------------------------------------------------- child: one config, one process

def run_one(config: dict) -> dict:
    import torch

    from gpuready.shapes import with_sequence
    from gpuready.workloads.gpt import build_model

    row = dict(config, status="error", peak_allocated_bytes=None, peak_reserved_bytes=None,
               params_allocated_bytes=None, steady_allocated_bytes=None, max_rss_bytes=None, step_s=[], error=None)
    device = torch.device(config["device"])
    cuda = device.type == "cuda"
    shape = with_sequence(resolve(config["preset"]), config["seq"])
    row["parameters"] = shape.parameters()
    try:
        torch.manual_seed(0)
        with device:
            model = build_model(shape, attention=config["attention"], recompute=config["recompute"])
        if config["precision"] == "bf16":
            model = model.to(torch.bfloat16)
        model.train()
        fused = cuda
        try:
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=fused)
        except (RuntimeError, TypeError):
            fused = False
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        row["optimizer"] = f"torch.optim.AdamW(lr=1e-4, fused={fused})"
        b, s = config["micro_batch"], config["seq"]
        ids = torch.randint(0, shape.vocab, (b, s), device=device)
        labels = torch.randint(0, shape.vocab, (b, s), device=device)
        if cuda:
            torch.cuda.synchronize()
            row["params_allocated_bytes"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        autocast = config["precision"] == "amp-bf16"
        for _ in range(config["steps"]):
            started = time.perf_counter()
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                loss = model(ids, labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.synchronize()
            row["step_s"].append(round(time.perf_counter() - started, 4))
        row["loss"] = round(float(loss.detach()), 4)
        del loss
        row["status"] = "ok"
    except torch.cuda.OutOfMemoryError as error:
        row["status"] = "oom"
        row["error"] = str(error).splitlines()[0][:300]
    except Exception as error:  # noqa: BLE001 - one bad config is one bad row
        row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
    if cuda:
        torch.cuda.synchronize()
        row["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        row["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        if row["status"] == "ok":
            row["steady_allocated_bytes"] = torch.cuda.memory_allocated()
    else:
        row["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    return row


# ---------------------------------------------------------------- parent: configs, children, document

def versions(device: str) -> dict:
    """Asked in a child, so the parent never initialises CUDA."""
    code = ("import json, torch; c = torch.cuda.is_available(); print(json.dumps({'torch': torch.__version__, "
            "'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version() if c else None, "
            "'gpu_name': torch.cuda.get_device_name(0) if c else None, "
            "'gpu_total_bytes': torch.cuda.get_device_properties(0).total_memory if c else None}))")
    if device == "cpu":
        code = "import json, torch; print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda}))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, json.JSONDecodeError, IndexError) as error:
        return {"error": f"{type(error).__name__}"}


def configs(args: argparse.Namespace) -> list[dict]:
    rows = []
    for preset in args.presets:
        batches = [args.micro_batch]
        if preset in BIG and args.small_micro_batch and args.small_micro_batch != args.micro_batch:
            batches.append(args.small_micro_batch)
        for precision in args.precisions:
            for recompute in args.recompute:
                for micro_batch in batches:
                    rows.append({"preset": preset, "precision": precision, "recompute": recompute,
                                 "attention": args.attention, "seq": args.seq, "micro_batch": micro_batch,
                                 "steps": args.steps, "device": args.device})
    return rows


def run_child(config: dict, timeout_s: float) -> dict:
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(config)],
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return dict(config, status="timeout", error=f"no result within {timeout_s:g} s",
                    wall_s=round(time.perf_counter() - started, 2))
    for line in reversed(done.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            row["wall_s"] = round(time.perf_counter() - started, 2)
            return row
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
    return dict(config, status="error", error=f"child exited {done.returncode}: {tail[0][:300]}",
                wall_s=round(time.perf_counter() - started, 2))


def gib(value) -> str:
    return "-" if value is None else f"{value / 2**30:.2f}"


def table(rows: list[dict]) -> str:
    head = f"{'preset':<12} {'precision':<9} {'recomp':<6} {'mb':>3} {'status':<8} {'peak GiB':>9} " \
           f"{'reserved':>9} {'params+opt':>10} {'RSS GiB':>8} {'step s':>7}"
    lines = [head, "-" * len(head)]
    for r in rows:
        steps = r.get("step_s") or []
        lines.append(f"{r['preset']:<12} {r['precision']:<9} {r['recompute']:<6} {r['micro_batch']:>3} "
                     f"{r['status']:<8} {gib(r.get('peak_allocated_bytes')):>9} "
                     f"{gib(r.get('peak_reserved_bytes')):>9} {gib(r.get('steady_allocated_bytes')):>10} "
                     f"{gib(r.get('max_rss_bytes')):>8} {(f'{steps[-1]:.3f}' if steps else '-'):>7}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="plan_memory_calibration.json", help="the JSON document to write")
    parser.add_argument("--device", default="cuda", help="cuda (one GPU: cuda:0) or cpu (smoke test: max RSS)")
    parser.add_argument("--presets", nargs="+", default=list(DEFAULT_PRESETS),
                        help="preset names of gpuready.shapes.PRESETS, or 'tiny' (2 layers, hidden 64)")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--recompute", nargs="+", default=["none", "full"], choices=("none", "full", "selective"))
    parser.add_argument("--attention", default="flash", choices=("flash", "eager"))
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--micro-batch", type=int, default=None, help="default 8 on cuda, 1 on cpu")
    parser.add_argument("--small-micro-batch", type=int, default=1,
                        help=f"also measured for {', '.join(BIG)} (0: not)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=150.0, help="per config")
    parser.add_argument("--budget-s", type=float, default=420.0, help="configs not started by then are skipped")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_one(json.loads(args.child))), flush=True)
        return 0
    if args.micro_batch is None:
        args.micro_batch = 1 if args.device == "cpu" else 8
    for name in args.presets:
        try:
            resolve(name)
        except KeyError:
            parser.error(f"--presets: unknown preset {name!r}")
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    clock = time.perf_counter()
    rows = []
    for config in configs(args):
        if time.perf_counter() - clock > args.budget_s:
            rows.append(dict(config, status="skipped", error=f"--budget-s {args.budget_s:g} s spent"))
            continue
        row = run_child(config, args.timeout_s)
        rows.append(row)
        print(f"{row['preset']} {row['precision']} {row['recompute']} mb={row['micro_batch']}: {row['status']} "
              f"peak {gib(row.get('peak_allocated_bytes'))} GiB ({row.get('wall_s')} s)", file=sys.stderr, flush=True)
    document = {
        "schema": SCHEMA,
        "started_at": started_at,
        "host": platform.node(),
        "device": args.device,
        "versions": versions(args.device),
        "method": {
            "precisions": {p: METHOD[p] for p in args.precisions},
            "steps": f"{args.steps} training steps (forward, backward, AdamW step, zero_grad(set_to_none=True)) on "
                     "random tokens; torch.cuda.reset_peak_memory_stats() after the model and optimizer are built, "
                     "before step 1; peaks read after the last step",
            "model": "gpuready.workloads.gpt.build_model (plain torch; logits in the model/autocast dtype, loss "
                     "through F.cross_entropy(logits.float()))",
            "isolation": "one fresh Python process per config",
            "fields": "peak_allocated_bytes = torch.cuda.max_memory_allocated(), peak_reserved_bytes = "
                      "max_memory_reserved(), params_allocated_bytes = memory_allocated() after build (parameters "
                      "only), steady_allocated_bytes = memory_allocated() after the last step (parameters + "
                      "optimizer states, gradients freed); max_rss_bytes (cpu only) = getrusage ru_maxrss",
            "cpu": "on --device cpu the peak fields are null and max_rss_bytes is recorded instead",
            "timeout_s": args.timeout_s,
        },
        "rows": rows,
        "wall_s": round(time.perf_counter() - clock, 1),
    }
    with open(args.out, "w") as handle:
        json.dump(document, handle, indent=1)
    print(table(rows))
    print(f"wrote {args.out} ({document['wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
