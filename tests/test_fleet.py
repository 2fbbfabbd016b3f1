"""`gpuready fleet` (issue 22): many nodes' reports → per-cohort spreads and the nodes that stand out.

Fleets here are made of a recorded H200 validate report (tests/fixtures/h200-shared-gpu/validate-sigterm.json: driver
580.159.04, one H200 SXM, bf16 expected 791.2 TFLOP/s) copied per node with the figures each test lists. Medians,
MADs, z-scores and deficits are worked out by hand in the docstrings, never by the implementation's formula.
"""

from __future__ import annotations

import copy
import re
import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.i18n import message
from gpuready.model import ExitCode
from gpuready.report import json_stream as stream
from gpuready.verbs.fleet import read
from gpuready.verbs.fleet.view import render_fleet

REAL = json.loads((FIXTURES / "h200-shared-gpu" / "validate-sigterm.json").read_text())
BF16 = next(m for m in REAL["measurements"] if m["name"] == "matmul_tflops_bf16")
RECORDED = sorted(FIXTURES.glob("h200-*/*.json"))


def node_report(host: str, bf16: float | list[float], *, driver: str | None = None, latency_us: float | None = None,
                verdict: str | None = None) -> dict:
    """The recorded report as `host`'s: its measurements replaced by bf16 matmul figures (one per GPU, GPU 0 first)
    and, where given, an all_reduce latency of the host."""
    document = copy.deepcopy(REAL)
    document["host"] = host
    figures = bf16 if isinstance(bf16, list) else [bf16]
    document["measurements"] = []
    for index, value in enumerate(figures):
        measurement = copy.deepcopy(BF16)
        measurement["value"] = value
        measurement["subject"]["gpu"]["index"] = index
        document["measurements"].append(measurement)
    if latency_us is not None:
        document["measurements"].append({"name": "all_reduce_latency_us", "unit": "us", "value": latency_us,
                                         "expected": None, "subject": {"host": host, "gpu": None, "peer": None}})
    if driver is not None:
        document["facts"]["driver_version"] = driver
    if verdict is not None:
        document["verdict"] = verdict
    return document


