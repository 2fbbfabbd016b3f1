"""Tests that kill the mutants of checks/gpu.py that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh): GPUs present, lost and missing from the driver's view,
which GPUs a container was given, models alike, CUDA_VISIBLE_DEVICES, persistence/MIG/compute/ECC modes, busy GPUs
and ranks that share GPU 0.

Expected texts are the English catalogue's (src/gpuready/locale/en/LC_MESSAGES/check_gpu.po) filled in by hand; the
inputs are recordings (tests/fixtures/public, its README names each source) or GPUs written out here, with the
arithmetic in the docstring.
"""

from __future__ import annotations

import pytest

from conftest import PUBLIC
from gpuready.checks.gpu import allocation
from gpuready.checks.registry import CheckContext, CheckOptions, registered_in_order, run_checks
from gpuready.evidence.build import build_facts
from gpuready.facts.types import Facts, GpuFacts, GpuProcess, HostFacts, KernelEvent, PciDevice
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

NVIDIA_SMI_REF = "nvidia-smi(1) manual, https://docs.nvidia.com/deploy/nvidia-smi/index.html"
PERSISTENCE_DOC = "https://docs.nvidia.com/deploy/driver-persistence/index.html"
MIG_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
TOOLKIT_REF = ("NVIDIA Container Toolkit: NVIDIA_VISIBLE_DEVICES, "
               "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html")
SET_DEVICE_REF = ("PyTorch DistributedDataParallel docs: each process must use its own device, "
                  "`torch.cuda.set_device(local_rank)` before any CUDA call, "
                  "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html")
H100 = "NVIDIA H100 80GB HBM3"
BUS = ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0"]
"""The first four bus ids of public/dgx-h100-nvswitch/nvidia-smi.txt (8× H100, bus 18/2A/3A/5D/…)."""
UNUSABLE = "No NVIDIA GPU or driver is usable on this machine"


def _gpu(index: int, bus_id: str | None = "", *, source: str = "nvidia-smi.txt", name: str | None = H100,
         **fields) -> GpuFacts:
    return GpuFacts(index=index, bus_id=BUS[index] if bus_id == "" else bus_id, name=name, source=source, **fields)


def _all(facts: Facts, check_id: str, options: CheckOptions | None = None):
    return run_checks(facts, options, only=[check_id])


def _one(facts: Facts, check_id: str, options: CheckOptions | None = None):
    found = _all(facts, check_id, options)
    assert len(found) == 1, [(f.check_id, f.status.value, f.message) for f in found]
    return found[0]


def _recorded(folder: str, file: str, as_name: str):
    return build_facts({as_name: (PUBLIC / folder / file).read_text()})


# ------------------------------------------------------------------------------------------------ gpu.present

@pytest.mark.parametrize("error, cause, tail", [
    # nvmlErrorString(NVML_ERROR_DRIVER_NOT_LOADED) is "Driver Not Loaded" (nvml.h)
    ("Failed to initialize NVML: Driver Not Loaded", "not_loaded", "The NVIDIA kernel module is not loaded."),
    # nvmlErrorString(NVML_ERROR_LIBRARY_NOT_FOUND) is "NVML Shared Library Not Found": the library, not nvidia-smi
    ("NVML Shared Library Not Found", "no_library",
     "The NVIDIA driver's user-space library (libnvidia-ml.so) is not installed."),
    # bash's message for a command that is not on the PATH
    ("bash: nvidia-smi: command not found", "no_smi", "nvidia-smi is not installed."),
    # what nvidia-smi prints on a machine whose driver sees no GPU
    ("No devices were found", "no_devices", "The driver is loaded but sees no GPU."),
    ("Segmentation fault (core dumped)", "unknown", "The NVIDIA driver could not be asked about its GPUs."),
])
def test_a_failed_probe_names_its_cause_from_the_error(error, cause, tail):
    """The probe's error, matched without case: 'driver not loaded' → not_loaded, 'library not found' → no_library
    (before the shorter 'not found', which is nvidia-smi itself missing), 'no devices were found' → no_devices, any
    other → unknown. No GPU: observed 0, and '>= 1' expected where --expect-gpus was not given."""
    finding = _one(Facts(gpus=[], gpu_probe_error=error), "gpu.present")
    assert (finding.status, finding.message_id) == (Status.FAIL, f"gpu.present.unusable_{cause}")
    assert finding.message == f"{UNUSABLE} ({error}). {tail}"
    assert (finding.observed, finding.expected, finding.refs) == (0, ">= 1", [NVIDIA_SMI_REF])


def test_a_driver_that_sees_no_gpu_without_an_error_expects_the_count_asked_for():
    """gpus=[] and no probe error: gpu.present.no_gpu; with --expect-gpus 8 the expected value is 8, without it
    '>= 1'."""
    facts = Facts(gpus=[])
    finding = _one(facts, "gpu.present", CheckOptions(expect_gpus=8))
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.present.no_gpu")
    assert finding.message == f"{UNUSABLE}. The driver is loaded but sees no GPU."
    assert (finding.observed, finding.expected) == (0, 8)
    assert _one(facts, "gpu.present").expected == ">= 1"


