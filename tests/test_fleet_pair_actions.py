"""`fleet --actions` acting on the pair tests between nodes (issue 34): a node named bad by validate --between-nodes
(slow with every peer) is an outlier and is drained at drain_replace (knowledge/remediation.toml network.node_slow);
a bad link names two nodes and drains neither (a `#` line says which link to check); a newer between-nodes run in
which the node is not bad resumes it, but never undoes a drain for another cause (an Xid in the node's own report).

The pair reports are validate --between-nodes documents as rank 0 writes them (tests/test_between_nodes.py
`pair_report`), each figure of a pair where one node or the link is bad 3 GB/s, else 10 GB/s; the Xid report is
real `diagnose` output of a published kernel log (tests/test_fleet_actions.py)."""

from __future__ import annotations

import json
from pathlib import Path

from gpuready.cli import main as cli
from gpuready.estimate.pair_tests import ring_rounds
from test_between_nodes import measure, names, pair_report
from test_fleet_actions import T1, T2, T3, XID79_LOG, node_report

NODE_SLOW_N5 = ('scontrol update NodeName=n5 State=DRAIN Reason="gpuready: network.node_slow: n5 is slow with every peer '
                'it was tested with (n4 3, n6 3 GB/s): its NIC, cable, switch port or host (drain_replace, run {run} '
                '{when})"')


def ring_run(folder: Path, name: str, started_at: str, bad_nodes=(), bad_links=(), count: int = 8) -> Path:
    """A between-nodes report of `count` nodes n0… (written by n0) whose ring found `bad_nodes` / `bad_links`; its
    own findings as validate writes them on GPUs: n0's report not_ready with the bad node's fail at drain_replace."""
    rounds = [(kind, list(zip(pairs, measure(pairs, bad_nodes, bad_links))))
              for kind, pairs in zip(("ring", "ring_shifted"), ring_rounds(names(count)))]
    path = pair_report(folder / f"{name}.json", rounds)
    document = json.loads(path.read_text())
    document.update(started_at=started_at, verdict="not_ready" if bad_nodes else "ready",
                    findings=[{"check_id": "network.node_slow", "status": "fail", "remediation": "drain_replace",
                               "subject": {"host": node}, "message": f"Node {node} is slow"} for node in bad_nodes])
    path.write_text(json.dumps(document))
    return path


def actions(capsys, *paths, scheduler: str = "slurm") -> tuple[int, list[str], str]:
    code = cli.main(["fleet", *map(str, paths), "--actions", scheduler])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def test_a_bad_node_of_the_pairs_is_an_outlier_and_drained(tmp_path, capsys):
    run = ring_run(tmp_path, "r1", T1, bad_nodes=["n5"])
    code, out, _ = actions(capsys, run)
    # n5 alone: n0, whose report carries the finding about n5, is not drained for it
    assert (code, out) == (1, [NODE_SLOW_N5.format(run="r1", when=T1)])
    cli.main(["fleet", str(run), "--json"])
    rows = {row["host"]: row for row in json.loads(capsys.readouterr().out)["nodes"]}
    assert rows["n5"]["verdict"] == "outlier" and [p["nodes"] for p in rows["n5"]["between_nodes"]] == [
        ["n4", "n5"], ["n5", "n6"]]
    assert rows["n0"]["between_nodes"] is None and set(rows) == {"n0", "n5"}
    code, out, _ = actions(capsys, run, scheduler="k8s")
    assert out == ["kubectl taint nodes n5 gpuready.io/health=pending-replacement:NoSchedule --overwrite",
                   "kubectl cordon n5"]


def test_a_newer_run_where_it_passes_resumes_it(tmp_path, capsys):
    drained = ring_run(tmp_path, "r1", T1, bad_nodes=["n5"])
    clean = ring_run(tmp_path, "r2", T2)
    assert actions(capsys, drained, clean)[1] == ["scontrol update NodeName=n5 State=RESUME"]
    # the newest run names it again: drained by that run
    again = ring_run(tmp_path, "r3", T3, bad_nodes=["n5"])
    assert actions(capsys, drained, clean, again)[1] == [NODE_SLOW_N5.format(run="r3", when=T3)]
    # an older clean run resumes nothing
    assert actions(capsys, ring_run(tmp_path, "r0", "2026-11-30T08:00:00+00:00"), drained)[1] == [
        NODE_SLOW_N5.format(run="r1", when=T1)]


def test_a_clean_pair_run_does_not_undo_an_xid_drain(tmp_path, capsys):
    cli.main(["diagnose", str(XID79_LOG), "--json"])
    xid79 = json.loads(capsys.readouterr().out)
    xid_report = node_report(xid79, tmp_path, "n3", T1, "x1")
    code, out, _ = actions(capsys, xid_report, ring_run(tmp_path, "r2", T2))
    assert [line.split(" Reason=")[0] for line in out] == ["scontrol update NodeName=n3 State=DRAIN"]
    # its own clean report resumes it
    cli.main(["check", "--bundle", str(Path(__file__).parent / "fixtures" / "h200-collect"), "--json"])
    clean = node_report(json.loads(capsys.readouterr().out), tmp_path, "n3", T3, "c1")
    assert actions(capsys, xid_report, ring_run(tmp_path, "r2", T2), clean)[1] == [
        "scontrol update NodeName=n3 State=RESUME"]


def test_a_bad_link_drains_neither_node_and_says_which_link(tmp_path, capsys):
    run = ring_run(tmp_path, "r1", T1, bad_links=[("n3", "n4")])
    code, out, err = actions(capsys, run)
    assert out == ["# link n3 ↔ n4 is slow (3 GB/s against 10 GB/s) while both nodes pass with other peers: check "
                   "the cable and switch ports between them; neither node is drained"]
    assert code == 1 and "no node to drain or resume" in err
    code = cli.main(["fleet", str(run), "--actions", "slurm", "--lang", "zh"])
    assert capsys.readouterr().out.startswith("# 链路 n3 ↔ n4 偏慢（3 GB/s，参考值 10 GB/s）")
