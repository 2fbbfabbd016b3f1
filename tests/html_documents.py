"""Report documents for the HTML report's tests, beside the recorded ones: an 8-GPU validate (P2P pairs, NCCL sizes,
host copies, a topology), a bench with a 1-GPU and an 8-GPU run, a fleet, and a hostile document. Figures are
written out here, so a test can name what the page must show."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
BURN = FIXTURES / "h200-burn" / "burn-60s-report.json"
HOSTILE = '"><script>window.pwned = 1</script></td></table><img src=x onerror="window.pwned = 2">\'\x1b[31m'
"""Closes the attribute, the cell, the table and the script; opens an element with a handler; a quote and an escape."""


def burn() -> dict:
    return json.loads(BURN.read_text())


def _gpu(index: int) -> dict:
    return {"index": index, "bus_id": f"0000:{0x18 + 0x10 * index:02x}:00.0", "uuid": f"GPU-{index}", "cuda_index": None}


def _subject(gpu: int | None = None, peer: int | None = None, host: str = "node-a") -> dict:
    return {"host": host, "gpu": _gpu(gpu) if gpu is not None else None,
            "peer": _gpu(peer) if peer is not None else None, "nic": None, "rank": None}


def _measure(name: str, value: float, unit: str, subject: dict, expected: float | None = None, **method) -> dict:
    return {"name": name, "subject": subject, "value": value, "unit": unit, "expected": expected,
            "expected_source": "test figure" if expected is not None else None, "method": method,
            "samples": [value], "versions": {}}


def _document(facts: dict, measurements: list[dict], findings: list[dict] | None = None, host: str = "node-a") -> dict:
    return {"schema_version": "1.0", "tool_version": "0.1.0", "run_id": "test", "started_at": "2026-12-04T00:00:00+00:00",
            "host": host, "verdict": "ready_with_warnings", "verdicts": {"single_node": "ready_with_warnings",
                                                                       "multi_node": "ready_with_warnings"},
            "exit_code": 0, "findings": findings or [], "measurements": measurements, "series": [], "facts": facts}


P2P_SLOW_PAIR = (3, 5)
"""The one pair copying at 120 GB/s; every other pair copies at 360 GB/s (unidirectional)."""
BUSBW_SIZES = [2**20, 2**24, 2**28, 2**30]
BUSBW_ALL_REDUCE = [40.0, 210.0, 330.0, 355.0]
EXPECTED_BUSBW = 369.0


def validate_8gpu() -> dict:
    """validate on 8 GPUs joined by NVLink (NV18 between every pair)."""
    gpus = range(8)
    measurements = [_measure("p2p_unidirectional_gb_per_s", 120.0 if (i, j) == P2P_SLOW_PAIR else 360.0, "gb_per_s",
                             _subject(i, j), expected=330.0) for i in gpus for j in gpus if i != j]
    rows = [{"collective": "all_reduce", "size_bytes": size, "placement": placement, "busbw_gb_per_s": busbw - drop,
             "algbw_gb_per_s": (busbw - drop) * 8 / 14, "time_us": 10.0, "wrong": 0}
            for size, busbw in zip(BUSBW_SIZES, BUSBW_ALL_REDUCE) for placement, drop in (("out_of_place", 0.0),
                                                                                         ("in_place", 5.0))]
    measurements.append(_measure("all_reduce_busbw_gb_per_s", max(BUSBW_ALL_REDUCE), "gb_per_s", _subject(),
                                 expected=EXPECTED_BUSBW, rows=rows, sizes_bytes=BUSBW_SIZES))
    measurements += [_measure("h2d_pinned_gb_per_s", 55.0 - index, "gb_per_s", _subject(index), expected=50.0)
                     for index in gpus]
    measurements += [_measure("matmul_tflops_bf16", 790.0, "tflops", _subject(index), expected=791.2) for index in gpus]
    links = [["X" if i == j else "NV18" for j in gpus] for i in gpus]
    facts = {"gpus": [{"index": i, "bus_id": _gpu(i)["bus_id"], "name": "NVIDIA H200"} for i in gpus],
             "topology": {"gpu_labels": [f"GPU{i}" for i in gpus], "links": links}, "validate": {}}
    return _document(facts, measurements)


SINGLE_TOKENS_PER_S = 70_000.0
DDP_TOKENS_PER_S = 500_000.0
"""Ideal for 8 GPUs: 8 × 70,000 = 560,000 tokens/s; 500,000 is 89 % of it."""


def bench_scaling() -> dict:
    measurements = []
    for strategy, world_size, tokens in (("single", 1, SINGLE_TOKENS_PER_S), ("ddp", 8, DDP_TOKENS_PER_S)):
        run = {"strategy": strategy, "world_size": world_size}
        measurements.append(_measure(f"{strategy}_tokens_per_s", tokens, "tokens_per_s", _subject(), **run))
        measurements.append(_measure("peak_memory_allocated_bytes", 20 * 2**30, "bytes", _subject(),
                                     expected=141 * 2**30, **run))
    return _document({"bench": {"runs": []}}, measurements)


def fleet() -> dict:
    """Six nodes; node-f's all_reduce busbw (200) is the one outlier against the median of 360."""
    values = {"node-a": 360.0, "node-b": 362.0, "node-c": 358.0, "node-d": 361.0, "node-e": 359.0, "node-f": 200.0}
    nodes = [{"host": host, "verdict": "outlier" if host == "node-f" else "healthy", "cohort": 0, "files": [],
              "outliers": [{"name": "all_reduce_busbw_gb_per_s", "subject": {"kind": "host"}, "value": 200.0,
                            "unit": "gb_per_s", "median": 360.0, "deficit_pct": 44.44, "rules": ["fleet"]}]
              if host == "node-f" else []} for host in sorted(values, key=lambda host: host != "node-f")]
    return {"summary": {"nodes": 6, "failing": 0, "outlier": 1, "unknown": 0, "healthy": 5}, "nodes": nodes,
            "cohorts": [{"key": {"gpu_model": "H200", "gpu_count": 8}, "nodes": 6}],
            "measurements": {"all_reduce_busbw_gb_per_s": {
                "values": [{"host": host, "value": value} for host, value in values.items()],
                "median": 360.0, "mad": 1.5, "n": 6, "unit": "gb_per_s"}}}