def test_a_kernel_module_that_refused_the_libraries_fails_with_one_driver_version_expected():
    """An api_mismatch line (NVRM: API mismatch) and no GPU answering the driver: the refusal, with its detail."""
    line = ("NVRM: API mismatch: the client has the version 550.54.15, but NVRM: this kernel module has the version "
            "535.104.05.")
    event = KernelEvent(kind="api_mismatch", line=line, detail="client 550.54.15, kernel module 535.104.05")
    finding = _one(Facts(kernel_log=[event]), "gpu.present")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.present.refused")
    assert finding.message.startswith("The kernel module refused the NVIDIA libraries (client 550.54.15, kernel "
                                      "module 535.104.05): no GPU is usable until both are one version.")
    assert (finding.observed, finding.expected) == ("client 550.54.15, kernel module 535.104.05",
                                                    "one driver version")
    assert finding.refs == [NVIDIA_SMI_REF]


def test_the_pass_counts_each_model_and_an_unnamed_gpu_as_unknown():
    """Two H100 and one GPU without a name: '2× NVIDIA H100 80GB HBM3, 1× unknown', in the order first seen;
    driver 565.57.01 and CUDA 12.7 as public/dgx-h100-nvswitch/nvidia-smi.txt prints them."""
    facts = Facts(gpus=[_gpu(0), _gpu(1), _gpu(2, name=None)], driver_version="565.57.01",
                  cuda_driver_version="12.7")
    finding = _one(facts, "gpu.present")
    assert (finding.status, finding.message_id) == (Status.PASS, "gpu.present.pass")
    assert finding.message == ("3 GPU(s) visible: 2× NVIDIA H100 80GB HBM3, 1× unknown; driver 565.57.01, "
                               "CUDA 12.7.")


def test_the_pass_without_versions_says_question_marks():
    """public/gpu-err/nvidia-smi-device-handle-error.txt: nvidia-smi could not get the handle of the GPU at
    0000:91:00.0; no name, no driver or CUDA version printed: '1× unknown; driver ?, CUDA ?'."""
    finding = _one(_recorded("gpu-err", "nvidia-smi-device-handle-error.txt", "nvidia-smi.txt"), "gpu.present")
    assert finding.message == "1 GPU(s) visible: 1× unknown; driver ?, CUDA ?."


def test_fewer_gpus_than_expected_name_the_models_and_the_option():
    """2 H100 visible, --expect-gpus 8: '2 GPUs visible, 8 expected (2× NVIDIA H100 80GB HBM3).'"""
    finding = _one(Facts(gpus=[_gpu(0), _gpu(1)]), "gpu.present", CheckOptions(expect_gpus=8))
    assert (finding.status, finding.message) == (Status.FAIL, "2 GPUs visible, 8 expected (2× NVIDIA H100 80GB HBM3).")
    assert (finding.observed, finding.expected, finding.refs) == (2, 8, ["--expect-gpus"])


def test_a_capture_cut_short_warns_with_the_announced_count():
    """public/ecc-errors/nvidia-smi-q.xml: `Attached GPUs` 16, one GPU section kept."""
    finding = _one(_recorded("ecc-errors", "nvidia-smi-q.xml", "nvidia-smi-q.xml"), "gpu.present")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.present.cut_short")
    assert finding.message == ("The driver announces 16 GPUs but only 1 could be read: the capture may be cut short "
                               "or GPUs did not answer.")
    assert (finding.observed, finding.expected) == (1, 16)


@pytest.mark.parametrize("sources, named_by", [
    (["dmesg.txt"], "dmesg.txt"),
    (["nvidia-smi-nvlink-s.txt"], "nvidia-smi-nvlink-s.txt"),
    (["lspci-vv.txt", "dmesg.txt, lspci-vv.txt"], "dmesg.txt, lspci-vv.txt"),
])
def test_gpus_named_only_by_host_files_pass_naming_those_files(sources, named_by):
    """lspci, the kernel log, `topo -m` and `nvlink -s` name GPUs without asking the driver: the pass names the
    files, sorted and joined by ', '."""
    gpus = [_gpu(i, source=source) for i, source in enumerate(sources)]
    finding = _one(Facts(gpus=gpus), "gpu.present")
    assert finding.message_id == "gpu.present.pass_host_only"
    assert f"Named by {named_by} only: whether the driver can use them" in finding.message


def test_gpus_from_nvml_are_a_plain_pass():
    """nvml.json asks the driver: the plain pass, no 'Named by'."""
    finding = _one(Facts(gpus=[_gpu(0, source="nvml.json")], driver_version="570.86.15",
                         cuda_driver_version="12.8"), "gpu.present")
    assert (finding.message_id, finding.message) == (
        "gpu.present.pass", "1 GPU(s) visible: 1× NVIDIA H100 80GB HBM3; driver 570.86.15, CUDA 12.8.")


# --------------------------------------------------------------------------------------------------- gpu.lost

def test_a_lost_gpu_without_a_name_or_bus_id_is_named_by_its_index():
    """Lost, no error fields, no bus id: 'GPU at index 3 does not answer: reported as lost.', observed 'lost'."""
    finding = _one(Facts(gpus=[_gpu(3, None, name=None, lost=True)]), "gpu.lost")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.lost.lost")
    assert finding.message == "GPU at index 3 does not answer: reported as lost."
    assert (finding.observed, finding.expected, finding.refs) == ("lost", "readable", [NVIDIA_SMI_REF])


