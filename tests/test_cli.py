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
    """The recorded H200 (tests/fixtures/h200-shared/README.md): MemTotal 131,961,788 kB = 125.9 GiB of RAM against
    143,771 MiB = 140.4 GiB of VRAM, 131,961,788 / (143,771 × 1,024) = 0.90×, below the README's 1.5× rule: one
    warning and nothing worse, so the verdict is ready_with_warnings and the exit 0, or 1 with --fail-on warn (the
    verdict itself unchanged)."""
    for extra, code in (((), 0), (("--fail-on", "warn"), 1)):
        result = gpuready("check", "--bundle", str(SHARED_H200), "--json", *extra)
        document = json.loads(result.stdout)
        assert (result.returncode, document["exit_code"], document["verdict"]) == (code, code, "ready_with_warnings")
        problems = [(f["check_id"], f["status"], f["observed"], f["expected"]) for f in document["findings"]
                    if f["status"] not in ("pass", "skip")]
        assert problems == [("host.memory_ratio", "warn", "126 GiB system RAM / 140 GiB VRAM = 0.90×", ">= 1.5×")]


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
    """README (collect): a bundle holds the tools' raw outputs with nvml.json and manifest.json; with --redact "the
    files still parse and `check` gives the same verdict", the host named `host-<hash8>`. So `check --bundle` on it
    says what `check` says on this machine, finding for finding, but for network.port, which only a live run can
    judge (it probes the rendezvous port). On a machine without an NVIDIA driver (CI) that is: not ready, exit 1."""
    import re
    result = gpuready("collect", "--out", str(tmp_path / "bundle"), "--fast", "--redact")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["format"] == "gpuready-bundle" and "nvidia-smi-q.xml" in manifest["files"]
    for name, entry in manifest["files"].items():  # each file is there, or the manifest says why not
        assert (tmp_path / "bundle" / name).is_file() if entry["collected"] else entry["error"], name
    bundle = json.loads(gpuready("check", "--bundle", str(tmp_path / "bundle"), "--json").stdout)
    live = json.loads(gpuready("check", "--fast", "--json").stdout)
    assert (bundle["verdict"], bundle["exit_code"]) == (live["verdict"], live["exit_code"])
    judged = lambda document: {(f["check_id"], f["status"]) for f in document["findings"]  # noqa: E731
                               if f["check_id"] != "network.port"}
    assert judged(bundle) == judged(live)
    assert [(f["status"], f["message"]) for f in bundle["findings"] if f["check_id"] == "network.port"] == [
        ("skip", "Not judged: needs rendezvous_port_free (gpuready check), which this run does not have.")]
    assert re.fullmatch(r"host-[0-9a-f]{8}", bundle["host"]) and bundle["host"] == manifest["host"] != live["host"]
    if ("gpu.present", "fail") in judged(live):
        assert (bundle["verdict"], bundle["exit_code"]) == ("not_ready", 1)