def write_fleet(folder: Path, documents: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for document in documents:
        (folder / f"{document['host']}.json").write_text(json.dumps(document, indent=1))
    return folder


def fleet_json(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main(["fleet", *map(str, argv), "--json"])
    return code, json.loads(capsys.readouterr().out)


def outliers_of(document: dict) -> dict[str, list[dict]]:
    return {row["host"]: row["outliers"] for row in document["nodes"] if row["outliers"]}


ELEVEN = [800, 802, 798, 805, 795, 801, 799, 803, 797, 700, 790]


def test_eleven_nodes_worked_by_hand(tmp_path, capsys):
    """bf16 TFLOP/s of 11 nodes: 800 802 798 805 795 801 799 803 797 700 790.

    Sorted: 700 790 795 797 798 799 800 801 802 803 805 → median = the 6th = 799.
    |x - 799|: 1 3 1 6 4 2 0 4 2 99 9 → sorted 0 1 1 2 2 3 4 4 6 9 99 → MAD = the 6th = 3.
    node09 (700): z = 0.6745 × (700 - 799) / 3 = -22.2585 ≤ -3.5 and deficit 99 / 799 = 12.39 % ≥ 3 % → outlier;
    also 700 / 791.2 = 0.8847 of its expectation, below validate's 0.90 → the `expected` rule too.
    node10 (790): z = 0.6745 × (-9) / 3 = -2.0235 > -3.5 (and deficit 1.13 % < 3 %) → healthy.
    """
    folder = write_fleet(tmp_path / "reports", [node_report(f"node{i:02d}", value) for i, value in enumerate(ELEVEN)])
    code, document = fleet_json(capsys, folder)
    assert code == ExitCode.NOT_READY
    assert document["summary"] | {} == {"nodes": 11, "failing": 0, "outlier": 1, "unknown": 0, "healthy": 10,
                                        "cohorts": 1, "files_read": 11, "unreadable": 0, "superseded": 0, "skipped": 0}
    [cohort] = document["cohorts"]
    assert cohort["key"] == {"gpu_model": "H200 SXM", "gpu_count": 1, "driver_version": "580.159.04"}
    assert cohort["measurements"]["matmul_tflops_bf16"] | {} == {
        "name": "matmul_tflops_bf16", "subject": "gpu", "unit": "tflops", "higher_is_better": True,
        "median": 799, "mad": 3, "n": 11}
    assert document["measurements"] == {"matmul_tflops_bf16": {
        "median": 799, "mad": 3, "n": 11, "unit": "tflops",
        "values": [{"host": f"node{i:02d}", "value": value} for i, value in enumerate(ELEVEN)]}}
    assert document["nodes"][0]["host"] == "node09" and document["nodes"][0]["verdict"] == "outlier"
    assert outliers_of(document) == {"node09": [{
        "name": "matmul_tflops_bf16", "subject": {"kind": "gpu", "gpu": 0, "peer": None}, "value": 700.0,
        "unit": "tflops", "median": 799, "deficit_pct": 12.39, "z": -22.26, "expected": 791.2,
        "share_of_expected": 0.8847, "rules": ["fleet", "expected"]}]}
    assert not cohort["weak"] and cohort["basis"] == "fleet"


def test_a_tight_fleet_flags_no_difference_below_the_floor(tmp_path, capsys):
    """Ten nodes at 800.0 ± 0.1 and one at 785 (785 / 791.2 = 0.992 of its expectation: fine).

    Values 799.9 800.0 800.1 (×3 each, plus one more 800.0) and 785: median 800.0; deviations 0.1 ×6, 0 ×4, 15 →
    MAD = 0.1. 785: z = 0.6745 × (-15) / 0.1 = -101.175 (far out) but deficit 15 / 800 = 1.875 % < 3 % → not flagged;
    with --floor-pct 1.5 it is."""
    values = [799.9, 800.0, 800.1] * 3 + [800.0, 785.0]
    folder = write_fleet(tmp_path / "tight", [node_report(f"n{i}", value) for i, value in enumerate(values)])
    code, document = fleet_json(capsys, folder)
    assert (code, outliers_of(document)) == (ExitCode.READY, {})
    assert document["cohorts"][0]["measurements"]["matmul_tflops_bf16"]["mad"] == pytest.approx(0.1)
    code, document = fleet_json(capsys, folder, "--floor-pct", "1.5")
    assert code == ExitCode.NOT_READY
    [outlier] = outliers_of(document)["n10"]
    assert outlier["deficit_pct"] == 1.88 and outlier["z"] == pytest.approx(-101.175, abs=0.01)


def test_mad_zero_lets_the_floor_alone_decide(tmp_path, capsys):
    """Nine nodes at exactly 780, one at 760 and one at 750: median 780; deviations 0 ×9, 20, 30 → MAD = 0, so no
    z-score exists. 760 is 20 / 780 = 2.56 % worse (under the 3 % floor: healthy); 750 is 30 / 780 = 3.85 % worse →
    an outlier, with z null. Both are above 0.9 × 791.2 = 712.08, so the expectation flags neither."""
    values = [780.0] * 9 + [760.0, 750.0]
    folder = write_fleet(tmp_path / "flat", [node_report(f"n{i:02d}", value) for i, value in enumerate(values)])
    code, document = fleet_json(capsys, folder)
    assert code == ExitCode.NOT_READY
    assert {host: [(o["deficit_pct"], o["z"], o["rules"]) for o in found] for host, found in
            outliers_of(document).items()} == {"n10": [(3.85, None, ["fleet"])]}


def test_a_latency_is_worse_when_higher_and_a_node_is_its_worst_gpu(tmp_path, capsys):
    """all_reduce latency (µs) of 11 nodes: 20 ×5, 21 ×5 and 45. Median 21? Sorted 20 20 20 20 20 21 21 21 21 21 45 →
    the 6th = 21; deviations 1 ×5, 0 ×5, 24 → sorted 0 0 0 0 0 1 1 1 1 1 24 → MAD = 1. 45: z = -0.6745 × (45 - 21) / 1
    = -16.19 (worse is negative), deficit (45 - 21) / 21 = 114.29 % → outlier: beyond the 70 % a latency moves between
    runs of one healthy machine (compare.toml noise_pct), where 30 µs (42.86 %) would not be.
    bf16: every node has two GPUs at 800 and 801, so its figure (its worst GPU's) is 800, but n03's GPU 1 runs 640:
    its figure is 640, of GPU 1. Median 800, MAD 0 (ten nodes at 800): no z-score; 160 / 800 = 20 % worse ≥ 3 %, and
    640 / 791.2 = 0.81 of its expectation → an outlier by both rules."""
    latencies = [20.0] * 5 + [21.0] * 5 + [45.0]
    documents = [node_report(f"n{i:02d}", [800.0, 640.0 if i == 3 else 801.0], latency_us=latency)
                 for i, latency in enumerate(latencies)]
    code, document = fleet_json(capsys, write_fleet(tmp_path / "lat", documents))
    found = outliers_of(document)
    assert code == ExitCode.NOT_READY and sorted(found) == ["n03", "n10"]
    assert [(o["name"], o["subject"], o["value"], o["median"], o["deficit_pct"], o["z"]) for o in found["n10"]] == [
        ("all_reduce_latency_us", {"kind": "host", "gpu": None, "peer": None}, 45.0, 21.0, 114.29, -16.19)]
    assert [(o["subject"]["gpu"], o["value"], o["median"], o["deficit_pct"], o["z"], o["rules"])
            for o in found["n03"]] == [(1, 640.0, 800.0, 20.0, None, ["fleet", "expected"])]


def test_cohorts_by_driver_and_reports_without_facts(tmp_path, capsys):
    """Six nodes on driver 580.159.04 at 800 and six on 570.86.10 at 700: apart, each cohort is tight and nobody is
    an outlier against its own cohort (700 / 791.2 = 0.885 of its expectation is low everywhere in the second: the
    absolute floor flags all six). A burn report, whose facts name no GPU or driver, is an `unknown` cohort."""
    documents = [node_report(f"new{i}", 800.0) for i in range(6)] + \
                [node_report(f"old{i}", 700.0, driver="570.86.10") for i in range(6)]
    folder = write_fleet(tmp_path / "mixed", documents)
    burn = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
    (folder / "burner.json").write_text(json.dumps(dict(burn, host="burner")))
    code, document = fleet_json(capsys, folder)
    assert [(c["key"] and c["key"]["driver_version"], c["nodes"], c["weak"]) for c in document["cohorts"]] == [
        ("570.86.10", 6, True), ("580.159.04", 6, True), (None, 1, True)]
    assert code == ExitCode.NOT_READY
    found = outliers_of(document)
    assert sorted(found) == [f"old{i}" for i in range(6)]
    assert {o["rules"][0] for rows in found.values() for o in rows} == {"expected"}
    assert document["cohorts"][2]["measurements"] == {"burn_tflops_bf16": {
        "name": "burn_tflops_bf16", "subject": "gpu", "unit": "tflops", "higher_is_better": True,
        "median": 664.85, "mad": 0, "n": 1}}  # burn_power_w (watts) is not a speed: not judged


def test_a_baseline_judges_a_small_fleet(tmp_path, capsys):
    """The baseline of the eleven nodes keeps the ten healthy ones: 790 795 797 798 799 800 801 802 803 805 → median
    (799 + 800) / 2 = 799.5; |x - 799.5| sorted 0.5 0.5 1.5 1.5 2.5 2.5 3.5 4.5 5.5 9.5 → MAD (2.5 + 2.5) / 2 = 2.5.
    Two new nodes at 800 and 760 alone: median 780, MAD 20, 760's z = 0.6745 × (-20) / 20 = -0.67: nothing flagged
    (and the cohort is said to be weak). Against the baseline: 760 is (799.5 - 760) / 799.5 = 4.94 % worse with
    z = 0.6745 × (-39.5) / 2.5 = -10.66 → an outlier."""
    write_fleet(tmp_path / "golden", [node_report(f"node{i:02d}", value) for i, value in enumerate(ELEVEN)])
    baseline = tmp_path / "baseline.json"
    code, _document = fleet_json(capsys, tmp_path / "golden", "--save-baseline", baseline)
    saved = json.loads(baseline.read_text())
    assert saved["format"] == "gpuready.fleet-baseline" and saved["created_at"][:4].isdigit()
    [cohort] = saved["cohorts"]
    assert cohort["measurements"]["matmul_tflops_bf16"]["median"] == 799.5
    assert cohort["measurements"]["matmul_tflops_bf16"]["mad"] == 2.5
    assert cohort["measurements"]["matmul_tflops_bf16"]["n"] == 10 and len(cohort["sources"]) == 10
    small = write_fleet(tmp_path / "small", [node_report("a", 800.0), node_report("b", 760.0)])
    code, alone = fleet_json(capsys, small)
    assert (code, outliers_of(alone), alone["cohorts"][0]["weak"]) == (ExitCode.READY, {}, True)
    code, judged = fleet_json(capsys, small, "--baseline", baseline)
    assert code == ExitCode.NOT_READY and judged["cohorts"][0]["basis"] == "baseline"
    assert [(o["median"], o["deficit_pct"], o["z"], o["rules"]) for o in outliers_of(judged)["b"]] == [
        (799.5, 4.94, -10.66, ["baseline"])]
    (small / "baseline.json").write_text(baseline.read_text())  # saved among the reports: skipped, not a node
    code, again = fleet_json(capsys, small, "--baseline", baseline)
    assert again["summary"]["skipped"] == 1 and again["summary"]["nodes"] == 2 and code == ExitCode.NOT_READY


def test_a_failing_node_and_an_older_report_of_the_same_host(tmp_path, capsys):
    folder = write_fleet(tmp_path / "f", [node_report(f"n{i}", 800.0) for i in range(4)])
    failing = node_report("n1", 800.0, verdict="not_ready")
    failing["started_at"] = "2999-01-01T00:00:00+00:00"  # newer than n1.json: it replaces it
    (folder / "n1-rerun.json").write_text(json.dumps(failing))
    code, document = fleet_json(capsys, folder)
    assert code == ExitCode.NOT_READY
    assert [(row["host"], row["verdict"]) for row in document["nodes"]][0] == ("n1", "failing")
    assert document["superseded"] == [str(folder / "n1.json")]
    assert f"n1    failing (its own report)  its own report says not ready ({folder / 'n1-rerun.json'})" in \
        _console(document, "en")


def test_unreadable_files_are_named_and_the_rest_judged(tmp_path, capsys):
    folder = write_fleet(tmp_path / "r", [node_report(f"n{i:02d}", value) for i, value in enumerate(ELEVEN)])
    (folder / "corrupt.json").write_text('{"host": "x", "measurements": [')
    (folder / "other.json").write_text('{"results": {}}')
    code, document = fleet_json(capsys, folder, tmp_path / "missing")
    assert code == ExitCode.USAGE  # 2 (unreadable input) wins over 1 (an outlier), DESIGN.md §2
    assert document["summary"]["outlier"] == 1 and document["summary"]["unreadable"] == 3
    assert {Path(item["file"]).name: item["reason_text"]["message_id"] for item in document["unreadable"]} == {
        "corrupt.json": "fleet.unreadable.not_json", "other.json": "fleet.unreadable.not_report",
        "missing": "fleet.unreadable.missing"}
    console = _console(document, "en")
    assert "3 file(s) could not be read and are not judged:" in console and "corrupt.json (not JSON:" in console


def test_no_usable_report_is_one_sentence_and_exit_2(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("[1, 2")
    assert cli.main(["fleet", str(tmp_path / "bad.json"), str(tmp_path / "nothing")]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("gpuready: no report to judge: 2 file(s) could not be read: ")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["--lang", "zh", "fleet", str(empty)]) == ExitCode.USAGE
    assert capsys.readouterr().err == "gpuready: 没有可判断的报告：给出的路径下没有 .json 报告（跳过了 0 份 fleet 自己的文档）\n"


@pytest.mark.parametrize("text", ['{"format": "gpuready.fleet-baseline", "cohorts": [{"key": null, "measurements": '
                                  '{"x": {"name": "x", "subject": "gpu", "median": 1, "mad": -1, "n": 3}}}]}',
                                  "not json", '{"cohorts": []}'])
def test_a_bad_baseline_is_one_sentence(tmp_path, capsys, text):
    write_fleet(tmp_path / "r", [node_report("a", 800.0)])
    (tmp_path / "b.json").write_text(text)
    assert cli.main(["fleet", str(tmp_path / "r"), "--baseline", str(tmp_path / "b.json")]) == ExitCode.USAGE
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"gpuready: --baseline {tmp_path / 'b.json'} cannot be used: ")


def _console(document: dict, lang: str, width: int = 160) -> str:
    output = io.StringIO()
    render_fleet(document, lang, verbose=True, console=Console(file=output, width=width), plain=True)
    return output.getvalue()


def test_the_console_puts_outliers_first_and_counts_the_healthy(tmp_path, capsys):
    folder = write_fleet(tmp_path / "c", [node_report(f"node{i:02d}", value) for i, value in enumerate(ELEVEN)])
    _code, document = fleet_json(capsys, folder)
    english = _console(document, "en")
    assert english.startswith("Fleet: 11 node(s) in 1 cohort(s): 1 outlier(s), 0 failing their own report, 0 not "
                              "judged, 10 healthy.\nCohort 1: 1 x H200 SXM, driver 580.159.04: 11 node(s).\n")
    assert ("\nnode09  outlier  matmul_tflops_bf16 (GPU 0): 700.0 TFLOP/s, 12.4% worse than the cohort's median 799.0 "
            "TFLOP/s; 88% of the expected 791.2 TFLOP/s\n\n10 healthy node(s).\n") in english
    assert "node00" not in english and "matmul_tflops_bf16  higher  799.0 TFLOP/s  3.0 TFLOP/s     11" in english
    chinese = _console(document, "zh")
    assert chinese.startswith("集群：11 个节点，分为 1 组：1 个离群，0 个自身报告未通过，0 个无法判断，10 个正常。\n")
    assert ("\nnode09  离群     matmul_tflops_bf16（GPU 0）：700.0 TFLOP/s，比组内中位数 799.0 TFLOP/s 差 12.4%；只有预期值 "
            "791.2 TFLOP/s 的 88%\n") in chinese and "\n10 个节点正常。\n" in chinese


def test_the_console_of_a_hostile_document_escapes_and_does_not_crash():
    output = io.StringIO()
    render_fleet({"summary": {"nodes": "x"}, "cohorts": [{"key": {"gpu_model": "H200\x1b[2J", "gpu_count": "8"}}],
                  "nodes": [{"host": "\x1b]0;owned\x07", "verdict": "outlier",
                             "outliers": [{"name": 3, "rules": ["fleet"], "value": "?", "unit": "us\x9b"}]}],
                  "unreadable": [{"file": "f\x1bc", "reason_text": {"message_id": "nope"}}]},
                 console=Console(file=output, width=80), plain=True)
    shown = output.getvalue()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", shown), shown
    assert all(escaped in shown for escaped in ("\\x1b]0;owned\\x07", "H200\\x1b[2J", "f\\x1bc", "us\\x9b"))


# --- reading: one file at a time, large files streamed ----------------------------------------------------------

@pytest.mark.parametrize("path", RECORDED, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_streaming_reads_every_recorded_document_as_the_whole_read_does(path, monkeypatch):
    try:
        whole = read.read_report(path)
    except read.Unreadable as unreadable:  # rank results, nvml.json ...: not reports, either way
        monkeypatch.setattr(stream, "CHUNK_CHARS", 7)
        with pytest.raises(read.Unreadable) as streamed:
            read.read_report(path, whole_file_bytes=0)
        assert streamed.value.why.msg_id == unreadable.why.msg_id
        return
    monkeypatch.setattr(stream, "CHUNK_CHARS", 7)  # every value crosses chunk boundaries
    assert read.read_report(path, whole_file_bytes=0) == whole


def test_the_validate_report_keeps_its_judged_figures():
    document = read.read_report(FIXTURES / "h200-shared-gpu" / "validate-foreign-loop.json")
    assert document.host == "vm" and document.verb == "validate" and document.verdict == "not_ready"
    assert document.cohort == read.Cohort(gpu_model="H200 SXM", gpu_count=1, driver_version="580.159.04")
    assert document.figures[("matmul_tflops_bf16", "gpu")].value == 315.527  # recorded under a foreign GEMM loop
    assert document.figures[("all_reduce_latency_us", "host")].sense == -1
    assert ("burn_power_w", "gpu") not in document.figures


@pytest.mark.parametrize("text", ['{"host": "a", "series": [[[[', '["not", "an", "object"]', '{"a": 1} trailing',
                                  '{"host": "a\\', '{"facts": ' + "[" * 50_000 + "]" * 50_000 + "}", '{"a" 1}',
                                  '{"measurements": [1, 2,]}', ""])
def test_a_broken_large_file_is_unreadable_not_a_crash(tmp_path, text):
    path = tmp_path / "big.json"
    path.write_text(text)
    for whole_file_bytes in (0, read.WHOLE_FILE_BYTES):
        with pytest.raises(read.Unreadable):
            read.read_report(path, whole_file_bytes=whole_file_bytes)


def test_skipped_members_are_not_held(tmp_path):
    """A report whose telemetry holds brackets, quotes and escapes inside strings is skipped correctly."""
    document = node_report("h", 800.0)
    document["series"] = [{"metric": 'a "quoted" ] } [ { \\ name', "values": [[1, {"x": "]"}]] * 1000}]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    assert read.read_report(path, whole_file_bytes=0) == read.read_report(path)


# --- one engine writes the reports, fleet reads them ------------------------------------------------------------

@pytest.mark.parametrize("kind, extra", [("slurm", []), ("k8s", ["--image", "img:1"]), ("torchrun", [])])
def test_launch_validate_writes_one_report_per_host_into_the_folder_fleet_reads(capsys, kind, extra):
    assert cli.main(["launch", kind, "--nnodes", "4", "--nproc-per-node", "8", "--reports", "/shared/fleet", *extra,
                     "--", "validate"]) == ExitCode.READY
    script = capsys.readouterr().out
    # one <node>.json per node (the YAML escapes the quotes): `gpuready fleet /shared/fleet` reads them all; under
    # Slurm the node is its NodeName (what scontrol takes back), elsewhere its host name
    node = r'\$\{SLURMD_NODENAME:-\$\(hostname\)\}' if kind == "slurm" else r'\$\(hostname\)'
    assert re.search(r'--json --out /shared/fleet/\\?"' + node + r'\\?"\.json', script), script


def test_a_baseline_path_that_cannot_take_a_file_is_refused_before_any_report_is_read(tmp_path, capsys):
    folder = write_fleet(tmp_path / "r", [node_report(f"n{i}", 800.0) for i in range(3)])
    assert cli.main(["fleet", str(folder), "--json", "--save-baseline", str(tmp_path)]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"gpuready: --save-baseline {tmp_path} is a folder; give a file name\n"
    assert cli.main(["fleet", str(folder), "--save-baseline", str(tmp_path / "no" / "b.json")]) == ExitCode.USAGE
    assert capsys.readouterr().err == (f"gpuready: --save-baseline {tmp_path / 'no' / 'b.json'}: the folder "
                                       f"{tmp_path / 'no'} does not exist (gpuready does not create it)\n")


def test_a_baseline_that_cannot_be_written_still_gives_the_judgement(tmp_path, capsys, monkeypatch):
    """The disk fills between the check and the write: the judgement is printed, then the sentence, exit 2."""
    import errno
    folder = write_fleet(tmp_path / "r", [node_report(f"n{i}", 800.0) for i in range(3)])

    def full_disk(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(Path, "write_text", full_disk)
    code = cli.main(["fleet", str(folder), "--json", "--save-baseline", str(tmp_path / "b.json")])
    captured = capsys.readouterr()
    assert code == ExitCode.USAGE and json.loads(captured.out)["summary"]["healthy"] == 3
    assert captured.err == f"gpuready: --save-baseline {tmp_path / 'b.json'}: cannot write it (No space left on device)\n"


def test_html_goes_through_the_report_package(tmp_path, capsys, monkeypatch):
    """--html hands the fleet document to gpuready.report.html.render_fleet_html (another module's page, replaced
    here by a recorder); `--html -` puts the page alone on stdout; a gpuready without the module says so in one
    sentence and exits 3, the judgement still given."""
    import sys
    import types
    rendered = []

    def render_fleet_html(document, lang):
        rendered.append((document["summary"]["nodes"], lang))
        return "<html>fleet</html>"
    page = types.ModuleType("gpuready.report.html")
    page.render_fleet_html = render_fleet_html
    monkeypatch.setitem(sys.modules, "gpuready.report.html", page)
    folder = write_fleet(tmp_path / "r", [node_report(f"n{i}", 800.0) for i in range(2)])
    assert cli.main(["fleet", str(folder), "--html", str(tmp_path / "f.html"), "--lang", "zh"]) == ExitCode.READY
    assert rendered == [(2, "zh")] and (tmp_path / "f.html").read_text() == "<html>fleet</html>"
    capsys.readouterr()
    assert cli.main(["fleet", str(folder), "--html", "-"]) == ExitCode.READY
    assert capsys.readouterr().out == "<html>fleet</html>"
    assert cli.main(["fleet", str(folder), "--html", "-", "--json"]) == ExitCode.USAGE
    assert capsys.readouterr().err == "gpuready: --json and --html - both write to stdout; send one of them to a file\n"
    monkeypatch.setitem(sys.modules, "gpuready.report.html", None)  # `import` raises ImportError
    assert cli.main(["fleet", str(folder), "--html", str(tmp_path / "f.html")]) == ExitCode.TOOL_ERROR
    captured = capsys.readouterr()
    assert captured.err == ("gpuready: --html: this gpuready has no HTML report (gpuready.report.html); the other "
                            "reports are complete\n") and "Fleet: 2" in captured.out


def test_a_value_over_the_limit_is_refused_not_held(tmp_path, monkeypatch):
    document = node_report("h", 800.0)
    document["measurements"][0]["samples"] = [800.0] * 10_000
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    monkeypatch.setattr(stream, "MAX_VALUE_CHARS", 4096)
    monkeypatch.setattr(stream, "CHUNK_CHARS", 1024)
    with pytest.raises(read.Unreadable, match="a value longer than"):
        read.read_report(path, whole_file_bytes=0)


def test_no_english_sentence_is_left_in_the_chinese_console(tmp_path, capsys):
    """Every kind of line (outliers by each rule, a failing node, a node its report could not judge, an unknown and a
    weak cohort, unreadable and superseded files) in Chinese: no run of four English words outside names and quotes."""
    from test_no_english_left import ENGLISH_RUN
    documents = [node_report(f"n{i:02d}", value, latency_us=20.0 + (i == 0) * 10) for i, value in enumerate(ELEVEN)]
    documents[1]["verdict"] = "not_ready"
    documents[2]["verdict"] = "unknown"
    folder = write_fleet(tmp_path / "r", documents)
    (folder / "n03-old.json").write_text(json.dumps(dict(documents[3], started_at="1999-01-01T00:00:00+00:00")))
    (folder / "bad.json").write_text("{")
    burn = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
    (folder / "burner.json").write_text(json.dumps(dict(burn, host="burner")))
    _code, document = fleet_json(capsys, folder)
    assert {row["verdict"] for row in document["nodes"]} == {"failing", "outlier", "unknown", "healthy"}
    chinese = _console(document, "zh", width=400).replace(str(tmp_path), "")
    for item in document["unreadable"]:
        chinese = chinese.replace(item["reason_text"]["message_values"].get("error", "\0"), "")
    for column in ("node", "verdict", "what", "spread.0", "spread.1", "spread.2", "spread.4"):  # a Chinese header's
        chinese = chinese.replace(message(f"fleet.column.{column}", "en"), "")  # English line, by the labels' convention
    assert ENGLISH_RUN.findall(chinese) == []
    assert "未知" in chinese and "只有 1 个节点" in chinese and "1 个文件无法读取" in chinese


@pytest.mark.parametrize(("name", "unit", "sense"), [
    ("all_reduce_busbw_gb_per_s", "gb_per_s", 1),  # bandwidth: more is faster
    ("matmul_tflops_bf16", "tflops", 1),
    ("p2p_latency_us", "us", -1),  # latency: less is faster
    ("exposed_communication_share", "fraction", -1),  # a share, but of time the step waits
    ("step_time_seconds", "seconds", -1),
    ("peak_memory_allocated_bytes", "bytes", 0),  # the workload's, not the node's speed
    ("power_w_median", "watts", 0),
    ("something_new", "furlongs", 0),
])
def test_which_way_a_figure_is_better(name, unit, sense):
    from gpuready.verbs.fleet.read import direction
    assert direction(name, unit) == sense


def test_a_recorded_burn_report_names_its_cohort(tmp_path, capsys):
    """`gpuready burn --duration 20s` on the H200 (tests/fixtures/h200-burn/burn-20s-facts.json) carries the
    machine's GPUs and driver, so the fleet groups it by GPU model, count and driver, not as `unknown`."""
    import shutil
    shutil.copy(FIXTURES / "h200-burn" / "burn-20s-facts.json", tmp_path / "node.json")
    code, document = fleet_json(capsys, tmp_path)
    assert code == ExitCode.READY
    assert [cohort["key"] for cohort in document["cohorts"]] == [
        {"gpu_model": "H200 SXM", "gpu_count": 1, "driver_version": "580.159.04"}]