def test_a_lost_gpu_with_a_name_and_bus_id_is_named_so():
    finding = _one(Facts(gpus=[_gpu(1, lost=True)]), "gpu.lost")
    assert finding.message == "NVIDIA H100 80GB HBM3 at 0000:2a:00.0 does not answer: reported as lost."
    assert finding.subject.gpu.index == 1


def test_the_recorded_device_handle_error_names_the_field_and_the_bus():
    """public/gpu-err/nvidia-smi-device-handle-error.txt: 'Unable to determine the device handle for GPU
    0000:91:00.0: Unknown Error': the GPU, unnamed, fails with that field."""
    finding = _one(_recorded("gpu-err", "nvidia-smi-device-handle-error.txt", "nvidia-smi.txt"), "gpu.lost")
    assert (finding.status, finding.message) == (
        Status.FAIL, "GPU at 0000:91:00.0 does not answer: fields unreadable: Unknown Error.")
    assert finding.observed == ["Unknown Error"]


def test_a_lost_gpu_lists_its_unreadable_fields():
    finding = _one(Facts(gpus=[_gpu(0, lost=True, error_fields=["power.draw", "temperature.gpu"])]), "gpu.lost")
    assert finding.message == ("NVIDIA H100 80GB HBM3 at 0000:18:00.0 does not answer: fields unreadable: "
                               "power.draw, temperature.gpu.")
    assert (finding.observed, finding.expected) == (["power.draw", "temperature.gpu"], "readable")


def test_an_unreadable_field_of_a_gpu_that_answers_is_a_pass():
    """public/gpu-err/nvidia-smi.txt: one ERR! (the fan) on an RTX 4090 whose name nvidia-smi cut to
    'NVIDIA GeForce ...'."""
    finding = _one(_recorded("gpu-err", "nvidia-smi.txt", "nvidia-smi.txt"), "gpu.lost")
    assert (finding.status, finding.message_id) == (Status.PASS, "gpu.lost.transient")
    assert finding.message == ("NVIDIA GeForce ... at 0000:01:00.0: 1 field(s) unreadable (ERR!); the GPU still "
                               "answers, so this is noted, not failed.")


def test_a_transient_error_of_an_unnamed_gpu_names_its_fields():
    """An unnamed GPU that answers with one field unreadable: 'GPU at <bus>'. Two unreadable fields (fewer than
    the three that make plain nvidia-smi call a GPU lost) are counted and joined by ', '."""
    finding = _one(Facts(gpus=[_gpu(0, name=None, error_fields=["fan.speed"])]), "gpu.lost")
    assert (finding.status, finding.message) == (
        Status.PASS, "GPU at 0000:18:00.0: 1 field(s) unreadable (fan.speed); the GPU still answers, so this is "
                     "noted, not failed.")
    two = _one(Facts(gpus=[_gpu(0, error_fields=["fan.speed", "clocks.sm"])]), "gpu.lost")
    assert ": 2 field(s) unreadable (fan.speed, clocks.sm);" in two.message
    assert two.observed == ["fan.speed", "clocks.sm"]


def test_a_gpu_listed_only_by_nvidia_smi_L_is_not_asked():
    """`nvidia-smi -L` lists names and UUIDs; it does not say whether a GPU answers: not judged."""
    finding = _one(Facts(gpus=[_gpu(0, source="nvidia-smi-L.txt")]), "gpu.lost")
    assert (finding.status, finding.message_id) == (Status.SKIP, "gpu.lost.not_asked")


def _nvml_lost(bus_id: str | None, number: int) -> KernelEvent:
    where = f"GPU {bus_id}" if bus_id else "GPU"
    return KernelEvent(kind="gpu_lost", line=f"Unable to determine the device handle for {where}: GPU is lost "
                                             f"(line {number})", bus_id=bus_id)


def test_nvml_lost_lines_name_the_last_gpu_and_count_the_lines():
    """Three 'GPU is lost' lines, for 0000:18:00.0, an unnamed GPU, then 0000:3a:00.0; none of the three listed GPUs
    is lost in the listing. The finding names the last line's GPU (GPU2), counts 3 lines and quotes the last."""
    events = [_nvml_lost(BUS[0], 1), _nvml_lost(None, 2), _nvml_lost(BUS[2], 3)]
    finding = _one(Facts(gpus=[_gpu(0), _gpu(1), _gpu(2)], kernel_log=events), "gpu.lost")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.lost.nvml_bus")
    assert finding.message == ("NVML reports the GPU at 0000:3a:00.0 lost (3 line(s)): the driver can no longer "
                               "reach it, and jobs on it fail.")
    assert finding.subject.gpu.index == 2
    assert (finding.observed, finding.expected) == (events[2].line, "every GPU answers")


def test_one_nvml_lost_line_names_the_second_gpu():
    """One line, for 0000:2a:00.0 (GPU1 of two listed GPUs, neither lost in the listing)."""
    finding = _one(Facts(gpus=[_gpu(0), _gpu(1)], kernel_log=[_nvml_lost(BUS[1], 1)]), "gpu.lost")
    assert finding.message.startswith("NVML reports the GPU at 0000:2a:00.0 lost (1 line(s))")
    assert finding.subject.gpu.index == 1


