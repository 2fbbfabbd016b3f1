"""Commands in fix texts run as printed (issue 32): a fix shown for several GPUs at once names each GPU the way its
tool takes them: `lspci -s` one device per call (a loop), `nvidia-smi -i 0,1` and `dcgmi diag -i 0,1` their own
lists, `nvidia-smi nvlink -i` one GPU per call. Every catalogue fix whose command names a device is rendered for two
GPUs, in English and Chinese, and each command is checked for its grammar and with `bash -n`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuready.i18n import catalogue, message, placeholders
from gpuready.report.document import read_finding
from gpuready.report.gpu_groups import group_rows
from helpers import findings, only

DCGM = Path(__file__).parent / "fixtures" / "diagnose" / "dcgm"
BUS = {0: "0000:19:00.0", 1: "0000:3b:00.0"}
CODE = re.compile(r"`([^`\n]*)`")
GPU_NAMES = {"index", "gpu", "address", "port", "select"}
"""Placeholders that name a GPU or its PCIe device in the check_pcie, check_health, check_nvlink, check_power and
diagnose_dcgm fixes (a TCP `port` elsewhere)."""
OTHER_VALUES = {"default_w": 700.0, "port": 29500, "peer": "node2", "host": "node1", "address": "10.0.0.2",
                "nic": "ib0", "index_url": "https://download.pytorch.org/whl/cu128", "arch": "sm_90", "cuda": "12.8",
                "driver": "", "port_option": " --port 29500", "verb": "burn", "advice": "Start rank 0 first",
                "device": "0000:17:00.0"}  # network.nic_kernel names the NIC by its PCI address (mlx5_core lines)


def device_fixes() -> list[tuple[str, str]]:
    """(language, id) of every fix whose command (a code span) has a placeholder."""
    found = []
    for lang in ("en", "zh"):
        for msg_id, text in catalogue(lang).items():
            if msg_id.endswith(".fix") and any(placeholders(span) for span in CODE.findall(text)):
                found.append((lang, msg_id))
    return sorted(found)


def names_a_gpu(msg_id: str) -> bool:
    return msg_id.split(".")[0] in ("pcie", "health", "nvlink", "power", "dcgm")


def values_for(msg_id: str, text: str, index: int) -> dict:
    values = {name: OTHER_VALUES.get(name, "x") for name in placeholders(text)}
    if names_a_gpu(msg_id):
        bus = BUS[index]
        values.update(index=index, address=bus, port=bus,
                      gpu=str(index) if msg_id.startswith("dcgm") else f"GPU{index} ({bus})",
                      select=f" -i {index}" if msg_id.startswith("dcgm") else f" -s {bus}")
    return values


def shown_for_two_gpus(lang: str, msg_id: str) -> str:
    """The fix as the views show one finding on GPU0 and GPU1 (one row, gpu_groups); DCGM names the GPUs that failed
    a test in one finding (test_a_dcgm_failure_on_two_gpus_reruns_both)."""
    text = catalogue(lang)[msg_id]
    if msg_id.startswith("dcgm"):
        return message(msg_id, lang, **{**values_for(msg_id, text, 0), "gpu": "0,1", "select": " -i 0,1"})
    items = [{"check_id": msg_id.rsplit(".", 2)[0], "status": "warn",
              "subject": {"host": "n1", "gpu": {"index": i, "bus_id": BUS[i]}},
              "message": f"GPU{i} ({BUS[i]}) is unwell.", "fix": message(msg_id, lang, **values_for(msg_id, text, i))}
             for i in (0, 1)]
    rows = group_rows([read_finding(item) for item in items])
    assert len(rows) == 1, "two findings that differ only in their GPU are one row"
    return rows[0].fix()


def assert_runs_as_printed(fix: str) -> None:
    for command in CODE.findall(fix):
        for part in re.split(r";|&&|\|\||\||\bdo\b", command):
            if re.match(r"\s*(?:sudo )?(?:lspci|setpci)\b", part):
                devices = re.findall(r"(?<!\S)-s +([^\s;]+)", part)
                assert len(devices) == 1 and not re.search(r"(?<!\S)-s +\S+,", part), part
                assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]|\$d", devices[0]), part
            if re.match(r"\s*(?:sudo )?(?:nvidia-smi|dcgmi)\b", part):
                for listed in re.findall(r"(?<!\S)-i +([^\s;]+)", part):
                    assert re.fullmatch(r"\d+|\$d|\d+(?:,\d+)+", listed), (part, listed)
                    if "," in listed:  # their own list syntax; `nvidia-smi nvlink -i` takes one GPU
                        assert re.match(r"\s*(?:sudo )?(?:nvidia-smi -|dcgmi diag )", part), part
        if shutil.which("bash"):
            parsed = subprocess.run(["bash", "-n"], input=command, text=True, capture_output=True, check=False)
            assert parsed.returncode == 0, (command, parsed.stderr)


def test_the_catalogue_has_the_fixes_the_issue_names():
    ids = {msg_id for _, msg_id in device_fixes()}
    assert {"pcie.aer.device_both.fix", "pcie.aer.gpu_corrected.fix", "health.row_remap_pending.log_pending.fix",
            "nvlink.link_down.flagged.fix", "dcgm.diag_failed.memory.fix"} <= ids
    assert {lang for lang, _ in device_fixes()} == {"en", "zh"}


@pytest.mark.parametrize(("lang", "msg_id"), [pair for pair in device_fixes() if names_a_gpu(pair[1])])
def test_a_fix_for_two_gpus_names_each_the_way_its_tool_takes_it(lang, msg_id):
    fix = shown_for_two_gpus(lang, msg_id)
    assert_runs_as_printed(fix)
    commands = " ".join(CODE.findall(fix))
    assert "0000:19:00.0, 0000:3b:00.0" not in commands  # the issue's `lspci -vv -s 0000:01:00.0, 0000:02:00.0`
    if "lspci" in commands:
        assert "0000:19:00.0" in commands and "0000:3b:00.0" in commands


@pytest.mark.parametrize(("lang", "msg_id"), [pair for pair in device_fixes() if not names_a_gpu(pair[1])])
def test_other_fix_commands_parse(lang, msg_id):
    text = catalogue(lang)[msg_id]
    assert_runs_as_printed(message(msg_id, lang, **values_for(msg_id, text, 0)))


def test_the_issue_example_becomes_a_loop_over_both_devices():
    fix = shown_for_two_gpus("en", "pcie.aer.gpu_corrected.fix")
    assert "`for d in 0000:19:00.0 0000:3b:00.0; do sudo lspci -vv -s $d; done`" in fix


def test_nvidia_smi_takes_its_own_list_and_nvlink_one_gpu_a_call():
    fix = shown_for_two_gpus("en", "nvlink.link_down.flagged.fix")
    assert "`for d in 0 1; do nvidia-smi nvlink -s -i $d; done`" in fix
    assert "`nvidia-smi -r -i 0,1`" in fix
    assert "`sudo nvidia-smi -q -d ECC,ROW_REMAPPER -i 0,1`" not in fix  # not this fix's command
    in_chinese = shown_for_two_gpus("zh", "health.ecc_uncorrected.log_current.fix")
    assert "`nvidia-smi -q -d ECC,ROW_REMAPPER -i 0,1`" in in_chinese


def test_a_dcgm_failure_on_two_gpus_reruns_both(tmp_path):
    """A recorded `dcgmi diag` table (SageMaker, Targeted Power failing on GPU 1) with GPU 2 failing too."""
    table = (DCGM / "diag_targeted_power_fail_sagemaker.txt").read_text()
    assert "| Targeted Power            | Pass - GPUs: 0, 2, 3" in table
    edited = table.replace("Pass - GPUs: 0, 2, 3 ", "Pass - GPUs: 0, 3    ")
    edited = edited.replace("Fail - GPU: 1 ", "Fail - GPUs: 1, 2")
    path = tmp_path / "dcgm.txt"
    path.write_text(edited)
    failed = only(findings(path), "dcgm.diag_failed")
    assert failed.observed["gpus"] == [1, 2]
    assert "`dcgmi diag -r 3 -i 1,2`" in failed.fix and "<gpu>" not in failed.fix
    assert_runs_as_printed(failed.fix)


def test_a_default_power_limit_is_read_per_gpu():
    """`-pl` takes one figure: the reference-limit fix reads each GPU's default in a loop, never `-pl <default>`."""
    fix = shown_for_two_gpus("en", "power.limit.below_reference.fix")
    assert ('`for d in 0 1; do sudo nvidia-smi -i $d -pl "$(nvidia-smi -i $d --query-gpu=power.default_limit '
            '--format=csv,noheader,nounits)"; done`') in fix
