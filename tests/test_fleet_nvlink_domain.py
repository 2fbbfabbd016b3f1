"""`fleet` checks one NVLink domain across nodes (issue 33): the cluster UUID and clique id each GB200 tray's GPUs
registered in, compared between the nodes launched together (verbs/fleet/nvlink_domain.py states the rule).

Every node's report is a real `check --bundle … --json` report of a bundle holding a recorded `nvidia-smi -q`: the
Fabric blocks of leptonai/gpud#1106 (a healthy GB200: clique 4026 of cluster 9c6f5af3-…) and Azure/azhpc-images#506
(clique 0, a zero cluster UUID), changed per node only in the clique or UUID, the way a mis-registered tray prints
them; the H200 nodes are the recorded bundle tests/fixtures/h200-collect under other host names.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.model import ExitCode
from gpuready.report.fleet_markdown import fleet_markdown
from gpuready.report.fleet_view import fleet_view
from gpuready.report.html import render_fleet_html
from gpuready.verbs.fleet.view import render_fleet
from test_mnnvl_fabric import AZURE_BLOCK, GPUD_BLOCK, _smi_q

CLUSTER = "9c6f5af3-53bf-49b5-a436-b66766c413c3"
OTHER_RACK = "5b0e1c2d-0000-4a1b-9c3d-112233445566"


def _check_report(folder: Path, host: str, smi_q: str, capsys) -> dict:
    """`gpuready check --bundle` of a bundle of one `nvidia-smi -q` paste and the host's manifest."""
    bundle = folder / f"bundle-{host}"
    bundle.mkdir()
    (bundle / "nvidia-smi-q.txt").write_text(smi_q)
    (bundle / "manifest.json").write_text(json.dumps({"host": host}))
    cli.main(["check", "--bundle", str(bundle), "--json"])
    return json.loads(capsys.readouterr().out)


def _tray(clique: int = 4026, uuid: str = CLUSTER, block: str = GPUD_BLOCK, odd_gpu: str | None = None) -> str:
    """A 4-GPU GB200 tray's paste: gpud#1106's block with this clique and UUID (`odd_gpu`: the last GPU's block)."""
    fabric = block.replace("4026", str(clique)).replace(CLUSTER, uuid)
    paste = _smi_q("NVIDIA GB200", fabric, gpus=4)
    if odd_gpu is not None:
        head, _sep, _last = paste.rpartition("GPU 00000008:04:00.0")
        paste = head + "GPU 00000008:04:00.0\n    Product Name                          : NVIDIA GB200\n" + odd_gpu
    return paste


def _fleet(tmp_path: Path, capsys, pastes: list[str]) -> tuple[int, dict]:
    """`gpuready fleet --json` over the check reports of these pastes (one node each), in a folder of its own."""
    work = tmp_path / f"fleet-{len(list(tmp_path.iterdir()))}"
    reports = work / "reports"
    reports.mkdir(parents=True)
    for number, paste in enumerate(pastes):
        host = f"gb200-tray-{number}"
        (reports / f"{host}.json").write_text(json.dumps(_check_report(work, host, paste, capsys)))
    code = cli.main(["fleet", str(reports), "--json"])
    return code, json.loads(capsys.readouterr().out)


def _named(document: dict) -> dict[str, dict]:
    return {row["host"]: row["nvlink_domain"] for row in document["nodes"] if row["nvlink_domain"]}


def test_the_check_report_keeps_each_gpus_cluster_and_clique(tmp_path, capsys):
    report = _check_report(tmp_path, "gb200-tray-0", _tray(), capsys)
    assert [(gpu["fabric_cluster_uuid"], gpu["fabric_clique_id"]) for gpu in report["facts"]["gpus"]] == \
        [(CLUSTER, 4026)] * 4


def test_four_trays_of_one_clique_are_one_domain_and_nothing_is_named(tmp_path, capsys):
    code, document = _fleet(tmp_path, capsys, [_tray()] * 4)
    assert code == ExitCode.READY
    assert document["nvlink_domains"] == [{"cluster_uuid": CLUSTER, "clique_id": 4026, "nodes": 4}]
    assert _named(document) == {}
    assert document["summary"]["healthy"] == 4


def test_one_tray_of_four_in_another_clique_is_named_with_the_majoritys(tmp_path, capsys):
    code, document = _fleet(tmp_path, capsys, [_tray(), _tray(), _tray(clique=4031), _tray()])
    assert code == ExitCode.NOT_READY
    assert _named(document) == {"gb200-tray-2": {
        "kind": "clique", "cluster_uuid": CLUSTER, "clique_id": 4031,
        "majority": {"cluster_uuid": CLUSTER, "clique_id": 4026, "nodes": 3}}}
    row = next(row for row in document["nodes"] if row["host"] == "gb200-tray-2")
    assert row["verdict"] == "outlier" and row["report_verdict"] == "ready"  # its own check cannot see it
    for lang in ("en", "zh"):
        view = fleet_view(document, lang)
        assert [node.host for node in view.problems] == ["gb200-tray-2"]
        line = view.problems[0].lines[0]
        assert "4031" in line and "4026" in line and CLUSTER in line
    assert "clique 4031 in cluster" in fleet_markdown(document, "en")
    assert "clique 4031 in cluster" in render_fleet_html(document, "en")
    console = Console(record=True, width=300, file=io.StringIO())
    render_fleet(document, "en", console=console)
    shown = console.export_text()
    assert f"NVLink domain: cluster {CLUSTER}, clique 4026: 3 node(s)." in shown and "clique 4031 in cluster" in shown