def test_an_unnamed_nvml_lost_line_keeps_its_first_200_characters():
    """A line of 250 characters that names no GPU: the unnamed sentence; observed is its first 200 characters."""
    line = "NVML: GPU is lost. " + "x" * 231
    assert len(line) == 250
    event = KernelEvent(kind="gpu_lost", line=line)
    finding = _one(Facts(gpus=[_gpu(0)], kernel_log=[event]), "gpu.lost")
    assert finding.message == ("NVML reports a GPU (the line does not name it) lost (1 line(s)): the driver can no "
                               "longer reach it, and jobs on it fail.")
    assert finding.observed == line[:200] and len(finding.observed) == 200
    assert finding.subject.gpu is None


def test_an_nvml_lost_line_for_a_gpu_the_listing_shows_lost_is_not_said_twice():
    """GPU0 is lost in the listing and a line says so too: one failure, the listing's."""
    found = _all(Facts(gpus=[_gpu(0, lost=True), _gpu(1)], kernel_log=[_nvml_lost(BUS[0], 1)]), "gpu.lost")
    assert [f.message_id for f in found] == ["gpu.lost.lost"]


def _lspci(*addresses: str) -> list[PciDevice]:
    return [PciDevice(address=address, description="3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB]",
                      is_nvidia_gpu=True) for address in addresses]


def test_gpus_lspci_lists_and_the_driver_does_not_fail_on_bare_metal():
    """lspci: 0000:18, 2a, 3a, 5d; the driver names 0000:18 and 0000:2a: two missing."""
    facts = Facts(gpus=[_gpu(0), _gpu(1)], pci_devices=_lspci(*BUS))
    finding = _one(facts, "gpu.lost")
    assert (finding.status, finding.message) == (
        Status.FAIL, "lspci lists 2 NVIDIA GPU(s) the driver does not show: 0000:3a:00.0, 0000:5d:00.0.")
    assert (finding.observed, finding.expected, finding.refs) == (
        [BUS[2], BUS[3]], "every GPU visible to the driver", ["lspci -vv"])


def test_one_gpu_without_bus_id_forgives_one_missing_address():
    """The driver names one GPU by index only: it may be the one lspci lists, 1 missing ≤ 1 unnamed: nothing."""
    facts = Facts(gpus=[_gpu(0, None)], pci_devices=_lspci(BUS[0]))
    assert [(f.status, f.message_id) for f in _all(facts, "gpu.lost")] == [(Status.PASS, "registry.nothing_to_flag")]


def test_one_gpu_without_bus_id_does_not_forgive_two_missing_addresses():
    """The driver names 0000:18 and one GPU by index; lspci lists four: 3 missing (2a, 3a, 5d) > 1 unnamed."""
    facts = Facts(gpus=[_gpu(0), _gpu(1, None)], pci_devices=_lspci(*BUS))
    finding = _one(facts, "gpu.lost")
    assert finding.message == ("lspci lists 3 NVIDIA GPU(s) the driver does not show: 0000:2a:00.0, 0000:3a:00.0, "
                               "0000:5d:00.0.")


def test_two_named_gpus_and_one_unnamed_forgive_only_one_missing():
    """Named 0000:18 and 0000:2a plus one by index; lspci lists four: 2 missing (3a, 5d) > 1 unnamed: failed."""
    facts = Facts(gpus=[_gpu(0), _gpu(1), _gpu(2, None)], pci_devices=_lspci(*BUS))
    finding = _one(facts, "gpu.lost")
    assert finding.message == "lspci lists 2 NVIDIA GPU(s) the driver does not show: 0000:3a:00.0, 0000:5d:00.0."


def test_gpus_not_given_to_a_container_pass_naming_the_evidence():
    """A docker container (cgroup evidence, two lines) whose driver shows 0000:18: the three others lspci lists
    are the host's, not this container's; evidence joined by '; '."""
    host = HostFacts(container="docker", container_evidence=["/proc/1/cgroup: docker", "/.dockerenv exists"])
    facts = Facts(host=host, gpus=[_gpu(0)], pci_devices=_lspci(*BUS))
    finding = _one(facts, "gpu.lost")
    assert (finding.status, finding.message_id) == (Status.PASS, "gpu.lost.not_allocated")
    assert finding.message == ("3 GPU(s) of the host are not allocated to this container: 0000:2a:00.0, 0000:3a:00.0, "
                               "0000:5d:00.0 (lspci is not namespaced and lists the host's GPUs; the driver inside "
                               "shows the 1 allocated). Container: docker (/proc/1/cgroup: docker; /.dockerenv "
                               "exists).")
    assert finding.refs == ["lspci -vv", TOOLKIT_REF]