def hostile() -> dict:
    """Every string a renderer shows, and the keys charts read, carry `HOSTILE`."""
    document = validate_8gpu()
    document["host"] = HOSTILE
    document["not_enough_evidence"] = HOSTILE
    document["findings"] = [{"check_id": HOSTILE, "status": "fail", "category": HOSTILE,
                             "subject": {**_subject(0), "host": HOSTILE, "nic": HOSTILE},
                             "message": HOSTILE, "fix": HOSTILE,
                             "evidence": [{"file": HOSTILE, "line": 1, "text": HOSTILE}]},
                            {"check_id": "x", "status": HOSTILE, "message": "a status no version knows"}]
    for measurement in document["measurements"]:
        if measurement["subject"]["gpu"]:
            measurement["subject"]["gpu"]["bus_id"] = HOSTILE
        measurement["unit"] = HOSTILE
        measurement["expected_source"] = HOSTILE
    document["facts"]["gpus"][0]["name"] = HOSTILE
    document["facts"]["topology"]["gpu_labels"][0] = HOSTILE
    document["series"] = [{**series, "subject": {"gpu": {"bus_id": HOSTILE}}} for series in burn()["series"]]
    return document


def hostile_fleet() -> dict:
    document = fleet()
    for node in document["nodes"]:
        node["host"] = HOSTILE + node["host"]
        node["cohort"] = HOSTILE
        for outlier in node["outliers"]:
            outlier["unit"] = HOSTILE
    for value in document["measurements"]["all_reduce_busbw_gb_per_s"]["values"]:
        value["host"] = HOSTILE + value["host"]
    document["measurements"][HOSTILE] = {"values": [{"host": HOSTILE, "value": 1.0}], "median": 1.0, "unit": HOSTILE}
    return document


GIB = 2**30


def plan() -> dict:
    """plan's parts as the plan verb writes them: two strategies (ddp does not fit 80 GB: 96 GiB; fsdp does: 30 GiB)
    and two tensor-parallel degrees for inference."""
    def strategy(name: str, fits: bool, parameters: int, gradients: int, optimizer: int, activations: int) -> dict:
        terms = {"parameters": parameters * GIB, "gradients": gradients * GIB, "optimizer": optimizer * GIB,
                 "activations": activations * GIB, "other": 2 * GIB}
        return {"name": name, "fits": fits, "memory_bytes": {**terms, "total": sum(terms.values())},
                "step_time_s": 0.5, "bottleneck": "compute", "reasons": [f"{name} <reason>"]}
    document = _document({"plan": {"model": {"name": "llama2-7b", "parameters": 6_738_415_616},
                                   "machine": {"gpu_name": "H100 SXM", "gpus_per_node": 8,
                                               "memory_bytes_per_gpu": 80_000_000_000}}}, [])
    document["strategies"] = [strategy("fsdp", True, 2, 2, 12, 12), strategy("ddp", False, 13, 13, 50, 18)]
    document["inference"] = [{"tp": 1, "fits": True, "total_bytes": 20 * GIB, "weights_bytes": 13 * GIB,
                              "kv_cache_bytes": 5 * GIB, "notes": ["one GPU"]},
                             {"tp": 2, "fits": True, "total_bytes": 12 * GIB, "weights_bytes": 7 * GIB,
                              "kv_cache_bytes": 3 * GIB, "notes": []}]
    return document
