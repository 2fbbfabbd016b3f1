"""CUDA_VISIBLE_DEVICES → the NVML GPUs the ranks use (facts/visible.py): a shared server where NVML numbers all 8
GPUs but the job may use two, UUID prefixes, and CUDA's rule that the list ends at the first unusable entry."""

import pytest

from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.facts.visible import visible_nvml_indices

# NVML's numbering of an 8-GPU board; bus ids out of index order on purpose (index 0 sits at the highest bus)
EIGHT = [{"index": i, "bus_id": f"0000:{bus:02x}:00.0", "uuid": f"GPU-{i}{i}aa{i}b00-0000-0000-0000-00000000000{i}"}
         for i, bus in enumerate((0xdb, 0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba))]


def test_unset_means_every_gpu(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_nvml_indices(EIGHT) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert visible_nvml_indices(EIGHT) == [4]


def test_numbers_are_positions_in_pci_bus_order():
    # the ranks run with CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA device 0 is the lowest bus (NVML index 1 here)
    assert visible_nvml_indices(EIGHT, "0,1") == [1, 2]
    assert visible_nvml_indices(EIGHT, "7") == [0]
    assert visible_nvml_indices(EIGHT, "4,5") == [5, 6]


def test_uuids_and_unique_prefixes():
    assert visible_nvml_indices(EIGHT, "GPU-33aa3b00-0000-0000-0000-000000000003,GPU-55") == [3, 5]
    assert visible_nvml_indices(EIGHT, "66aa") == [6]  # CUDA accepts a UUID without its GPU- prefix


def test_the_list_ends_at_the_first_entry_cuda_cannot_use():
    assert visible_nvml_indices(EIGHT, "2,9,3") == [3]  # 9 is no GPU: CUDA sees only the first
    assert visible_nvml_indices(EIGHT, "GPU-,4") == []  # a prefix of every UUID names no single GPU
    assert visible_nvml_indices(EIGHT, "") == []  # set but empty hides every GPU
    assert visible_nvml_indices(EIGHT, "1,1") == [2]


def test_mig_instances_are_not_whole_gpus():
    assert visible_nvml_indices(EIGHT, "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee") is None


def test_validate_and_bench_watch_the_gpus_the_user_made_visible(monkeypatch):
    from gpuready.facts.types import Facts, GpuFacts
    from gpuready.devices import selected_indices
    facts = Facts(gpus=[GpuFacts(index=g["index"], bus_id=g["bus_id"], uuid=g["uuid"]) for g in EIGHT])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5")
    assert selected_indices(None, facts, 2) == [5, 6]  # not NVML's GPUs 0 and 1, someone else's
    # gpuready's own --gpus (UUIDs) wins over the user's variable
    assert selected_indices(EIGHT[3]["uuid"], facts, 1) == [3]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert selected_indices(None, facts, 3) == [1, 2, 3]  # bus order, as the ranks number them


class _FakeSession:
    """NvmlSession's identity and handles for an 8-GPU board (EIGHT), nothing else."""

    closed = False

    def __init__(self, *args, **kwargs):
        self.identity = [GpuIdentity(index=index, bus_id=g["bus_id"], uuid=g["uuid"], name="NVIDIA H200")
                         for index, g in enumerate(EIGHT)]
        self.handles = list(range(8))

    def sample(self, index):  # the sampler's thread asks; nothing to say
        return GpuSample()

    def close(self):
        _FakeSession.closed = True


def _burn_on_eight(monkeypatch, visible):
    import gpuready.devices
    import gpuready.measuring
    import gpuready.runner.local
    import gpuready.verbs.validate.run as validate_run
    from gpuready.facts.types import Facts
    from gpuready.verbs.burn.run import BurnOptions, run_burn
    started = {}

    def fake_run_local(**kwargs):
        started.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(validate_run, "auto_device", lambda device, verb="validate": "cuda")
    # where the measuring run looks them up (devices.py reads the facts, measuring.py opens the NVML session)
    monkeypatch.setattr(gpuready.devices, "collect", lambda with_torch=False, only=None: ({}, []))
    monkeypatch.setattr(gpuready.devices, "build_facts", lambda files, live=True: Facts())
    monkeypatch.setattr(gpuready.measuring, "NvmlSession", _FakeSession)
    monkeypatch.setattr(gpuready.runner.local, "run_local", fake_run_local)
    monkeypatch.setattr("gpuready.facts.gpu_users.read_nvml", lambda: {"init_error": None, "gpus": []})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    try:
        run_burn(BurnOptions(duration_s=1, device="cuda", dtype="bf16"))
    except RuntimeError as error:
        assert str(error) == "stop here"
    return started


def test_burn_starts_one_worker_per_gpu_the_user_made_visible(monkeypatch):
    pytest.importorskip("torch")
    started = _burn_on_eight(monkeypatch, "4,5")
    assert started["world_size"] == 2  # not NVML's eight


def test_burn_with_no_visible_gpu_is_one_sentence(monkeypatch):
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="names no GPU NVML knows here"):
        _burn_on_eight(monkeypatch, "9")
    assert _FakeSession.closed
