"""`gpuready compare BASE NEW` (issue 22): two reports → what got worse or better beyond a tolerance, findings that
newly fail or recovered, versions that changed.

The documents are reports recorded on one NVIDIA H200 (bus id 0000:00:06.0, tests/fixtures/h200-*/README.md). Every
change is worked out by hand in the docstrings, (new − base) / base, rounded to 0.01 %, never by the implementation's
formula.
"""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.report.compare import compare_documents
from gpuready.report.compare_view import render_compare
from gpuready.verbs.compare import WHOLE_FILE_BYTES

BURN_60S = FIXTURES / "h200-burn" / "burn-60s-report.json"
SHARED = FIXTURES / "h200-shared-gpu"
BENCH = FIXTURES / "h200-bench"
VALIDATE_EXCLUSIVE = FIXTURES / "plan" / "h200-validate-compute.json"
"""validate's compute and memory figures on the H200 alone (2026-12-03 09:13)."""
RECORDED = [path for path in sorted(FIXTURES.glob("h200-*/*.json")) + [VALIDATE_EXCLUSIVE]
            if "measurements" in json.loads(path.read_text())]
"""Every recorded report (the bundles' JSON files beside them are not reports)."""
CJK = re.compile(r"[\u4e00-\u9fff]")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def compared(base: Path | dict, new: Path | dict, **options) -> dict:
    return compare_documents(base if isinstance(base, dict) else load(base),
                             new if isinstance(new, dict) else load(new), **options)


def changes(entries: list[dict]) -> dict[str, float]:
    return {entry["name"]: entry["change_pct"] for entry in entries}


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def shown(document: dict, lang: str = "en", verbose: bool = False) -> str:
    buffer = io.StringIO()
    render_compare(document, lang, verbose, Console(file=buffer, width=80, color_system=None))
    return buffer.getvalue()


# --- recorded pairs ------------------------------------------------------------------------------------------------

def test_a_foreign_process_on_the_gpu_halves_the_burn_throughput():
    """burn-60s-report (the H200 alone, 2026-12-02) → burn-foreign-loop (another process ran a bf16 matmul loop on the
    same GPU, 2026-12-03): burn_tflops_bf16 664.85 → 305.68 TFLOP/s, (305.68 − 664.85) / 664.85 = −359.17 / 664.85 =
    −54.02 %: worse (compute, higher is better, beyond 5 %). burn_power_w 691.4 → 690.8 W = −0.09 %: within tolerance.
    burn.throughput_low did not exist in the older burn's report and fails now; burn.gpu_shared (new) warns. Exit 1."""
    document = compared(BURN_60S, SHARED / "burn-foreign-loop.json")
    assert [(entry["name"], entry["kind"], entry["base"], entry["new"], entry["change_pct"], entry["tolerance_pct"])
            for entry in document["worse"]] == [("burn_tflops_bf16", "compute", 664.85, 305.68, -54.02, 5.0)]
    assert document["worse"][0]["subject"]["gpu"]["bus_id"] == "0000:00:06.0"
    assert changes(document["unchanged"]) == {"burn_power_w": -0.09}
    assert document["better"] == [] and document["changed"] == []
    assert [(entry["check_id"], entry["base"], entry["new"]) for entry in document["newly_failing"]] == [
        ("burn.throughput_low", None, "fail")]  # issue 32: a warn is listed as newly warning, not failing
    assert [(entry["check_id"], entry["new"]) for entry in document["newly_warning"]] == [("burn.gpu_shared", "warn")]
    assert document["findings_unchanged"] == 8  # errors, xid, throttle ×2, temperature, power, ecc, clocks: all pass
    assert document["exit_code"] == ExitCode.NOT_READY