def test_gpus_missing_from_a_container_that_asks_for_all_warn():
    """`docker run --gpus all` sets NVIDIA_VISIBLE_DEVICES=all: every GPU of the host should be there; two lspci
    lists are not."""
    host = HostFacts(container="docker", container_evidence=["/.dockerenv exists"])
    facts = Facts(host=host, env={"NVIDIA_VISIBLE_DEVICES": "all"}, gpus=[_gpu(0), _gpu(1)], pci_devices=_lspci(*BUS))
    finding = _one(facts, "gpu.lost")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.lost.missing_in_container")
    assert finding.message.startswith("lspci lists 2 NVIDIA GPU(s) the driver does not show (0000:3a:00.0, "
                                      "0000:5d:00.0), although this docker container asks for all GPUs")
    assert finding.observed == {"missing": [BUS[2], BUS[3]], "container": "docker",
                                "evidence": ["/.dockerenv exists", "env NVIDIA_VISIBLE_DEVICES=all"]}
    assert (finding.expected, finding.refs) == ("every GPU of the host visible", ["lspci -vv"])


# ------------------------------------------------------------------------------------------------ allocation

def _allocation(facts: Facts):
    return allocation(CheckContext(facts=facts))


@pytest.mark.parametrize("runtime", ["docker", "podman", "containerd"])
def test_visible_devices_all_asks_for_every_gpu_of_the_host(runtime):
    """NVIDIA_VISIBLE_DEVICES=all in a docker, podman or containerd container (the NVIDIA Container Toolkit's value
    for `--gpus all`): not a partial allocation."""
    facts = Facts(host=HostFacts(container=runtime, container_evidence=[f"/proc/1/cgroup: {runtime}"]),
                  env={"NVIDIA_VISIBLE_DEVICES": "all"}, gpus=[_gpu(0)])
    allocated = _allocation(facts)
    assert (allocated.container, allocated.requests_all, allocated.partial) == (runtime, True, False)


def test_visible_devices_all_alone_is_a_container_that_asks_for_every_gpu():
    """No cgroup evidence, only NVIDIA_VISIBLE_DEVICES=all in the environment: the runtime is `container`."""
    allocated = _allocation(Facts(env={"NVIDIA_VISIBLE_DEVICES": "all"}, gpus=[_gpu(0)]))
    assert (allocated.container, allocated.requests_all, allocated.partial) == ("container", True, False)


def test_gpus_named_only_by_lspci_are_not_the_containers():
    """In docker, the driver names 0000:18; 0000:2a is known from lspci alone: it is outside the allocation."""
    facts = Facts(host=HostFacts(container="docker", container_evidence=["/.dockerenv exists"]),
                  gpus=[_gpu(0), _gpu(1, source="lspci-vv.txt")])
    allocated = _allocation(facts)
    assert allocated.bus_ids == frozenset({BUS[0]})
    assert (allocated.outside(BUS[0]), allocated.outside(BUS[1])) == (False, True)


def test_a_driver_named_gpu_without_bus_id_leaves_the_allocation_unknown():
    """`topo -m` names a GPU by index only: it could be any GPU, so no bus ids, no partial allocation."""
    facts = Facts(host=HostFacts(container="docker", container_evidence=["/.dockerenv exists"]),
                  gpus=[_gpu(0), _gpu(1, None, source="nvidia-smi-topo.txt")])
    allocated = _allocation(facts)
    assert (allocated.bus_ids, allocated.partial, allocated.outside(BUS[3])) == (None, False, False)


# ----------------------------------------------------------------------------------------- gpu.model_mismatch

def test_the_recorded_5090_and_3090_ti_differ_in_model_and_memory():
    """public/mixed-models/nvidia-smi.txt: GPU0 RTX 5090 (32607 MiB = 34,190,917,632 bytes), GPU1 RTX 3090 Ti
    (24564 MiB = 25,757,220,864 bytes): one each, so the first seen counts as the majority, GPU1 is the odd one."""
    found = _all(_recorded("mixed-models", "nvidia-smi.txt", "nvidia-smi.txt"), "gpu.model_mismatch")
    assert [(f.status, f.message) for f in found] == [
        (Status.WARN, "GPUs differ in models: 1× NVIDIA GeForce RTX 5090, 1× NVIDIA GeForce RTX 3090 Ti; odd one(s): "
                      "GPU1."),
        (Status.WARN, "GPUs differ in memory sizes: 1× 34190917632, 1× 25757220864; odd one(s): GPU1.")]
    assert found[1].observed == {"34190917632": 1, "25757220864": 1}
    assert found[1].expected == "all identical"


def test_the_odd_vbios_is_the_one_outside_the_majority_and_a_missing_one_is_not_odd():
    """Four GPUs: VBIOS 96.00.89.00.01 on GPU0 and GPU1, 96.00.74.00.0B on GPU2, none reported by GPU3.
    Values 2× 96.00.89.00.01, 1× 96.00.74.00.0B; the majority is 96.00.89.00.01, so GPU2 alone is odd (GPU3 has no
    value to compare)."""
    gpus = [_gpu(0, vbios="96.00.89.00.01"), _gpu(1, vbios="96.00.89.00.01"), _gpu(2, vbios="96.00.74.00.0B"),
            _gpu(3, vbios=None)]
    finding = _one(Facts(gpus=gpus), "gpu.model_mismatch")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.model_mismatch.vbios")
    assert finding.message == ("GPUs differ in VBIOS versions: 2× 96.00.89.00.01, 1× 96.00.74.00.0B; odd one(s): "
                               "GPU2.")


