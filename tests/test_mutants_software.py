"""Tests that kill the mutants of checks/software.py that survived the suite (issue 23, mutation testing; the run and
its module → test-file table are in benchmarks/mutation_score.sh): the driver against torch's CUDA, torch's arch list
against the GPUs' compute capability, torch sees the GPUs, NCCL, the container and scheduler, harmful environment
variables.

Expected values come from recordings (tests/fixtures, each README names its source), NVIDIA's CUDA release notes and
compatibility guide (the driver table), PyTorch's rule for running kernels (torch/cuda/__init__.py _check_capability),
NCCL's environment-variable documentation, or are worked out by hand in the docstring.
"""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from gpuready.evidence.reader import read_bundle
from gpuready.checks import software
from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.evidence.build import build_facts
from gpuready.facts.types import Facts, GpuFacts, HostFacts, KernelEvent, TorchInfo
from gpuready.i18n import message
from gpuready.knowledge import env_var_rules
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

TORCH_INSTALL = "https://pytorch.org/get-started/locally/"
"""PyTorch's install selector, where a build for a given CUDA is picked."""
RELEASE_NOTES = "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html"
COMPAT_GUIDE = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
DOCKER_REFUSED = 'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].'
"""tests/fixtures/cases/docker-no-gpu-runtime-rtx3090-retinanet-278/docker-run.txt (NVIDIA/retinanet-examples#278)."""


def _gpus(count: int, name: str | None = "NVIDIA H100 80GB HBM3", capability: str | None = "9.0") -> list[GpuFacts]:
    return [GpuFacts(index=i, bus_id=f"0000:{0x18 + i:02x}:00.0", name=name, compute_capability=capability)
            for i in range(count)]


def _all(facts: Facts, check_id: str):
    return run_checks(facts, only=[check_id])


def _one(facts: Facts, check_id: str):
    found = _all(facts, check_id)
    assert len(found) == 1, [(f.check_id, f.status.value, f.message) for f in found]
    return found[0]


def _torch(**fields) -> TorchInfo:
    return TorchInfo(**{"version": "2.7.0+cu128", "cuda": "12.8", "source": "import torch", **fields})


def _driver(driver: str, cuda: str = "12.8", version: str = "2.7.0+cu128"):
    return _one(Facts(gpus=_gpus(8), driver_version=driver, torch=_torch(version=version, cuda=cuda)),
                "software.driver_cuda")


# ------------------------------------------------------------------------------------------- torch itself

def test_torch_that_does_not_import_warns_with_its_error_and_the_install_page():
    """torch.json with no version and an error: warn quoting the error, expecting torch 2.4 or later with CUDA, and
    pointing at PyTorch's install selector."""
    facts = Facts(gpus=_gpus(1), driver_version="570.124.06",
                  torch=TorchInfo(error="ImportError: libcudnn.so.9: cannot open shared object file"))
    finding = _one(facts, "software.torch_arch")
    assert finding.status == Status.WARN
    assert finding.message == "PyTorch is not usable here: ImportError: libcudnn.so.9: cannot open shared object file."
    assert (finding.observed, finding.expected, finding.refs) == (
        "ImportError: libcudnn.so.9: cannot open shared object file", "torch >= 2.4 with CUDA", [TORCH_INSTALL])


def test_a_cpu_only_torch_fails_and_asks_for_a_cuda_build():
    """torch 2.5.1+cpu has no CUDA: fail, expecting a CUDA build, pointing at the install selector."""
    facts = Facts(gpus=_gpus(1), driver_version="570.124.06", torch=TorchInfo(version="2.5.1+cpu", cuda=None))
    finding = _one(facts, "software.driver_cuda")
    assert finding.status == Status.FAIL
    assert finding.message == "torch 2.5.1+cpu is a CPU-only build: it cannot use the GPUs."
    assert (finding.observed, finding.expected, finding.refs) == ("2.5.1+cpu", "a CUDA build", [TORCH_INSTALL])


# ------------------------------------------------------------------------------------------- driver vs CUDA