def test_the_burn_that_refused_to_start_shares_no_figure_with_the_shared_burn():
    """burn-exclusive (`--exclusive` with the foreign loop running: nothing started, no measurement, burn.gpu_shared
    fail) → burn-foreign-loop (the same loop, burn ran: 305.68 TFLOP/s). There is no throughput before to compare:
    both figures are new only. burn.gpu_shared fail → warn recovered; burn.throughput_low (absent → fail) newly
    fails: exit 1. The exclusive run started 6 s after the shared one (08:08:36 vs 08:08:30): the console says NEW is
    the older."""
    document = compared(SHARED / "burn-exclusive.json", SHARED / "burn-foreign-loop.json")
    assert document["worse"] == document["better"] == document["unchanged"] == []
    assert sorted(entry["name"] for entry in document["unmatched"]["new_only"]) == ["burn_power_w", "burn_tflops_bf16"]
    assert [(entry["check_id"], entry["base"], entry["new"]) for entry in document["recovered"]] == [
        ("burn.gpu_shared", "fail", "warn")]
    assert [(entry["check_id"], entry["base"], entry["new"]) for entry in document["newly_failing"]] == [
        ("burn.throughput_low", None, "fail")]
    assert document["exit_code"] == 1
    text = shown(document)
    assert "NEW started before BASE" in text
    assert "Only in the new report: 2 measurement(s): burn_power_w, burn_tflops_bf16." in text
    assert "No measurement is in both reports" not in text  # the base measured nothing: nothing to ask about


def test_validate_under_a_foreign_loop_is_worse_on_every_compute_figure():
    """plan/h200-validate-compute (the H200 alone) → validate-foreign-loop (the foreign bf16 loop running):
    bf16 770.692 → 315.527 = −455.165 / 770.692 = −59.06 %; tf32 401.414 → 166.276 = −58.58 %; fp16 740.05 → 308.137
    = −58.36 %; fp32 51.05 → 21.731 = −57.43 %; fp8 1408.275 → 639.537 = −54.59 %; memory copy 4287.052 → 2085.342
    GB/s = −51.36 %: six figures worse, worst first. compute.low passed for each dtype and fails now (the findings
    hold no message values: paired in their order, bf16 fp16 tf32 fp32 fp8), memory_bw.low too. validate.gpu_shared
    passed on the host (no GPU shared) and warns on GPU 0 now: one check on each side, paired. The host-to-device
    and collective figures were not measured before: new only."""
    document = compared(VALIDATE_EXCLUSIVE, SHARED / "validate-foreign-loop.json")
    assert [(entry["name"], entry["change_pct"]) for entry in document["worse"]] == [
        ("matmul_tflops_bf16", -59.06), ("matmul_tflops_tf32", -58.58), ("matmul_tflops_fp16", -58.36),
        ("matmul_tflops_fp32", -57.43), ("matmul_tflops_fp8", -54.59), ("memory_copy_gb_per_s", -51.36)]
    failing = [(entry["check_id"], entry["base"], entry["new"], entry["message"].split(":")[0])
               for entry in document["newly_failing"]]
    assert failing == [("compute.low", "pass", "fail", "bf16 matmul"), ("compute.low", "pass", "fail", "fp16 matmul"),
                       ("compute.low", "pass", "fail", "tf32 matmul"), ("compute.low", "pass", "fail", "fp32 matmul"),
                       ("compute.low", "pass", "fail", "fp8 matmul"),
                       ("memory_bw.low", "pass", "fail", "device memory copy (read+write)")]
    assert [(entry["check_id"], entry["base"], entry["new"]) for entry in document["newly_warning"]] == [
        ("validate.gpu_shared", "pass", "warn")]  # issue 32: under its own heading
    assert len(document["unmatched"]["new_only"]) == 9  # 4 host↔device copies, 5 collective latencies
    assert document["versions"] == []  # driver 580.159.04, torch 2.11.0+cu130, NCCL 2.28.9 on both
    assert document["exit_code"] == 1


def test_a_later_validate_that_only_warns_exits_0_unless_warnings_fail():
    """plan/h200-validate-compute → validate-sigterm (a later validate stopped by SIGTERM after its compute part):
    bf16 770.692 → 806.51 = +4.65 % and tf32 401.414 → 413.858 = +3.10 %, fp32 51.05 → 50.846 = −0.40 %, memory
    4287.052 → 4269.704 = −0.40 %: within 5 %; fp16 740.05 → 779.519 = +5.33 % and fp8 1408.275 → 1483.357 = +5.33 %:
    better. validate.interrupted (new) warns: exit 0, and 1 with --fail-on warn."""
    document = compared(VALIDATE_EXCLUSIVE, SHARED / "validate-sigterm.json")
    assert changes(document["better"]) == {"matmul_tflops_fp16": 5.33, "matmul_tflops_fp8": 5.33}
    assert changes(document["unchanged"]) == {"matmul_tflops_bf16": 4.65, "matmul_tflops_tf32": 3.10,
                                              "matmul_tflops_fp32": -0.40, "memory_copy_gb_per_s": -0.40}
    assert document["newly_failing"] == [] and [(entry["check_id"], entry["new"])
                                                for entry in document["newly_warning"]] == [("validate.interrupted", "warn")]
    assert document["worse"] == [] and document["exit_code"] == 0
    assert compared(VALIDATE_EXCLUSIVE, SHARED / "validate-sigterm.json", fail_on_warn=True)["exit_code"] == 1


