"""Pair tests without an expected figure of their own (no RDMA NIC in the facts: gloo, sockets) are held to the ring's
median, which cannot see a fault that slows half the ring (issue 34: 'where a baseline exists, from the per-SKU
baseline, never one global number'). `fleet --save-baseline` keeps a healthy run's ring figure per cohort; `fleet
--baseline` holds a later run of that cohort to it, and a run of another cohort is not held to it."""

import json

from gpuready.cli import main as cli
from gpuready.estimate.pair_tests import ring_rounds
from test_between_nodes import measure, names, pair_report

H100_FACTS = {"gpus": [{"model": "NVIDIA H100 80GB HBM3"}] * 8, "driver_version": "570.133.20"}


def run_report(path, bad_nodes=(), facts=H100_FACTS, started_at="2026-12-07T10:00:00+00:00"):
    rounds = [(kind, list(zip(pairs, measure(pairs, bad_nodes))))
              for kind, pairs in zip(("ring", "ring_shifted"), ring_rounds(names(4)))]
    pair_report(path, rounds)
    document = json.loads(path.read_text())
    document["facts"].update(facts)
    document["started_at"] = started_at
    path.write_text(json.dumps(document))
    return path


def fleet(capsys, *argv):
    code = cli.main(["fleet", *map(str, argv), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_a_healthy_run_is_saved_as_its_cohorts_pair_figure(tmp_path, capsys):
    healthy = run_report(tmp_path / "healthy.json")
    code, _document = fleet(capsys, healthy, "--save-baseline", tmp_path / "golden.json")
    saved = json.loads((tmp_path / "golden.json").read_text())
    (entry,) = [cohort for cohort in saved["cohorts"] if cohort["key"]]
    figure = entry["measurements"]["between_nodes_pair_gb_per_s"]
    assert (code, entry["key"]["gpu_model"], figure["median"], figure["n"]) == (0, "NVIDIA H100 80GB HBM3", 10.0, 4)
    assert entry["sources"] == [str(healthy)]


def test_half_the_ring_slow_is_seen_only_against_the_baseline(tmp_path, capsys):
    fleet(capsys, run_report(tmp_path / "healthy.json"), "--save-baseline", tmp_path / "golden.json")
    (tmp_path / "later").mkdir()
    slow_half = run_report(tmp_path / "later" / "run.json", bad_nodes=["n1", "n2"])
    _code, alone = fleet(capsys, slow_half)
    assert alone["between_nodes"]["basis"] == "median" and alone["between_nodes"]["undecided"] == []
    _code, judged = fleet(capsys, slow_half, "--baseline", tmp_path / "golden.json")
    pairs = judged["between_nodes"]
    assert (pairs["basis"], pairs["expected_gb_per_s"]) == ("expected", 10.0)
    assert sorted(tuple(item["nodes"]) for item in pairs["undecided"]) == [("n0", "n1"), ("n1", "n2"), ("n2", "n3")]


def test_another_cohort_is_not_held_to_the_baseline(tmp_path, capsys):
    fleet(capsys, run_report(tmp_path / "healthy.json"), "--save-baseline", tmp_path / "golden.json")
    (tmp_path / "a100").mkdir()
    other = run_report(tmp_path / "a100" / "run.json", bad_nodes=["n1", "n2"],
                       facts={"gpus": [{"model": "NVIDIA A100-SXM4-80GB"}] * 8, "driver_version": "570.133.20"})
    _code, judged = fleet(capsys, other, "--baseline", tmp_path / "golden.json")
    assert judged["between_nodes"]["basis"] == "median"
