"""diagnose: `dcgmi diag` tables (dcgm.diag_failed / dcgm.diag_error / dcgm.diag_passed) and Kubernetes GPU nodes and
device-plugin logs (k8s.gpu_not_advertised) on published outputs (tests/fixtures/diagnose/dcgm, .../k8s), negative
cases and linear-time checks on hostile input."""

from __future__ import annotations

import time
from pathlib import Path

from gpuready.facts import dcgm_diag, k8s_node
from gpuready.model import Status
from gpuready.verbs.diagnose.run import diagnose
from helpers import findings, of, only

FIXTURES = Path(__file__).parent / "fixtures" / "diagnose"
DCGM, K8S = FIXTURES / "dcgm", FIXTURES / "k8s"


def line_numbers(finding):
    return [e.line for e in finding.evidence]


# ------------------------------------------------------------------ dcgmi diag


def test_failed_test_names_gpu_and_reassembles_the_reason():
    failed = only(findings(DCGM / "diag_r2_faulty_gpu0_ml_engineering.txt"), "dcgm.diag_failed")
    assert failed.status is Status.FAIL and failed.subject.gpu.index == 0
    assert (failed.observed["test"], failed.observed["gpus"]) == ("GPU Memory", [0])
    assert failed.observed["reasons"] == [
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0 Verify that "
        "the cooling on this machine is functional, including external, thermal material interface, fans, and any "
        "other components."]
    assert "cooling" not in failed.fix or "fans" in failed.fix
    assert line_numbers(failed) == [1, 2, 3, 4, 5]


def test_deployment_error_row_is_a_failure_of_that_gpu():
    failed = only(findings(DCGM / "diag_row_remap_error_ml_engineering.txt"), "dcgm.diag_failed")
    assert failed.subject.gpu.index == 3 and failed.observed["section"] == "Deployment"
    assert failed.observed["reasons"] == ["GPU 3 has uncorrectable memory errors and row remappings are pending"]
    assert "ROW_REMAPPER" in failed.fix and "RMA" in failed.fix


def test_internal_error_is_a_diag_error_not_a_gpu_failure():
    found = findings(DCGM / "diag_internal_error_dcgm4_dcgm_253.txt")
    error = only(found, "dcgm.diag_error")
    assert error.status is Status.SKIP and error.subject.gpu is None  # the GPUs were not tested: no finding
    assert (error.observed["test"], error.observed["section"]) == ("pcie", "Integration")
    assert error.observed["dcgm_version"] == "4.2.3" and len(error.observed["reasons"]) == 4
    assert error.observed["reasons"][2].startswith("There was an internal error during the test: 'Output of child "
                                                   "process (152) couldn't be parsed:")
    assert of(found, "dcgm.diag_failed") == [] and of(found, "dcgm.diag_passed") == []
    assert "--exclusive" in error.fix


def test_targeted_power_failure_and_info_rows_are_not_failures():
    found = findings(DCGM / "diag_targeted_power_fail_sagemaker.txt")
    failed = only(found, "dcgm.diag_failed")
    assert (failed.observed["test"], failed.observed["section"], failed.observed["gpus"]) == \
        ("Targeted Power", "Stress", [1])
    assert failed.observed["reasons"] == [
        "GPU 1 Max power of 224.1 did not reach desired power minimum target_power_min_ratio of 224.2 for GPU 1 Verify "
        "that the clock speeds and GPU utilization are high."]
    assert (failed.observed["dcgm_version"], failed.observed["driver_version"]) == ("3.3.9", "570.195.03")
    assert line_numbers(failed) == [26, 27, 28, 29, 30]  # the result rows and the warning, not the Info rows
    assert of(found, "dcgm.diag_error") == [] and of(found, "dcgm.diag_passed") == []


def test_all_pass_old_and_new_formats():
    old = only(findings(DCGM / "diag_r2_pass_p4de_awsome.txt"), "dcgm.diag_passed")
    assert old.status is Status.PASS and len(old.observed["passed"]) == 11
    assert old.observed["dcgm_version"] == ["3.3.3"]
    new = only(findings(DCGM / "diag_r2_pass_dcgm4_dcgm_124.txt"), "dcgm.diag_passed")
    assert new.observed["passed"] == ["memory", "pcie", "software"] and new.observed["dcgm_version"] == ["4.4.2"]


def test_healthy_run_with_info_and_skip_rows_passes(tmp_path):
    text = (DCGM / "diag_targeted_power_fail_sagemaker.txt").read_text()
    healthy = text.replace("| Targeted Power            | Pass - GPUs: 0, 2, 3                           |\n"
                           "|                           | Fail - GPU: 1                                  |\n",
                           "| Targeted Power            | Pass - All                                     |\n")
    start = healthy.index("| Warning ")
    healthy = healthy[:start] + healthy[healthy.index("| Info "):]
    path = tmp_path / "healthy.txt"
    path.write_text(healthy)
    found = findings(path)
    passed = only(found, "dcgm.diag_passed")
    assert passed.observed["skipped"] == ["EUD Test"] and "Targeted Power" in passed.observed["passed"]
    assert of(found, "dcgm.diag_failed") == [] and of(found, "dcgm.diag_error") == []