def test_the_odd_model_is_named_when_it_is_not_first():
    """H100, L4, H100, L4, H100: 3× H100, 2× L4 (in the order first seen); the majority is H100, odd GPU1, GPU3."""
    gpus = [_gpu(0), _gpu(1, name="NVIDIA L4"), _gpu(2), _gpu(3, name="NVIDIA L4"), _gpu(4, "0000:9a:00.0")]
    finding = _one(Facts(gpus=gpus), "gpu.model_mismatch")
    assert finding.message == "GPUs differ in models: 3× NVIDIA H100 80GB HBM3, 2× NVIDIA L4; odd one(s): GPU1, GPU3."
    assert finding.observed == {H100: 3, "NVIDIA L4": 2}


def test_gpus_alike_are_named_by_the_first():
    """GPU0 H100, GPU1 without a name: one model known, nothing differs; the pass names GPU0's model."""
    finding = _one(Facts(gpus=[_gpu(0), _gpu(1, name=None)]), "gpu.model_mismatch")
    assert (finding.status, finding.message) == (Status.PASS, "All 2 GPUs are alike: NVIDIA H100 80GB HBM3.")


# ---------------------------------------------------------------------------------------- gpu.visible_devices

def test_an_invalid_device_ordinal_warns_with_the_first_200_characters():
    line = "RuntimeError: CUDA error: invalid device ordinal " + "." * 201
    event = KernelEvent(kind="cuda_bad_ordinal", line=line)
    finding = _one(Facts(kernel_log=[event]), "gpu.visible_devices")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.visible_devices.bad_ordinal")
    assert finding.observed == line[:200] and len(finding.observed) == 200
    assert finding.expected == "one visible GPU per local rank"
    assert finding.refs == ["CUDA runtime: cudaErrorInvalidDevice"]


ORDER_NOTE = (" Note: CUDA_DEVICE_ORDER is not PCI_BUS_ID, so CUDA may number GPUs fastest-first, unlike "
              "nvidia-smi.")


@pytest.mark.parametrize("env, count, message", [
    ({}, 2, "CUDA_VISIBLE_DEVICES is not set: all GPUs are visible to CUDA." + ORDER_NOTE),
    ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, 2, "CUDA_VISIBLE_DEVICES is not set: all GPUs are visible to CUDA."),
    ({}, 1, "CUDA_VISIBLE_DEVICES is not set: all GPUs are visible to CUDA."),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2, "CUDA_VISIBLE_DEVICES=0,1 shows every GPU in order." + ORDER_NOTE),
    ({"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, 2,
     "CUDA_VISIBLE_DEVICES=0,1 shows every GPU in order."),
    ({"CUDA_VISIBLE_DEVICES": "0"}, 1, "CUDA_VISIBLE_DEVICES=0 shows every GPU in order."),
])
def test_an_order_other_than_pci_bus_id_is_noted_where_there_are_two_gpus(env, count, message):
    """CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA C Programming Guide, CUDA
    Environment Variables); with one GPU there is no order to differ."""
    finding = _one(Facts(env=env, gpus=[_gpu(i) for i in range(count)]), "gpu.visible_devices")
    assert (finding.status, finding.message) == (Status.PASS, message)


@pytest.mark.parametrize("visible", ["", "-1", "none", "NoDevFiles"])
def test_values_that_hide_every_gpu_fail(visible):
    """An empty list, -1, `none` and NoDevFiles leave CUDA no device."""
    finding = _one(Facts(env={"CUDA_VISIBLE_DEVICES": visible}, gpus=[_gpu(0), _gpu(1)]), "gpu.visible_devices")
    assert (finding.status, finding.message_id) == (Status.FAIL, "gpu.visible_devices.hides_all")
    assert finding.message == f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from CUDA."
    assert (finding.observed, finding.expected) == (visible, "unset or a list of GPUs")


def test_fewer_entries_than_gpus_hide_some():
    """'2' on a 4-GPU machine: 1 of 4 shown."""
    finding = _one(Facts(env={"CUDA_VISIBLE_DEVICES": "2"}, gpus=[_gpu(i) for i in range(4)]), "gpu.visible_devices")
    assert (finding.status, finding.message) == (Status.WARN, "CUDA_VISIBLE_DEVICES=2 shows 1 of 4 GPUs to CUDA.")
    assert (finding.observed, finding.expected) == ("2", "all 4 GPUs")


def test_a_descending_list_reorders():
    finding = _one(Facts(env={"CUDA_VISIBLE_DEVICES": "1,0"}, gpus=[_gpu(0), _gpu(1)]), "gpu.visible_devices")
    assert (finding.status, finding.message) == (Status.WARN,
                                                 "CUDA_VISIBLE_DEVICES=1,0 reorders the GPUs: cuda:0 is not GPU0.")
    assert finding.expected == "ascending order"


# ------------------------------------------------------------------------------------- gpu.persistence, mig …

def test_persistence_off_on_a_datacenter_gpu_warns():
    """public/mig/nvidia-smi-q.xml: an A100-SXM4-40GB with persistence mode Disabled."""
    finding = _one(_recorded("mig", "nvidia-smi-q.xml", "nvidia-smi-q.xml"), "gpu.persistence")
    assert (finding.status, finding.message) == (
        Status.WARN, "Persistence mode is off on GPU0: the driver unloads between jobs, adding seconds to each start "
                     "and losing settings.")
    assert (finding.observed, finding.expected, finding.refs) == ("Disabled", "Enabled", [PERSISTENCE_DOC])


