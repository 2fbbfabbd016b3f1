"""`gpuready diagnose` end to end: several pasted files of one incident, a bundle, the exit codes, the schema."""

import json
import shutil
from pathlib import Path

import pytest

from gpuready.cli import main as cli

jsonschema = pytest.importorskip("jsonschema")
SCHEMA = json.loads((Path(cli.__file__).parents[1] / "schema" / "report.schema.json").read_text())
FIXTURES = Path(__file__).parent / "fixtures"


def _diagnose(capsys, *args):
    code = cli.main(["diagnose", *map(str, args), "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else None)


def test_one_incident_pasted_as_files_with_any_names(tmp_path, capsys):
    """The shm failure (NCCL log) and the watchdog timeout it leads to, named as people name them."""
    shutil.copy(FIXTURES / "diagnose" / "nccl" / "shm-ci-infra-490.log", tmp_path / "out")
    shutil.copy(FIXTURES / "diagnose" / "torch" / "watchdog_llamafactory_7396.log", tmp_path / "rank3.err")
    code, report = _diagnose(capsys, tmp_path / "out", tmp_path / "rank3.err")
    jsonschema.validate(report, SCHEMA)
    assert code == 1 and report["exit_code"] == 1
    first = report["findings"][0]
    assert (first["check_id"], first["status"]) == ("nccl.shm_too_small", "fail")
    assert first["evidence"][0]["file"].endswith("/out") and first["evidence"][0]["line"] >= 1
    assert "--shm-size" in first["fix"]
    ids = [f["check_id"] for f in report["findings"]]
    assert "nccl.timeout" in ids
    kinds = {Path(entry["file"]).name: entry["kind"] for entry in report["facts"]["diagnose"]["inputs"]}
    assert kinds == {"out": "log", "rank3.err": "log"}


def test_a_bundle_folder_feeds_the_checks_too(capsys):
    code, report = _diagnose(capsys, FIXTURES / "h200-docker-collect")
    jsonschema.validate(report, SCHEMA)
    # a healthy H200 bundle: no Xid, no NCCL error; the static checks' one warning (RAM below 1.5x VRAM) is kept
    assert [(f["check_id"], f["status"]) for f in report["findings"]] == [("host.memory_ratio", "warn")]
    assert code == 0 and report["facts"]["gpus"][0]["name"] == "NVIDIA H200"


def test_a_log_with_nothing_wrong_is_not_a_verdict_on_the_machine(tmp_path, capsys):
    (tmp_path / "train.log").write_text("step 1 loss 2.3\nstep 2 loss 2.2\n")
    code, report = _diagnose(capsys, tmp_path / "train.log")
    assert code == 2 and report["verdict"] == "unknown"  # a log alone does not show the GPUs, as in `check`
    assert report["not_enough_evidence"].startswith("Not enough evidence: the inputs hold no tool output")
    assert [f["check_id"] for f in report["findings"]] == ["diagnose.nothing_found"]


def test_bad_inputs_exit_2_with_one_sentence(tmp_path, capsys):
    assert cli.main(["diagnose", str(tmp_path / "missing.log")]) == 2
    assert capsys.readouterr().err.strip() == f"gpuready: {tmp_path / 'missing.log'}: no such file or folder"
    assert cli.main(["diagnose", "net"]) == 2
    assert "--peers" in capsys.readouterr().err
    assert cli.main(["diagnose", str(tmp_path), "--peers", "a"]) == 2
    assert cli.main(["diagnose", str(tmp_path), "--expect", "-3"]) == 2


RECORDED = FIXTURES / "diagnose" / "recorded"


def test_recorded_rank_killed_by_sigkill(capsys):
    code, report = _diagnose(capsys, RECORDED / "torchrun-sigkill.log")
    assert code == 1
    assert [(f["check_id"], f["subject"]["rank"], f["consequence_of"]) for f in report["findings"]] == [
        ("torch.rank_failed", 1, None), ("torch.ranks_terminated", None, "torch.rank_failed"),
        ("host.oom", None, None)]  # SIGKILL with no OOM-killer line: a warning to look at dmesg
    assert "SIGKILL" in report["findings"][0]["message"] and "OOM killer" in report["findings"][0]["message"]
    assert report["findings"][2]["status"] == "warn" and report["findings"][2]["observed"]["pids"] == [4949]


def test_recorded_hang_names_the_rank_that_did_not_join_not_the_one_that_waited(capsys):
    code, report = _diagnose(capsys, RECORDED / "torchrun-hang.log")
    assert code == 1
    assert [(f["check_id"], f["subject"]["rank"], f["consequence_of"]) for f in report["findings"]] == [
        ("gloo.timeout", 0, None), ("torch.rank_failed", 0, "gloo.timeout"),
        ("torch.ranks_terminated", None, "torch.rank_failed")]
    assert "The suspect is rank(s) 1" in report["findings"][0]["message"]
    assert report["findings"][0]["evidence"][0]["text"].endswith("Timed out waiting 10000ms for recv operation to complete")