def test_a_failed_run_beside_a_passed_one_reports_only_the_failure():
    found = findings(DCGM / "diag_r2_pass_p4de_awsome.txt", DCGM / "diag_targeted_power_fail_sagemaker.txt")
    assert len(of(found, "dcgm.diag_failed")) == 1 and of(found, "dcgm.diag_passed") == []


def test_diagnostic_that_could_not_run(tmp_path):
    path = tmp_path / "dcgmi.txt"
    path.write_text("Error: Unable to complete diagnostic for group 0. Return: (-3) Invalid parameter.\n")
    error = only(findings(path), "dcgm.diag_error")
    assert error.status is Status.WARN and "Unable to complete diagnostic" in error.message


def test_markdown_tables_are_not_dcgm(tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("| Setting                   | Value |\n|---------------------------|-------|\n"
                    "| NCCL_PROTO                | simple |\n")
    assert of(findings(path), "dcgm.diag_passed") == [] and of(findings(path), "dcgm.diag_failed") == []


# ------------------------------------------------------------------ Kubernetes


def test_allocatable_zero_with_capacity_means_unhealthy_gpus():
    node = only(findings(K8S / "allocatable_zero_k8s_device_plugin_58.yaml"), "k8s.gpu_not_advertised")
    assert node.status is Status.FAIL
    assert (node.observed["capacity"], node.observed["allocatable"]) == (16, 0)
    assert "unhealthy" in node.message and "device plugin" in node.fix
    assert line_numbers(node)[0] == 7


def test_mig_mixed_strategy_gpu_zero_is_not_a_fault():
    node = only(findings(K8S / "mig_mixed_gpu_zero_cocalc_8161.txt"), "k8s.gpu_not_advertised")
    assert node.status is Status.PASS
    assert node.observed["mig"] == {"nvidia.com/mig-1g.5gb": 5, "nvidia.com/mig-2g.10gb": 1}


def test_no_gpu_resource_without_a_gpu_label_says_nothing():
    assert of(findings(K8S / "no_gpu_resource_unlabelled_k8s_device_plugin_285.txt"), "k8s.gpu_not_advertised") == []
    assert of(findings(K8S / "labelled_gpu_node_no_capacity_gpu_operator_442.txt"), "k8s.gpu_not_advertised") == []


def _describe(labels: str, capacity: str) -> str:
    """A `kubectl describe node` built from the published shapes: gpu-operator#442's labels, k8s-device-plugin#285's
    Capacity / Allocatable block."""
    block = "\n".join(line for line in (K8S / "no_gpu_resource_unlabelled_k8s_device_plugin_285.txt").read_text()
                      .splitlines())
    block = block.replace("  pods:               110\n", capacity + "  pods:               110\n")
    return ("Name:               gpu-node-a30\nRoles:              <none>\nLabels:             "
            "beta.kubernetes.io/arch=amd64\n" + labels + block + "\n")


def test_labelled_gpu_node_without_nvidia_gpu(tmp_path):
    labels = "".join(line + "\n" for line in (K8S / "labelled_gpu_node_no_capacity_gpu_operator_442.txt").read_text()
                     .splitlines()[:9])
    path = tmp_path / "describe.txt"
    path.write_text(_describe(labels, ""))
    node = only(findings(path), "k8s.gpu_not_advertised")
    assert node.status is Status.FAIL and node.subject.host == "gpu-node-a30"
    assert node.observed["label"] == "nvidia.com/gpu.present=true, NVIDIA-A30"
    assert "no nvidia.com/gpu" in node.message and "runtimeClassName: nvidia" in node.fix


def test_gpu_zero_in_capacity_and_healthy_node(tmp_path):
    zero = tmp_path / "zero.txt"
    zero.write_text(_describe("                    nvidia.com/gpu.present=true\n", "  nvidia.com/gpu:     0\n"))
    node = only(findings(zero), "k8s.gpu_not_advertised")
    assert node.status is Status.FAIL and node.observed["capacity"] == 0
    assert "nvidia-ctk runtime configure" in node.fix
    healthy = tmp_path / "healthy.txt"
    healthy.write_text(_describe("                    nvidia.com/gpu.present=true\n", "  nvidia.com/gpu:     8\n"))
    ok = only(findings(healthy), "k8s.gpu_not_advertised")
    assert ok.status is Status.PASS and ok.observed["allocatable"] == 8


def test_fewer_allocatable_than_capacity_fails(tmp_path):
    path = tmp_path / "node.txt"
    path.write_text("Capacity:\n  cpu:                96\n  nvidia.com/gpu:     8\n  pods:               110\n"
                    "Allocatable:\n  cpu:                96\n  nvidia.com/gpu:     7\n  pods:               110\n"
                    "System Info:\n")
    node = only(findings(path), "k8s.gpu_not_advertised")
    assert node.status is Status.FAIL and (node.observed["capacity"], node.observed["allocatable"]) == (8, 7)
    assert "marks 1 unhealthy" in node.message


def test_grepped_describe_without_block_headers_still_shows_zero_gpus(tmp_path):
    """`kubectl describe nodes | grep nvidia.com/gpu` keeps no `Capacity:` header: the `nvidia.com/gpu:  0` lines are
    the Capacity and Allocatable rows in describe's order, once per node. Shape published in
    open-edge-platform/geti_v2#1501 (a label, two zero rows, the Allocated-resources row); two nodes here."""
    path = tmp_path / "grep-gpu.txt"
    node = ("                    nvidia.com/gpu=true\n  nvidia.com/gpu:     0\n  nvidia.com/gpu:     0\n"
            "  nvidia.com/gpu     0              0\n")
    path.write_text(node * 2)
    nodes = of(findings(path), "k8s.gpu_not_advertised")
    assert [(n.status, n.observed["capacity"], n.observed["allocatable"]) for n in nodes] == \
        [(Status.FAIL, 0, 0), (Status.FAIL, 0, 0)]
    healthy = tmp_path / "grep-gpu-8.txt"
    healthy.write_text("  nvidia.com/gpu:     8\n  nvidia.com/gpu:     8\n  nvidia.com/gpu     2              2\n")
    assert only(findings(healthy), "k8s.gpu_not_advertised").status is Status.PASS
    labels_only = tmp_path / "labels.txt"  # a label line is no resource
    labels_only.write_text("                    nvidia.com/gpu.count=8\n                    nvidia.com/gpu=true\n")
    assert of(findings(labels_only), "k8s.gpu_not_advertised") == []


def test_device_plugin_without_nvml():
    old = only(findings(K8S / "plugin_nvml_not_loaded_k8s_device_plugin_303.log"), "k8s.gpu_not_advertised")
    assert old.status is Status.FAIL and old.observed["kinds"] == ["nvml_missing"]
    assert line_numbers(old) == [3]
    for fix in ("nvidia-ctk runtime configure --runtime=containerd", "runtimeClassName: nvidia", "rollout restart"):
        assert fix in old.fix
    new = only(findings(K8S / "plugin_incompatible_strategy_k8s_device_plugin_1220.log"), "k8s.gpu_not_advertised")
    assert new.observed["kinds"] == ["incompatible", "invalid_strategy"] and line_numbers(new) == [2, 7]
    eks = only(findings(K8S / "plugin_non_nvml_platform_eks_ami_1744.log"), "k8s.gpu_not_advertised")
    assert eks.observed["kinds"] == ["incompatible", "nvml_missing"]
    assert "libnvidia-ml.so.1" in eks.message


# ------------------------------------------------------------------ linear time on hostile input


def test_parsers_are_linear_on_200_kb_of_one_marker():
    hostile = ["|" + " " * 27 + "|" * 200_000, "| " + "x" * 25 + " |" * 100_000, "-----  A" * 25_000,
               "+-----" + " " * 200_000, "Fail - GPU: " + "1, " * 66_000, "nvidia.com/" * 18_000,
               "  nvidia.com/gpu:" + " " * 200_000 + "x", "Capacity:" + " " * 200_000,
               "Failed to initialize NVML" + " " * 200_000, "Incompatible strategy detected " * 7_000]
    for text in hostile:
        for parse in (dcgm_diag.parse_line, k8s_node.parse_node_line, k8s_node.parse_plugin_error,
                      dcgm_diag.is_result):
            start = time.perf_counter()
            parse(text)
            assert time.perf_counter() - start < 0.2, (parse.__name__, text[:40])


def test_diagnose_on_200_kb_of_one_repeated_marker(tmp_path):
    rows = ("|                           | Fail - GPU: 0                                  |\n" * 2_700,
            "| Warning                   | GPU 0 x                                        |\n" * 2_700,
            "-----  Hardware  " * 12_000, "nvidia.com/gpu: 0\n" * 12_000, "Capacity:\n" * 21_000,
            "No devices found. Waiting indefinitely\n" * 5_300)
    for index, text in enumerate(rows):
        path = tmp_path / f"hostile-{index}.txt"
        path.write_text(text)
        assert path.stat().st_size >= 200_000
        start = time.perf_counter()
        diagnose([path])
        assert time.perf_counter() - start < 1.0, text[:40]