def test_a_bench_with_twice_the_micro_batch_says_its_setup_changed():
    """bench 1.3B amp-bf16 micro-batch 4 → micro-batch 8 compiled, both `single` on 1 GPU (matched by strategy and
    world size): tokens/s 42,680.75 → 60,973.58 = +42.86 % and MFU 0.391727 → 0.55962 = +42.86 %, MFU against the
    measured matmul 0.498557 → 0.71212 = +42.84 %: better. Step time 0.191937 → 0.268707 s = +40.00 % and peak memory
    allocated 39,643,464,192 → 52,662,436,864 B = +32.84 %, reserved 40,833,646,592 → 53,303,312,384 B = +30.54 %:
    worse (lower is better). The micro-batch changed 4 → 8: said, since it alone moves every figure."""
    document = compared(BENCH / "bench-1.3B-amp-bf16-mb4.json", BENCH / "bench-1.3B-amp-bf16-mb8-compiled.json")
    assert changes(document["better"]) == {"single_tokens_per_s": 42.86, "single_tokens_per_s_per_gpu": 42.86,
                                           "mfu": 42.86, "mfu_vs_measured_matmul": 42.84}
    assert changes(document["worse"]) == {"step_time_s": 40.0, "peak_memory_allocated_bytes": 32.84,
                                          "peak_memory_reserved_bytes": 30.54}
    assert {entry["kind"] for entry in document["worse"]} == {"time", "memory"}
    assert all(entry["run"] == {"strategy": "single", "world_size": 1} for entry in document["worse"])
    assert document["setup_changes"] == [{"name": "micro_batch", "base": 4, "new": 8}]
    text = shown(document)
    assert "step_time_s vm single×1: 191.9 ms → 268.7 ms (+40.0 %)" in text
    assert "micro_batch 4 → 8" in text