def test_a_driver_version_that_is_no_number_is_quoted_cut_at_forty_characters():
    """A driver 'version' of 26 letters repeated twice (52 characters, no digit first): the message quotes its
    first 40 characters, a..z then a..n, as Python's repr."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    finding = _driver(letters * 2)
    assert finding.status == Status.WARN
    assert finding.message == (f"The driver version '{letters}abcdefghijklmn' is not a version number; torch's CUDA "
                               "12.8 not judged against it.")
    assert finding.observed == letters * 2


def test_the_recorded_h200_passes_and_says_driver_torch_and_cuda():
    """tests/fixtures/h200-docker-collect (README: driver 580.159.04, CUDA 13.0, torch 2.11.0+cu130). NVIDIA's
    release notes: CUDA 13.0 GA needs >= 580.65.06; 580.159 > 580.65, so every feature is there: pass, expecting
    the GA driver and citing the release notes."""
    facts = build_facts(read_bundle(FIXTURES / "h200-docker-collect"))
    finding = _one(facts, "software.driver_cuda")
    assert finding.status == Status.PASS
    assert finding.message == "Driver 580.159.04 supports torch's CUDA 13.0."
    assert finding.observed == "driver 580.159.04, torch 2.11.0+cu130 (CUDA 13.0)"
    assert finding.expected == ">= 580.65.06"
    assert len(finding.refs) == 1 and RELEASE_NOTES in finding.refs[0] and "13.0 GA >=580.65.06" in finding.refs[0]


def test_a_driver_between_the_12x_floor_and_128s_ga_driver_runs_by_minor_version_compatibility():
    """NVIDIA: CUDA 12.x runs on drivers >= 525.60.13 (minor-version compatibility, limited features); CUDA 12.8 GA
    asks for >= 570.26. Driver 560.35.03 (CUDA 12.6 Update 1's) is between: pass, naming both figures, expecting
    570.26 for every feature and citing the compatibility guide, then the release notes."""
    finding = _driver("560.35.03")
    assert finding.status == Status.PASS
    assert finding.message == ("Driver 560.35.03 runs torch's CUDA 12.8 through minor-version compatibility "
                               "(>= 525.60.13); features that need the 570.26 driver (e.g. JIT of newer PTX) are "
                               "unavailable.")
    assert finding.observed == "driver 560.35.03, torch 2.7.0+cu128 (CUDA 12.8)"
    assert finding.expected == ">= 570.26 for every feature"
    assert len(finding.refs) == 2 and COMPAT_GUIDE in finding.refs[0]
    assert RELEASE_NOTES in finding.refs[1] and "12.8 GA >=570.26" in finding.refs[1]


def test_a_driver_at_or_above_the_ga_driver_passes_without_minor_version_compatibility():
    """570.124.06 (CUDA 12.8 Update 1's driver) >= 570.26 (12.8 GA): a plain pass expecting 570.26."""
    finding = _driver("570.124.06")
    assert (finding.status, finding.message_id, finding.expected) == (
        Status.PASS, "software.driver_cuda.pass", ">= 570.26")
    assert finding.message == "Driver 570.124.06 supports torch's CUDA 12.8."


def test_a_driver_below_the_floor_fails_and_says_to_upgrade_to_the_ga_driver():
    """520.61.05 (CUDA 11.8's GA driver) < 525.60.13, the CUDA 12.x floor: fail expecting the floor; the fix asks
    for 570.26, the driver that runs all of CUDA 12.8."""
    finding = _driver("520.61.05")
    assert finding.status == Status.FAIL
    assert finding.message == ("Driver 520.61.05 is too old for torch's CUDA 12.8 (needs >= 525.60.13): CUDA "
                               "initialisation fails with 'driver version is insufficient'.")
    assert finding.fix.startswith("Upgrade the driver to >= 570.26, or install a torch built for an older CUDA")
    assert finding.expected == ">= 525.60.13"
    assert len(finding.refs) == 1 and COMPAT_GUIDE in finding.refs[0]


def test_a_cuda_minor_with_no_release_of_its_own_is_judged_on_its_family_floor():
    """There is no CUDA 12.7 release (NVIDIA's table goes 12.6 → 12.8), so only the 12.x floor 525.60.13 applies:
    520.61.05 fails and the fix asks for that floor; 580.65.06 passes expecting it."""
    old = _driver("520.61.05", cuda="12.7")
    assert old.status == Status.FAIL
    assert old.fix.startswith("Upgrade the driver to >= 525.60.13, or install")
    new = _driver("580.65.06", cuda="12.7")
    assert (new.status, new.message, new.expected) == (
        Status.PASS, "Driver 580.65.06 supports torch's CUDA 12.7.", ">= 525.60.13")
    assert len(new.refs) == 1 and COMPAT_GUIDE in new.refs[0]


def test_a_driver_version_cut_to_its_major_cannot_be_told_against_the_floor():
    """CUDA 12.x needs >= 525.60.13; a driver reported as '525' alone may be 525.60.13 or 525.53 (older): warn that
    it cannot be told, expecting the floor."""
    finding = _driver("525")
    assert finding.status == Status.WARN
    assert finding.message == ("The driver version 525 stops short of the 525.60.13 that torch's CUDA 12.8 needs at "
                               "least: whether it is new enough cannot be told.")
    assert finding.expected == ">= 525.60.13"
    assert len(finding.refs) == 1 and COMPAT_GUIDE in finding.refs[0]


@pytest.mark.parametrize("version, than, older", [
    ("580", "580.65.06", None),     # the docstring's own example
    ("570", "570.26", None),        # the same number, a two-field `than`
    ("455.23", "455.23.04", True),  # the docstring: 455.23 < 455.23.04
    ("570", "525.60.13", False),    # another number: 570 > 525
])
def test_older_cannot_tell_a_bare_major_that_is_the_one_compared_with(version, than, older):
    """_older's contract (its docstring): a version without a dot whose number is the one `than` starts with cannot be
    told (None), whatever the number of fields `than` has; otherwise the fields compare."""
    assert software._older(version, than) is older


# ------------------------------------------------------------------------------------------- torch arch list

def _arch(arch_list: list[str], *gpus: GpuFacts):
    return _all(Facts(gpus=list(gpus), torch=_torch(arch_list=arch_list)), "software.torch_arch")


def test_a_minor_capability_runs_the_same_majors_older_sass():
    """PyTorch's rule: SASS sm_XY runs on capability X.Z for Z >= Y. An A10 (8.6) on a list with sm_80 but no sm_86
    runs on sm_80, as SASS, not PTX."""
    found = _arch(["sm_80"], *_gpus(1, "NVIDIA A10", "8.6"))
    assert [(f.status, f.message) for f in found] == [(Status.PASS, "Compute capability 8.6 (NVIDIA A10) runs on sm_80.")]


def test_an_unreadable_arch_entry_is_skipped_not_the_end_of_the_list():
    """A ROCm-style 'gfx90a' first, then sm_90: the H100 (9.0) still runs on sm_90."""
    found = _arch(["gfx90a", "sm_90"], *_gpus(2))
    assert [f.message for f in found] == ["Compute capability 9.0 (NVIDIA H100 80GB HBM3) runs on sm_90."]


def test_arch_specific_sass_runs_only_on_its_own_capability():
    """sm_90a (architecture-specific features) runs on 9.0 only, never on a later minor: H100 (9.0) runs on it; a
    10.3 GPU (B300) on a list of only sm_100a has no kernels: fail, expecting sm_103."""
    assert [f.message for f in _arch(["sm_90a"], *_gpus(1))] == [
        "Compute capability 9.0 (NVIDIA H100 80GB HBM3) runs on sm_90a."]
    found = _arch(["sm_100a"], *_gpus(1, "NVIDIA B300 SXM6 AC", "10.3"))
    assert [(f.status, f.expected) for f in found] == [(Status.FAIL, "sm_103")]


def test_ptx_of_the_same_capability_runs_just_in_time():
    """compute_90 is PTX for 9.0: an H100 runs it, JIT-compiled at first use."""
    found = _arch(["compute_90"], *_gpus(1))
    assert [f.message for f in found] == [
        "Compute capability 9.0 (NVIDIA H100 80GB HBM3) runs on compute_90 (PTX, JIT-compiled at first use)."]


def test_a_capability_with_no_kernels_fails_naming_the_sm_to_install():
    """torch 2.5.1+cu124's list ends at sm_90 (PyTorch 2.5 release notes: Blackwell came with cu128 wheels): a B200
    (10.0) has no kernels: fail, expecting sm_100, the fix asking for a build listing sm_100, citing torch's rule."""
    arch_list = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    facts = Facts(gpus=_gpus(2, "NVIDIA B200", "10.0"), torch=_torch(version="2.5.1+cu124", cuda="12.4",
                                                                     arch_list=arch_list))
    finding = _one(facts, "software.torch_arch")
    assert finding.status == Status.FAIL
    assert finding.message == ("torch 2.5.1+cu124 has no kernels for compute capability 10.0 (NVIDIA B200): 'no "
                               "kernel image is available for execution on the device'.")
    assert finding.fix.startswith("Install a torch build that lists sm_100 (newer CUDA wheels")
    assert (finding.observed, finding.expected) == (arch_list, "sm_100")
    assert finding.refs == ["torch.cuda.get_arch_list(); torch/cuda/__init__.py _check_capability"]


def test_each_capability_names_its_own_gpus_sorted_and_unnamed_ones_as_a_question_mark():
    """GPUs 0-1 H200 and H100 (9.0), GPU 2 an A100 (8.0), GPU 3 unnamed (8.0), GPU 4 with capability '9' (no
    minor: not judged). Capabilities in order 8.0, 9.0; names sorted within each: '?' < 'N…'."""
    gpus = [GpuFacts(index=0, bus_id="0000:18:00.0", name="NVIDIA H200", compute_capability="9.0"),
            GpuFacts(index=1, bus_id="0000:19:00.0", name="NVIDIA H100 80GB HBM3", compute_capability="9.0"),
            GpuFacts(index=2, bus_id="0000:1a:00.0", name="NVIDIA A100-SXM4-80GB", compute_capability="8.0"),
            GpuFacts(index=3, bus_id="0000:1b:00.0", name=None, compute_capability="8.0"),
            GpuFacts(index=4, bus_id="0000:1c:00.0", name="NVIDIA H100 PCIe", compute_capability="9")]
    found = _arch(["sm_80", "sm_90"], *gpus)
    assert [f.message for f in found] == [
        "Compute capability 8.0 (?, NVIDIA A100-SXM4-80GB) runs on sm_80.",
        "Compute capability 9.0 (NVIDIA H100 80GB HBM3, NVIDIA H200) runs on sm_90."]


# ------------------------------------------------------------------------------------------- torch sees the GPUs

def _sees(count: int, gpus: int = 8, env: dict[str, str] | None = None):
    return _one(Facts(gpus=_gpus(gpus), torch=_torch(version="2.6.0+cu126", cuda="12.6", device_count=count),
                      env=env), "software.torch_sees_gpus")


def test_torch_seeing_fewer_gpus_without_cuda_visible_devices_warns():
    """4 of 8 GPUs and no CUDA_VISIBLE_DEVICES: warn 'torch sees 4 of 8 GPUs.'"""
    finding = _sees(4, env={"PATH": "/usr/bin"})
    assert (finding.status, finding.message, finding.observed, finding.expected) == (
        Status.WARN, "torch sees 4 of 8 GPUs.", 4, 8)


def test_cuda_visible_devices_explains_fewer_gpus_and_is_named():
    """CUDA_VISIBLE_DEVICES=0,1 on 8 GPUs: torch sees 2 by design: pass, naming the variable's value."""
    finding = _sees(2, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert (finding.status, finding.message) == (
        Status.PASS, "torch 2.6.0+cu126 sees 2 GPU(s) (CUDA_VISIBLE_DEVICES=0,1).")


def test_all_gpus_seen_without_the_variable_is_a_plain_pass():
    finding = _sees(8)
    assert (finding.status, finding.message, finding.observed, finding.expected) == (
        Status.PASS, "torch 2.6.0+cu126 sees 8 GPU(s).", 8, 8)


def test_torch_seeing_no_gpu_fails_observing_zero():
    finding = _sees(0)
    assert (finding.status, finding.message, finding.observed, finding.expected) == (
        Status.FAIL, "torch sees no GPU while the driver shows 8.", 0, 8)


# ------------------------------------------------------------------------------------------- NCCL

def _nccl(nccl: str | None = "2.21.5", cuda: str | None = "12.4", env=None, libraries=None):
    return _one(Facts(gpus=_gpus(8), torch=_torch(version="2.5.1+cu124", cuda=cuda, nccl_version=nccl), env=env,
                      system_libraries=libraries), "software.nccl")


def test_the_recorded_docker_h200_names_the_system_libnccl_beside_torchs():
    """tests/fixtures/h200-docker-collect: torch's NCCL 2.28.9 (README), and the image's libnccl 2.28.3 (its env:
    NV_LIBNCCL_DEV_PACKAGE=libnccl-dev=2.28.3-1+cuda13.0; ldconfig lists libnccl.so.2.28.3)."""
    facts = build_facts(read_bundle(FIXTURES / "h200-docker-collect"))
    assert facts.env["NV_LIBNCCL_DEV_PACKAGE"] == "libnccl-dev=2.28.3-1+cuda13.0"
    finding = _one(facts, "software.nccl")
    assert (finding.status, finding.observed) == (Status.PASS, "2.28.9")
    assert finding.message == ("torch uses NCCL 2.28.9. A system libnccl 2.28.3 is also installed; torch uses its "
                               "own, so this only matters for tools linked against the system one (e.g. nccl-tests).")


def test_two_system_nccls_are_listed_in_version_order_and_the_same_one_is_not_mentioned():
    """libnccl.so.2.21.5 and .so.2.18.3 installed: 2.18.3, 2.21.5 ascending. Only torch's own 2.21.5: a plain pass;
    a bare libnccl.so.2 has no full version and counts for nothing."""
    both = _nccl(libraries=["/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5", "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                            "/opt/nccl/lib/libnccl.so.2.18.3"])
    assert both.message.startswith("torch uses NCCL 2.21.5. A system libnccl 2.18.3, 2.21.5 is also installed;")
    same = _nccl(libraries=["/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5"])
    assert (same.status, same.message) == (Status.PASS, "torch uses NCCL 2.21.5.")


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "NCCL_LIBRARY", "TORCH_NCCL_LIBRARY"])
def test_a_preloaded_nccl_warns_naming_the_path(variable):
    """Any of the three variables that load another libnccl (NCCL docs, PyTorch's TORCH_NCCL_LIBRARY) pointing at a
    libnccl: warn, quoting the path alone."""
    finding = _nccl(env={variable: "/opt/nccl-2.23.4/lib/libnccl.so.2"})
    assert finding.status == Status.WARN
    assert finding.message == ("torch's NCCL is 2.21.5 but the environment preloads another NCCL "
                               "(/opt/nccl-2.23.4/lib/libnccl.so.2).")
    assert (finding.observed, finding.expected) == ("/opt/nccl-2.23.4/lib/libnccl.so.2", "2.21.5")


def test_no_nccl_version_is_a_cpu_build_without_cuda_and_not_read_with_it():
    assert _nccl(nccl=None, cuda=None).message == "torch is a CPU build: no NCCL."
    assert _nccl(nccl=None).message_id == "software.nccl.not_read"


# ------------------------------------------------------------------------------------------- container

def _container(runtime: str | None, env: dict[str, str] | None, gpus: list[GpuFacts] | None = None, events=None):
    return _one(Facts(host=HostFacts(container=runtime), env=env, gpus=gpus, kernel_log=events),
                "software.container")


def test_the_recorded_docker_h200_is_in_a_container_with_the_nvidia_runtime():
    """tests/fixtures/h200-docker-collect: Docker, NVIDIA_VISIBLE_DEVICES=0 in env.txt, no scheduler."""
    finding = _one(build_facts(read_bundle(FIXTURES / "h200-docker-collect")), "software.container")
    assert (finding.status, finding.message) == (Status.PASS, "container: docker; NVIDIA runtime variables present.")
    assert finding.observed == {"container": "docker", "schedulers": []}


def test_docker_refusing_gpus_fails_quoting_the_first_200_characters():
    """The recorded Docker refusal (97 characters: 'docker: ' 8, … 'with ' ends at 75, 'capabilities: ' at 89,
    '[[gpu]].' at 97) after 110 dots: the observed line is its first 200 characters, the dots then the refusal's first
    90, up to 'capabilities: ['. Expected: the NVIDIA Container Toolkit, its install guide."""
    line = "." * 110 + DOCKER_REFUSED
    event = KernelEvent(kind="docker_no_gpu_runtime", line=line, source="docker-run.txt", line_number=1)
    finding = _container(None, None, events=[event])
    assert finding.status == Status.FAIL
    assert finding.observed == ("." * 110 +
                                'docker: Error response from daemon: could not select device driver "" with capabilities: [')
    assert finding.expected == "the NVIDIA Container Toolkit configured for Docker"
    assert finding.refs == [
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"]


def test_a_container_without_the_nvidia_runtime_and_no_gpu_warns_saying_all_it_saw():
    """Kubernetes pod of a Slurm job, no NVIDIA_VISIBLE_DEVICES, no GPU visible: the GPUs were not passed in. The
    observed line: where, the schedulers (Slurm, then Kubernetes), the missing variable."""
    env = {"SLURM_JOB_ID": "4242", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    finding = _container("kubernetes", env, gpus=[])
    assert finding.status == Status.WARN
    assert finding.message_id == "software.container.no_gpus_passed"
    assert finding.observed == "container: kubernetes; scheduler: Slurm, Kubernetes; no NVIDIA_VISIBLE_DEVICES"
    assert finding.refs == ["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/"]


def test_a_container_with_gpus_but_no_nvidia_variable_passes_naming_both_schedulers():
    env = {"SLURM_JOB_ID": "4242", "KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    finding = _container("kubernetes", env, gpus=_gpus(8))
    assert (finding.status, finding.message) == (
        Status.PASS, "container: kubernetes; scheduler: Slurm, Kubernetes; no NVIDIA_VISIBLE_DEVICES.")
    assert finding.observed == {"container": "kubernetes", "schedulers": ["Slurm", "Kubernetes"]}


def test_a_container_with_the_nvidia_variable_and_a_scheduler():
    finding = _container("docker", {"NVIDIA_VISIBLE_DEVICES": "all", "SLURM_JOB_ID": "7"}, gpus=_gpus(1))
    assert finding.message == "container: docker; scheduler: Slurm; NVIDIA runtime variables present."


def test_docker_known_from_the_cgroup_without_env_is_still_judged():
    """Runtime read (docker), env.txt not read: judged with no variables, so no NVIDIA_VISIBLE_DEVICES."""
    finding = _container("docker", None, gpus=_gpus(1))
    assert (finding.status, finding.message) == (Status.PASS, "container: docker; no NVIDIA_VISIBLE_DEVICES.")


def test_not_in_a_container_without_gpus_is_no_container_problem():
    """The cgroup files say no container and no GPU is visible: that is gpu.present's to say, not a container
    without the NVIDIA runtime."""
    finding = _container("none", {"PATH": "/usr/bin"}, gpus=[])
    assert (finding.status, finding.message) == (Status.PASS, "not in a container.")


def test_an_undetermined_container_with_a_scheduler():
    """No cgroup facts (None) but env.txt read, a Slurm job: undetermined; scheduler Slurm."""
    finding = _container(None, {"SLURM_JOB_ID": "4242"}, gpus=_gpus(1))
    assert (finding.status, finding.message) == (Status.PASS, "container not determined; scheduler: Slurm.")
    assert finding.observed == {"container": None, "schedulers": ["Slurm"]}


# ------------------------------------------------------------------------------------------- environment

def _env(env: dict[str, str], gpus: list[GpuFacts] | None = None):
    return _all(Facts(env=env, gpus=gpus if gpus is not None else _gpus(1)), "software.env")


def test_a_harmful_variable_warns_by_its_own_text_in_every_language():
    """NCCL_P2P_DISABLE=1 (NCCL docs: disables P2P transport): a warning with the variable's own catalogue id, so the
    Chinese report says it in Chinese rather than the English `why`; expected unset; NCCL docs cited."""
    found = _env({"NCCL_P2P_DISABLE": "1"})
    assert [(f.status, f.message_id, f.observed, f.expected) for f in found] == [
        (Status.WARN, "software.env.set_NCCL_P2P_DISABLE", "NCCL_P2P_DISABLE=1", "unset")]
    assert found[0].message == ("NCCL_P2P_DISABLE=1: disables CUDA P2P (NVLink and PCIe) in NCCL; intra-node traffic "
                                "then goes through host memory.")
    assert found[0].refs == ["https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-disable"]
    assert "host memory" not in message(found[0].message_id, "zh", **found[0].message_values)


def test_a_later_variable_is_judged_when_earlier_ones_are_unset_and_without_gpus():
    """CUDA_LAUNCH_BLOCKING=1 alone (CUDA programming guide: launches become synchronous), on a host that shows no
    GPU (the environment is judged anyway)."""
    found = _env({"CUDA_LAUNCH_BLOCKING": "1"}, gpus=[])
    assert [(f.status, f.observed) for f in found] == [(Status.WARN, "CUDA_LAUNCH_BLOCKING=1")]


def test_a_harmless_value_of_a_harmful_variable_passes():
    """NCCL_P2P_DISABLE=0 leaves P2P on: pass."""
    found = _env({"NCCL_P2P_DISABLE": "0"})
    assert [(f.status, f.message) for f in found] == [
        (Status.PASS, "No environment variable slows or breaks NCCL/CUDA.")]


def test_any_value_of_an_override_is_noted_under_its_own_text():
    """NCCL_ALGO=Ring (NCCL docs: overrides the algorithm choice): any value is noted, by the variable's own id."""
    found = _env({"NCCL_ALGO": "Ring"})
    assert [(f.status, f.message_id) for f in found] == [(Status.PASS, "software.env.pass_noted_NCCL_ALGO")]
    assert found[0].message == ("No environment variable slows or breaks NCCL/CUDA. Noted: NCCL_ALGO=Ring: overrides "
                                "NCCL's algorithm choice; figures then differ from NCCL's tuned defaults.")


def test_a_harmful_variable_added_to_the_table_since_says_its_english_why(monkeypatch):
    """A rule the catalogue has no text for yet (an invented NCCL_INVENTED_DISABLE=1): the general sentence
    'NAME=VALUE: why.' with the rule's English `why`."""
    rules = env_var_rules() + [{"name": "NCCL_INVENTED_DISABLE", "bad_values": ["1"], "level": "warn",
                                "why": "disables an invented transport", "source": "https://example.invalid/nccl"}]
    monkeypatch.setattr(software, "env_var_rules", lambda: rules)
    found = _env({"NCCL_INVENTED_DISABLE": "1"})
    assert [(f.status, f.message_id, f.message, f.refs) for f in found] == [
        (Status.WARN, "software.env.set", "NCCL_INVENTED_DISABLE=1: disables an invented transport.",
         ["https://example.invalid/nccl"])]


# ------------------------------------------------------------------------------------------- facts not read

def test_each_torch_fact_not_read_is_a_skip_saying_which():
    """No torch.json: skip. A torch without its arch list (read with --fast) or with an empty one (a CPU build), or
    without a device count: skip, each saying what was not read."""
    assert _one(Facts(gpus=_gpus(1), torch=None), "software.torch_arch").message_id == "registry.not_judged"
    assert [(f.status, f.message) for f in _arch(None, *_gpus(1))] == [
        (Status.SKIP, "torch's arch list was not read (run without --fast to import torch).")]
    assert [(f.status, f.message) for f in _arch([], *_gpus(1))] == [
        (Status.SKIP, "torch reports no CUDA arch list (CPU build or CUDA unavailable).")]
    finding = _sees(None)
    assert (finding.status, finding.message) == (
        Status.SKIP, "torch's device count was not read (run without --fast).")


def test_torch_that_is_not_installed_warns_so():
    facts = Facts(gpus=_gpus(1), torch=TorchInfo())
    finding = _one(facts, "software.torch_sees_gpus")
    assert (finding.status, finding.message, finding.observed) == (
        Status.WARN, "PyTorch is not usable here: not installed.", None)


def test_torch_whose_cuda_query_failed_fails_quoting_the_error():
    """torch imported (2.6.0+cu126) but torch.cuda.device_count() raised: fail with CUDA's own error."""
    error = "CUDA driver initialization failed, you might not have a CUDA gpu."
    facts = Facts(gpus=_gpus(2), torch=_torch(version="2.6.0+cu126", cuda="12.6", error=error))
    finding = _one(facts, "software.torch_sees_gpus")
    assert (finding.status, finding.message, finding.observed) == (
        Status.FAIL, f"torch could not query CUDA: {error}", error)