def test_a_tray_that_never_registered_is_named_beside_its_registered_peers(tmp_path, capsys):
    # Azure/azhpc-images#506: Insufficient Resources, clique 0, a zero UUID; its own check fails nvlink.fabric_clique
    code, document = _fleet(tmp_path, capsys, [_tray(), _tray(), _tray(), _smi_q("NVIDIA GB200", AZURE_BLOCK, gpus=4)])
    assert code == ExitCode.NOT_READY
    assert _named(document) == {"gb200-tray-3": {
        "kind": "unregistered", "cluster_uuid": "00000000-0000-0000-0000-000000000000", "clique_id": 0,
        "majority": {"cluster_uuid": CLUSTER, "clique_id": 4026, "nodes": 3}}}
    assert document["nvlink_domains"] == [{"cluster_uuid": CLUSTER, "clique_id": 4026, "nodes": 3}]


def test_two_racks_of_two_trays_are_two_domains_but_a_lone_cluster_is_named(tmp_path, capsys):
    code, document = _fleet(tmp_path, capsys, [_tray(), _tray(), _tray(uuid=OTHER_RACK), _tray(uuid=OTHER_RACK)])
    assert code == ExitCode.READY and _named(document) == {}
    assert [domain["nodes"] for domain in document["nvlink_domains"]] == [2, 2]
    code, document = _fleet(tmp_path, capsys, [_tray(), _tray(uuid=OTHER_RACK), _tray(), _tray()])
    assert code == ExitCode.NOT_READY
    assert _named(document) == {"gb200-tray-1": {
        "kind": "cluster", "cluster_uuid": OTHER_RACK, "clique_id": 4026,
        "majority": {"cluster_uuid": CLUSTER, "clique_id": 4026, "nodes": 3}}}


def test_a_tray_whose_gpus_disagree_and_an_even_split_are_named(tmp_path, capsys):
    odd = GPUD_BLOCK.replace("4026", "4031")
    code, document = _fleet(tmp_path, capsys, [_tray(), _tray(), _tray(odd_gpu=odd)])
    assert code == ExitCode.NOT_READY
    mixed = _named(document)["gb200-tray-2"]
    assert mixed["kind"] == "mixed" and mixed["gpus"] == [
        {"cluster_uuid": CLUSTER, "clique_id": 4026, "gpus": [0, 1, 2]},
        {"cluster_uuid": CLUSTER, "clique_id": 4031, "gpus": [3]}]
    assert list(_named(document)) == ["gb200-tray-2"]
    code, document = _fleet(tmp_path, capsys, [_tray(), _tray(), _tray(clique=4031), _tray(clique=4031)])
    assert code == ExitCode.NOT_READY
    named = _named(document)
    assert sorted(named) == [f"gb200-tray-{number}" for number in range(4)]
    assert {entry["kind"] for entry in named.values()} == {"clique_split"}
    assert named["gb200-tray-0"]["cliques"] == [{"clique_id": 4026, "nodes": 2}, {"clique_id": 4031, "nodes": 2}]


@pytest.mark.parametrize("hgx", ["h200-collect", "h100-zero-uuid"])
def test_hgx_nodes_form_no_domain(tmp_path, capsys, hgx):
    reports = tmp_path / "reports"
    reports.mkdir()
    for number in range(3):
        host = f"hgx-{number}"
        if hgx == "h200-collect":
            bundle = tmp_path / host
            shutil.copytree(FIXTURES / "h200-collect", bundle)
            manifest = json.loads((bundle / "manifest.json").read_text())
            (bundle / "manifest.json").write_text(json.dumps({**manifest, "host": host}))
            cli.main(["check", "--bundle", str(bundle), "--json"])
            report = json.loads(capsys.readouterr().out)
        else:  # meta-pytorch/torchcomms#1385: an H100 reports a completed state with clique 0 and a zero UUID
            block = AZURE_BLOCK.replace("Insufficient Resources", "Success")
            report = _check_report(tmp_path, host, _smi_q("NVIDIA H100 80GB HBM3", block, gpus=8), capsys)
        (reports / f"{host}.json").write_text(json.dumps(report))
    cli.main(["fleet", str(reports), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert document["nvlink_domains"] == [] and _named(document) == {}
    assert "outlier" not in {row["verdict"] for row in document["nodes"]}
    assert fleet_view(document).domains == []
