"""The command line end to end: exit codes, one-sentence errors, JSON against the schema."""

import json
import os
import subprocess
import sys
import tarfile
from importlib import resources

import pytest

jsonschema = pytest.importorskip("jsonschema")  # in the [test] extra; absent on some GPU hosts

from conftest import FIXTURES, PUBLIC, SHARED_H200

SCHEMA = json.loads(resources.files("gpuready").joinpath("schema/report.schema.json").read_text())


def gpuready(*args, env=None):
    return subprocess.run([sys.executable, "-m", "gpuready", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_bundle_json_matches_schema_and_exit_code():
    result = gpuready("check", "--bundle", str(SHARED_H200), "--json")
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    assert document["verdict"] == "ready_with_warnings" and result.returncode == 0 == document["exit_code"]
    assert result.stderr == ""


def test_fail_on_warn():
    assert gpuready("check", "--bundle", str(SHARED_H200), "--fail-on", "warn", "--json").returncode == 1


def test_no_verb_means_check_and_console_output():
    result = gpuready("--bundle", str(FIXTURES / "h200-collect"), "--lang", "zh")
    assert result.returncode == 0 and "就绪但有警告" in result.stdout and "host.memory_ratio" in result.stdout


def test_machine_without_gpu_says_so(tmp_path):
    """As in CI: no driver. gpu.present fails, exit 1, no traceback."""
    result = gpuready("check", "--fast", "--json", "--out", str(tmp_path / "r.json"),
                      env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""})
    if result.returncode == 0:
        pytest.skip("this machine has an NVIDIA GPU")
    document = json.loads(result.stdout)
    jsonschema.validate(document, SCHEMA)
    present = [f for f in document["findings"] if f["check_id"] == "gpu.present"]
    assert present[0]["status"] == "fail" and "No NVIDIA GPU or driver" in present[0]["message"]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == 1


def test_wrong_option_is_one_sentence_exit_2():
    result = gpuready("check", "--no-such-option")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    result = gpuready("check", "--expect-gpus", "-3", "--bundle", str(SHARED_H200))
    assert result.returncode == 2 and "from 1 to" in result.stderr


def test_missing_bundle_exit_2():
    result = gpuready("check", "--bundle", "/nonexistent/bundle")
    assert result.returncode == 2 and "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_corrupt_file_is_an_error_finding_the_rest_still_checked(tmp_path):
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "nvidia-smi-q.xml").write_text((SHARED_H200 / "nvidia-smi-q.xml").read_text()[:5000])
    (bundle / "dmesg.txt").write_text((PUBLIC / "xid" / "xid48-63-94-dmesg.txt").read_text())
    (bundle / "meminfo.txt").write_text((SHARED_H200 / "meminfo.txt").read_text())
    result = gpuready("check", "--bundle", str(bundle), "--json", "--out", str(tmp_path / "report.json"))
    document = json.loads(result.stdout)
    errors = [f for f in document["findings"] if f["status"] == "error"]
    assert [f["observed"] for f in errors] == ["nvidia-smi-q.xml"] and "could not be parsed" in errors[0]["message"]
    assert any(f["check_id"] == "health.xid" and f["status"] == "fail" for f in document["findings"])
    assert result.returncode == 2 and (tmp_path / "report.json").exists()


def test_bundle_as_tar_and_single_file_bundles(tmp_path):
    archive = tmp_path / "b.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIXTURES / "h200-collect", arcname="h200-collect")
    assert json.loads(gpuready("check", "--bundle", str(archive), "--json").stdout)["verdict"] == "ready_with_warnings"
    for name, source in (("nvidia-smi-q.txt", SHARED_H200 / "nvidia-smi-q.txt"),
                         ("nvidia-smi-topo.txt", SHARED_H200 / "nvidia-smi-topo.txt"),
                         ("dmesg.txt", SHARED_H200 / "dmesg.txt")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / name).write_text(source.read_text())
        document = json.loads(gpuready("check", "--bundle", str(folder), "--json").stdout)
        assert not [f for f in document["findings"] if f["status"] == "error"], name


def test_collect_writes_a_readable_bundle(tmp_path):
    result = gpuready("collect", "--out", str(tmp_path / "bundle"), "--fast", "--redact")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["format"] == "gpuready-bundle" and "nvidia-smi-q.xml" in manifest["files"]
    again = gpuready("check", "--bundle", str(tmp_path / "bundle"), "--json")
    assert json.loads(again.stdout)["exit_code"] in (0, 1)