def test_persistence_off_on_an_rtx_a6000_warns_as_on_a_server():
    """The RTX A6000 is a workstation card, built into GPU servers: held to persistence mode like a datacenter part
    (thresholds.toml [persistence] desktop_brands names only the consumer brands)."""
    finding = _one(Facts(gpus=[_gpu(0, name="NVIDIA RTX A6000", persistence_mode=False)]), "gpu.persistence")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.persistence.off")


def test_persistence_off_on_a_geforce_card_is_how_desktops_ship():
    """A GeForce card (consumer desktop): off is usual, a pass."""
    finding = _one(Facts(gpus=[_gpu(0, name="NVIDIA GeForce RTX 3090", persistence_mode=False)]), "gpu.persistence")
    assert (finding.status, finding.message) == (
        Status.PASS, "Persistence mode is off on GPU0 (NVIDIA GeForce RTX 3090, a consumer desktop card): usual on "
                     "desktops, where the display keeps the driver loaded.")
    assert finding.observed == "Disabled" and finding.refs[0] == PERSISTENCE_DOC


def test_mig_enabled_on_the_recorded_a100_warns():
    """public/mig/nvidia-smi-q.xml: MIG Mode Current Enabled."""
    finding = _one(_recorded("mig", "nvidia-smi-q.xml", "nvidia-smi-q.xml"), "gpu.mig")
    assert (finding.status, finding.message_id) == (Status.WARN, "gpu.mig.enabled")
    assert (finding.observed, finding.expected, finding.refs) == ("Enabled", "Disabled", [MIG_GUIDE])


def test_mig_pending_warns():
    finding = _one(Facts(gpus=[_gpu(0, mig_enabled=False, mig_pending=True)]), "gpu.mig")
    assert (finding.status, finding.message) == (Status.WARN,
                                                 "MIG is pending enable on GPU0 (applies at the next GPU reset).")
    assert (finding.observed, finding.expected) == ("Pending Enabled", "Disabled")


def test_mig_off_without_a_pending_value_is_judged():
    """mig_enabled False and no pending value, from plain nvidia-smi (not queried in depth): judged, MIG off."""
    finding = _one(Facts(gpus=[_gpu(0, mig_enabled=False)]), "gpu.mig")
    assert (finding.status, finding.message) == (Status.PASS, "MIG is off on all 1 GPU(s).")


def test_prohibited_compute_mode_fails():
    finding = _one(Facts(gpus=[_gpu(0, compute_mode="Prohibited")]), "gpu.compute_mode")
    assert (finding.status, finding.message) == (
        Status.FAIL, "GPU0 is in Prohibited compute mode: no CUDA context can be created.")
    assert (finding.observed, finding.expected) == ("Prohibited", "Default")


def test_exclusive_process_compute_mode_warns():
    finding = _one(Facts(gpus=[_gpu(1, compute_mode="Exclusive_Process")]), "gpu.compute_mode")
    assert (finding.status, finding.message) == (
        Status.WARN, "GPU1 is in Exclusive_Process mode: only one process may use it, so helpers (profilers, a second "
                     "rank) fail to attach.")
    assert (finding.observed, finding.expected) == ("Exclusive_Process", "Default")


def test_ecc_off_on_an_h100_warns():
    """The H100 is a datacenter part (its datasheet lists ECC on HBM3): ECC off warns, citing the datasheet."""
    finding = _one(Facts(gpus=[_gpu(0, ecc_enabled=False, ecc_pending=False)]), "gpu.ecc_mode")
    assert (finding.status, finding.message) == (
        Status.WARN, "ECC is off on GPU0 (NVIDIA H100 80GB HBM3): memory errors would go undetected and silently "
                     "corrupt training.")
    assert (finding.observed, finding.expected) == ("Disabled", "Enabled")
    assert finding.refs[0].startswith("NVIDIA H100 datasheet https://resources.nvidia.com/")


def test_ecc_turning_on_at_the_next_reboot_is_pending():
    """An RTX A6000 (not a datacenter part: off is no warning), ECC off now, on after a reboot."""
    finding = _one(Facts(gpus=[_gpu(0, name="NVIDIA RTX A6000", ecc_enabled=False, ecc_pending=True)]),
                   "gpu.ecc_mode")
    assert (finding.status, finding.message) == (Status.WARN, "ECC mode on GPU0 changes at the next reboot.")
    assert finding.observed == {"current": False, "pending": True}


@pytest.mark.parametrize("enabled, pending", [(True, None), (None, True)])
def test_one_ecc_value_alone_is_no_pending_change(enabled, pending):
    """Only one of current/pending known: nothing to compare, judged as it is."""
    finding = _one(Facts(gpus=[_gpu(0, ecc_enabled=enabled, ecc_pending=pending)]), "gpu.ecc_mode")
    assert (finding.status, finding.message) == (Status.PASS, "ECC is as expected on all 1 GPU(s).")