@pytest.mark.parametrize("path", RECORDED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_a_report_compared_with_itself_has_nothing_worse(path):
    document = compared(path, path)
    assert document["worse"] == document["better"] == document["changed"] == []
    assert document["newly_failing"] == document["recovered"] == document["versions"] == []
    assert document["unmatched"] == {"base_only": [], "new_only": []}
    assert len(document["unchanged"]) == len(load(path)["measurements"])
    assert document["findings_unchanged"] == len(load(path)["findings"])
    assert document["exit_code"] == 0


# --- matching ------------------------------------------------------------------------------------------------------

def _renumbered(document: dict, index: int, bus_id: str | None = None) -> dict:
    """The document with its GPU as NVML index `index` (and another bus id, where given) in every subject."""
    document = copy.deepcopy(document)
    for item in document["measurements"] + document["findings"]:
        gpu = (item.get("subject") or {}).get("gpu")
        if gpu:
            gpu["index"] = index
            if bus_id:
                gpu["bus_id"] = bus_id
    return document


def test_a_gpu_renumbered_after_a_reboot_is_matched_by_its_bus_id():
    """The same report with the H200 as GPU 3 (another boot's numbering, bus id 0000:00:06.0 kept) and its bf16 matmul
    770.692 → 693.623 TFLOP/s (−77.069 / 770.692 = −10.00 %): matched, worse, shown with both numbers."""
    base = load(VALIDATE_EXCLUSIVE)
    new = _renumbered(base, 3)
    next(m for m in new["measurements"] if m["name"] == "matmul_tflops_bf16")["value"] = 693.623
    document = compare_documents(base, new)
    assert document["unmatched"] == {"base_only": [], "new_only": []}
    assert changes(document["worse"]) == {"matmul_tflops_bf16": -10.0}
    assert document["worse"][0]["base_subject"]["gpu"]["index"] == 0
    assert document["worse"][0]["subject"]["gpu"]["index"] == 3
    assert "matmul_tflops_bf16 GPU3 0000:00:06.0 (GPU0 in the base): 770.7 TFLOP/s → 693.6 TFLOP/s (-10.0 %)" \
        in " ".join(shown(document).split())  # one line wrapped at 80 columns
    assert document["findings_unchanged"] == len(base["findings"])


def test_another_gpu_under_the_same_index_is_not_matched():
    """GPU 0 at another bus id (0000:3b:00.0; nvidia-smi's 8-digit domain spelling) is another GPU: its figures are
    new only, the old GPU's base only; nothing is called worse."""
    base = load(VALIDATE_EXCLUSIVE)
    document = compare_documents(base, _renumbered(base, 0, "00000000:3B:00.0"))
    assert document["worse"] == document["unchanged"] == []
    assert len(document["unmatched"]["base_only"]) == len(document["unmatched"]["new_only"]) == 6
    same = compare_documents(base, _renumbered(base, 0, "00000000:00:06.0"))  # one GPU, the other spelling
    assert len(same["unchanged"]) == 6 and same["unmatched"]["new_only"] == []


def _with_latency(document: dict, microseconds: float) -> dict:
    document = copy.deepcopy(document)
    next(m for m in document["measurements"] if m["name"] == "all_reduce_latency_us")["value"] = microseconds
    return document


def test_a_latency_that_went_up_is_worse_and_one_that_went_down_is_better():
    """all_reduce_latency_us 35.872 µs (validate-foreign-loop) → 71.744 µs: +35.872 / 35.872 = +100.00 %, worse (lower
    is better), beyond the 70 % a latency moves between runs of one healthy machine (compare.toml noise_pct, from five
    H200 runs); → 7.174 µs: −28.698 / 35.872 = −80.00 %, better; → 43.046 µs (+20.00 %): within that noise, neither;
    with --tolerance latency=10, the +20 % is worse again (the user's tolerance wins)."""
    base = load(SHARED / "validate-foreign-loop.json")
    worse = compare_documents(base, _with_latency(base, 71.744))
    assert [(entry["name"], entry["kind"], entry["better"], entry["change_pct"]) for entry in worse["worse"]] == [
        ("all_reduce_latency_us", "latency", "lower", 100.0)]
    assert worse["exit_code"] == 1
    better = compare_documents(base, _with_latency(base, 7.174))
    assert changes(better["better"]) == {"all_reduce_latency_us": -80.0} and better["exit_code"] == 0
    noise = compare_documents(base, _with_latency(base, 43.046))
    assert noise["worse"] == [] and noise["exit_code"] == 0
    assert noise["tolerances_pct"]["latency"] == 70.0 and noise["tolerances_pct"]["compute"] == 5.0
    strict = compare_documents(base, _with_latency(base, 43.046), {"latency": 10.0})
    assert changes(strict["worse"]) == {"all_reduce_latency_us": 20.0} and strict["tolerances_pct"]["latency"] == 10.0


def test_two_machines_are_compared_figure_by_figure_but_two_nodes_of_one_report_are_not_mixed():
    """Each report of one machine (`vm`, then `node7`): figures matched across the two, said on the console. A report
    of two nodes whose GPUs share a bus id (identical servers): each node's figure is matched with its own."""
    base = load(VALIDATE_EXCLUSIVE)
    other = json.loads(json.dumps(base).replace('"host": "vm"', '"host": "node7"'))
    document = compare_documents(base, other)
    assert len(document["unchanged"]) == 6 and document["same_host"] is False
    assert "Two machines (vm, then node7)" in shown(document)

    def two_nodes(bf16_on_node2: float) -> dict:
        document = copy.deepcopy(base)
        second = copy.deepcopy(next(m for m in base["measurements"] if m["name"] == "matmul_tflops_bf16"))
        second["subject"]["host"], second["value"] = "node2", bf16_on_node2
        document["measurements"].append(second)
        return document
    # node2's bf16 700 → 770.692: +10.10 % better; vm's 770.692 unchanged (not held against node2's 700)
    document = compare_documents(two_nodes(700.0), two_nodes(770.692))
    assert [(entry["subject"]["host"], entry["change_pct"]) for entry in document["better"]] == [("node2", 10.1)]
    assert len(document["unchanged"]) == 6


def test_findings_of_one_check_on_one_gpu_are_paired_by_what_they_name():
    """Five compute.low findings on one GPU whose message values name the dtype: in the new report the order is
    reversed and only fp8 fails; the fp8 one is newly failing, whatever the order."""
    def report(order: list[str], failing: str | None) -> dict:
        findings = [{"check_id": "compute.low", "status": "fail" if dtype == failing else "pass",
                     "subject": {"host": "vm", "gpu": {"index": 0, "bus_id": "0000:00:06.0"}},
                     "message": f"{dtype} matmul", "message_id": "validate.compute.low",
                     "message_values": {"what": {"message_id": "validate.what.matmul",
                                                 "message_values": {"dtype": dtype}}, "value": 1.0}}
                    for dtype in order]
        return {"host": "vm", "findings": findings, "measurements": []}
    dtypes = ["bf16", "fp16", "tf32", "fp32", "fp8"]
    document = compare_documents(report(dtypes, None), report(dtypes[::-1], "fp8"))
    assert [(entry["message"], entry["base"], entry["new"]) for entry in document["newly_failing"]] == [
        ("fp8 matmul", "pass", "fail")]
    assert document["findings_unchanged"] == 4


def test_versions_that_changed_are_listed():
    """The driver 580.159.04 → 580.95.05 (facts) and torch 2.11.0+cu130 → 2.10.0+cu128 (the measurements' versions);
    CUDA 13.0 and NCCL 2.28.9 kept: two changes, and torch's `2.11.0` in the facts beside `2.11.0+cu130` in the
    measurements of one report is one version, not a change."""
    base = load(SHARED / "validate-foreign-loop.json")
    new = json.loads(json.dumps(base).replace("2.11.0+cu130", "2.10.0+cu128"))
    new["facts"]["driver_version"] = "580.95.05"
    new["facts"]["torch"]["version"] = "2.10.0"
    assert compare_documents(base, new)["versions"] == [
        {"name": "driver", "base": "580.159.04", "new": "580.95.05"},
        {"name": "torch", "base": "2.11.0+cu130", "new": "2.10.0+cu128"}]


def test_an_old_document_without_subjects_units_or_versions_is_still_compared():
    """A report of an older version, edited down to measurement names and values and findings' ids and statuses, with
    no host, subject, unit, method or facts: figures matched by name (a unit unknown: kind `other`, neither better nor
    worse), findings by check id. bf16 770.692 → 315.527 (−59.06 %) in the current report is `changed`; the
    memory_bw.low pass → fail is newly failing. A value that is not a number is left out (base only)."""
    full = load(VALIDATE_EXCLUSIVE)
    old = {"measurements": [{"name": m["name"], "value": m["value"]} for m in full["measurements"]],
           "findings": [{"check_id": f["check_id"], "status": f["status"]} for f in full["findings"]]}
    old["measurements"].append({"name": "broken", "value": "n/a"})
    new = copy.deepcopy(old)
    new["measurements"][0]["value"] = 315.527
    new["findings"][-1]["status"] = "fail"
    new["measurements"][-1]["value"] = 1.0
    document = compare_documents(old, new)
    assert [(entry["name"], entry["kind"], entry["change_pct"]) for entry in document["changed"]] == [
        ("matmul_tflops_bf16", "other", -59.06)]
    assert [(entry["check_id"], entry["base"], entry["new"]) for entry in document["newly_failing"]] == [
        ("memory_bw.low", "pass", "fail")]
    assert [entry["name"] for entry in document["unmatched"]["new_only"]] == ["broken"]
    assert document["exit_code"] == 1
    shown(document)  # renders without a traceback


# --- the command line ----------------------------------------------------------------------------------------------

def test_json_is_the_compare_document_and_the_exit_code_follows_it(capsys):
    code, out, err = run_cli(capsys, str(BURN_60S), str(SHARED / "burn-foreign-loop.json"), "--json")
    document = json.loads(out)
    assert code == document["exit_code"] == 1 and err == ""
    assert {"base", "new", "worse", "better", "newly_failing", "recovered", "versions", "unmatched",
            "exit_code"} <= set(document)
    assert document["base"]["host"] == "vm" and document["base"]["started_at"] == "2026-12-02T12:43:31+00:00"
    assert document["base"]["file"] == str(BURN_60S)
    assert set(document["worse"][0]) >= {"name", "subject", "base", "new", "change_pct", "tolerance_pct"}


def test_a_tolerance_per_kind_changes_the_judgement(capsys):
    """fp16 740.05 → 779.519 and fp8 1408.275 → 1483.357 (+5.33 %) are better at 5 %, unchanged at compute=8."""
    base, new = str(VALIDATE_EXCLUSIVE), str(SHARED / "validate-sigterm.json")
    code, out, _ = run_cli(capsys, base, new, "--json", "--tolerance", "compute=8", "--tolerance", "busbw=3")
    document = json.loads(out)
    assert code == 0 and document["better"] == []
    assert document["tolerances_pct"]["compute"] == 8.0 and document["tolerances_pct"]["busbw"] == 3.0
    assert document["tolerances_pct"]["bandwidth"] == 5.0


@pytest.mark.parametrize("value, said", [
    ("compte=3", "'compte' is not a kind of figure (the kinds: busbw, latency, host_pageable, time, bandwidth, compute, "
                 "throughput, efficiency, memory, power, other); did you mean compute?"),
    ("compute=-1", "'-1' is not a number of percent from 0 to 1,000"),
    ("compute", "'compute' is not KIND=PCT (KIND: busbw, latency,"),
])
def test_a_wrong_tolerance_is_one_sentence(capsys, value, said):
    code, out, err = run_cli(capsys, str(BURN_60S), str(BURN_60S), "--tolerance", value)
    assert code == ExitCode.USAGE and out == ""
    assert err.startswith(f"gpuready: argument --tolerance: {said}") and err.count("\n") == 1


def test_unreadable_input_is_one_sentence_and_exit_2(capsys, tmp_path):
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"measurements": [')
    no_report = tmp_path / "list.json"
    no_report.write_text("[1, 2]")
    empty_object = tmp_path / "empty.json"
    empty_object.write_text('{"verdict": "ready"}')
    own = tmp_path / "compare.json"
    own.write_text(json.dumps(compared(BURN_60S, BURN_60S)))
    cases = {tmp_path / "missing.json": "no such file", tmp_path: "not a regular file",
             corrupt: "not JSON (", no_report: "not a report (not a JSON object)",
             empty_object: "not a gpuready report: it holds neither findings nor measurements",
             own: "a gpuready.compare document, not the report of a run"}
    for path, why in cases.items():
        code, out, err = run_cli(capsys, str(BURN_60S), str(path))
        assert code == ExitCode.USAGE and out == "", path
        assert err.startswith(f"gpuready: {path} cannot be compared: {why}") and err.count("\n") == 1, err
    code, _, err = run_cli(capsys, "--lang", "zh", str(tmp_path / "missing.json"), str(BURN_60S))
    assert code == ExitCode.USAGE and err == f"gpuready: 无法比较 {tmp_path / 'missing.json'}：文件不存在\n"


def test_a_large_report_is_read_without_its_telemetry(tmp_path):
    """A burn report padded past the whole-file limit with telemetry series is streamed (series skipped): the same
    comparison as the file itself."""
    from gpuready.verbs.compare import read_report
    document = load(BURN_60S)
    document["series"] = document["series"] * (WHOLE_FILE_BYTES // len(json.dumps(document["series"])) + 2)
    large = tmp_path / "large.json"
    large.write_text(json.dumps(document))
    assert large.stat().st_size > WHOLE_FILE_BYTES
    read = read_report(large)
    assert "series" not in read and read["measurements"] == document["measurements"]
    assert compare_documents(read, load(BURN_60S))["unchanged"] == compared(BURN_60S, BURN_60S)["unchanged"]


def test_the_console_says_problems_first(capsys):
    """Worse, then newly failing, then better, then recovered; the unchanged in one line, the result last."""
    base, new = load(VALIDATE_EXCLUSIVE), load(SHARED / "validate-foreign-loop.json")
    new["measurements"][5]["value"] = 4600.0  # memory copy 4287.052 → 4600: +7.30 % better
    new["findings"][0]["status"] = "pass"  # validate.gpu_shared: no longer newly warning
    base["findings"].append({"check_id": "ddp.mismatch", "status": "fail", "subject": {"host": "vm"}})
    text = shown(compare_documents(base, new))
    order = [text.index(heading) for heading in ("Worse (5)", "Newly failing (6)", "Better (1)", "Recovered (1)",
                                                 "Unchanged: 0 measurement(s) within tolerance, 1 finding(s)",
                                                 "Result: 5 measurement(s) worse, 6 finding(s) newly failing")]
    assert order == sorted(order)
    assert "memory_copy_gb_per_s GPU0 0000:00:06.0: 4,287.1 GB/s → 4,600.0 GB/s (+7.3 %)" in text
    assert "compute.low GPU0 0000:00:06.0: pass → fail" in text
    assert "ddp.mismatch vm: fail → pass" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_the_console_in_chinese(capsys):
    code, out, _ = run_cli(capsys, "--lang", "zh", str(BURN_60S), str(SHARED / "burn-foreign-loop.json"))
    assert code == 1
    for words in ("变差（1）", "burn_tflops_bf16 GPU0 0000:00:06.0：664.9 TFLOP/s → 305.7 TFLOP/s（-54.0 %）",
                  "新出现的失败（1）", "新出现的警告（1）", "未检查 → 失败 fail", "未变：1 项测量值在容差内，8 项检查结果状态相同。",
                  "结论：1 项测量值变差，1 项检查新出现失败，1 项新出现警告；退出码 1。"):
        assert words in out, words
    for english in ("Worse", "Newly failing", "Unchanged", "Result", "not run"):
        assert english not in out, english


def test_out_writes_the_compare_document(capsys, tmp_path):
    out_file = tmp_path / "compare.json"
    code, out, _ = run_cli(capsys, str(BURN_60S), str(BURN_60S), "--out", str(out_file))
    assert code == 0 and "nothing got worse" in out
    assert json.loads(out_file.read_text())["exit_code"] == 0
    code, out, _ = run_cli(capsys, str(BURN_60S), str(BURN_60S), "--out", str(tmp_path / "no" / "such.json"))
    assert code == ExitCode.USAGE and out == ""


def test_text_from_the_reports_reaches_the_terminal_escaped():
    """Names, hosts, bus ids, versions and messages come from files: every control character is shown escaped and
    rich markup is printed as written, in both languages."""
    hostile = "x\x1b]0;pwned\x07\x9b2J[bold red]y"

    def report(value: float, status: str) -> dict:
        subject = {"host": hostile, "gpu": {"index": 0, "bus_id": hostile}}
        return {"host": hostile, "tool_version": hostile, "started_at": hostile,
                "facts": {"driver_version": hostile + status},
                "measurements": [{"name": hostile, "unit": "tflops", "value": value, "subject": subject,
                                  "method": {"strategy": hostile, "world_size": 1, "precision": hostile + status}}],
                "findings": [{"check_id": hostile, "status": status, "subject": subject, "message": hostile}]}
    document = compare_documents(report(100.0, "pass"), report(50.0, "fail"))
    assert len(document["worse"]) == len(document["newly_failing"]) == len(document["versions"]) == 1
    for lang in ("en", "zh"):
        text = shown(document, lang, verbose=True)
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), lang
        assert "x\\x1b]0;pwned\\x07\\x9b2J[bold red]y" in text, lang


def test_a_hand_edited_report_with_nan_still_gives_strict_json(capsys, tmp_path):
    """json.loads reads NaN and Infinity: a NaN value is left out, a NaN elsewhere (a rank, a method's size, the exit
    code) is null in the compare document, which stays strict JSON."""
    text = BURN_60S.read_text().replace('"rank": 0', '"rank": NaN').replace('"n": 8192', '"n": Infinity')
    text = text.replace('"exit_code": 0', '"exit_code": NaN').replace('"value": 691.4', '"value": NaN')
    edited = tmp_path / "edited.json"
    edited.write_text(text)
    code, out, err = run_cli(capsys, str(BURN_60S), str(edited), "--json")
    document = json.loads(out)
    assert code == 0 and err == "" and document["new"]["exit_code"] is None
    assert [entry["name"] for entry in document["unchanged"]] == ["burn_tflops_bf16"]
    assert [entry["name"] for entry in document["unmatched"]["new_only"]] == []
    assert [entry["name"] for entry in document["unmatched"]["base_only"]] == ["burn_power_w"]