def test_busy_gpu_names_five_compute_processes_and_counts_all():
    """Seven processes on GPU0: six compute (one without a name, shown '?') and a graphics one (Xorg, `G`, not
    counted). Count 6; the first five named."""
    processes = [GpuProcess(pid=1000 + i, name=f"python{i}", kind="C") for i in range(4)]
    processes += [GpuProcess(pid=1004, name=None, kind="C"), GpuProcess(pid=1005, name="python5", kind=None),
                  GpuProcess(pid=900, name="/usr/lib/xorg/Xorg", kind="G")]
    finding = _one(Facts(gpus=[_gpu(0, processes=processes)]), "gpu.busy")
    assert (finding.status, finding.message) == (
        Status.WARN, "GPU0 runs 6 compute process(es): python0 (pid 1000), python1 (pid 1001), python2 (pid 1002), "
                     "python3 (pid 1003), ? (pid 1004); a job started now would share it.")
    assert (finding.observed, finding.expected) == (6, 0)


def test_a_graphics_process_alone_is_not_busy():
    finding = _one(Facts(gpus=[_gpu(0, processes=[GpuProcess(pid=900, name="Xorg", kind="G")])]), "gpu.busy")
    assert (finding.status, finding.message_id) == (Status.PASS, "gpu.busy.all_good")


# -------------------------------------------------------------------------------------- ddp.ranks_share_gpu0

MIB = 2**20


def _rank_table(ranks: int, *, on_gpu0_mib: int = 512, own_mib: int = 20000) -> list[tuple[int, GpuProcess]]:
    """Rank r (pid 100 + r) runs on GPU r+1 (own_mib) and holds a context on GPU 0 (on_gpu0_mib)."""
    table = []
    for rank in range(ranks):
        table.append((0, GpuProcess(pid=100 + rank, name="python", kind="C", used_memory_bytes=on_gpu0_mib * MIB)))
        table.append((rank + 1, GpuProcess(pid=100 + rank, name="python", kind="C", used_memory_bytes=own_mib * MIB)))
    return table


def test_two_ranks_with_a_context_on_gpu0_warn_with_their_memory_there():
    """pids 100 and 101 each run on their own GPU and hold 512 MiB on GPU 0; pid 102 runs on GPU 0 only (1000 MiB,
    not counted). GPU 0: 2 ranks, 2 × 512 = 1,024 MiB."""
    table = _rank_table(2) + [(0, GpuProcess(pid=102, name="python", kind="C", used_memory_bytes=1000 * MIB))]
    finding = _one(Facts(process_table=table), "ddp.ranks_share_gpu0")
    assert (finding.status, finding.message_id) == (Status.WARN, "ddp.ranks_share_gpu0.shared")
    assert finding.message.startswith("GPU 0 holds contexts of 2 processes that also run on other GPUs (pids 100, 101; "
                                      "1,024 MiB there): ")
    assert finding.observed == {"gpu": 0, "pids": [100, 101], "memory_bytes": 1024 * MIB}
    assert (finding.expected, finding.refs) == ("one GPU per rank", [SET_DEVICE_REF])


def test_a_context_without_a_memory_figure_counts_nothing():
    """Two ranks on GPU 0 whose memory there nvidia-smi did not print: 0 bytes."""
    table = [(0, GpuProcess(pid=100, name="python", kind="C")), (1, GpuProcess(pid=100, name="python", kind="C")),
             (0, GpuProcess(pid=101, name="python", kind="C")), (2, GpuProcess(pid=101, name="python", kind="C"))]
    finding = _one(Facts(process_table=table), "ddp.ranks_share_gpu0")
    assert finding.observed == {"gpu": 0, "pids": [100, 101], "memory_bytes": 0}
    assert "(pids 100, 101; 0 MiB there)" in finding.message


def test_eight_ranks_are_all_listed_and_nine_are_cut_after_eight():
    """8 ranks: pids 100…107, no ellipsis; 9 ranks: 100…107 then ' …'. 9 × 512 MiB = 4,608 MiB."""
    eight = _one(Facts(process_table=_rank_table(8)), "ddp.ranks_share_gpu0")
    assert "(pids 100, 101, 102, 103, 104, 105, 106, 107; 4,096 MiB there)" in eight.message
    nine = _one(Facts(process_table=_rank_table(9)), "ddp.ranks_share_gpu0")
    assert "of 9 processes that also run on other GPUs (pids 100, 101, 102, 103, 104, 105, 106, 107 …; 4,608 MiB " \
           "there)" in nine.message
    assert nine.observed["pids"] == list(range(100, 109))


def test_processes_without_a_pid_or_of_graphics_are_not_ranks():
    """Rank pid 100 on GPUs 0 and 1; rows without a pid on GPUs 0 and 1; Xorg (`G`, pid 900) on GPUs 0 and 2. Only
    one compute process spans two GPUs: nothing is shared."""
    table = [(0, GpuProcess(pid=100, name="python", kind="C")), (1, GpuProcess(pid=100, name="python", kind="C")),
             (0, GpuProcess(pid=None, name="python")), (1, GpuProcess(pid=None, name="python")),
             (0, GpuProcess(pid=900, name="Xorg", kind="G")), (2, GpuProcess(pid=900, name="Xorg", kind="G"))]
    finding = _one(Facts(process_table=table), "ddp.ranks_share_gpu0")
    assert (finding.status, finding.message) == (Status.PASS, "Every compute process keeps to one GPU (1 process(es)).")
