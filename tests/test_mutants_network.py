"""Tests that kill the mutants of checks/network.py that survived the suite (issue 23, mutation testing: the run and
its module → test-file table are in benchmarks/mutation_score.sh).

The limits are the README's "Check catalog" rows (`network.rdma`: warn below 100 Gb/s active; `network.nic_speed`:
fail when the fastest physical NIC is below 10 Gb/s and there is no RDMA; `network.port`: TCP 29500, torchrun's
default `--master-port`, PyTorch's torchrun documentation); the ports and NICs are made up for each case and every
expected text is worked out by hand in the test's docstring. The one recording used is the H200 machine's
`collect` (tests/fixtures/h200-collect, recorded 2026-12-02): its sysfs.txt and modules.txt.
"""

from __future__ import annotations

import pytest

from conftest import FIXTURES
from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.evidence.build import build_facts
from gpuready.facts.types import Facts, HostFacts, IbPort, NetInterface
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

H200 = FIXTURES / "h200-collect"
NCCL_ENV_URL = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
NCCL_NETWORKING_URL = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#networking-issues"
GPUDIRECT_RDMA_URL = "https://docs.nvidia.com/cuda/gpudirect-rdma/"


def _judged(check_id: str, facts: Facts):
    """The findings of one check, on facts without any GPU: every network check judges the machine, not its GPUs."""
    found = run_checks(facts, only=[check_id])
    assert all(f.check_id == check_id for f in found)
    return found


def _one(check_id: str, facts: Facts):
    found = _judged(check_id, facts)
    assert len(found) == 1, [(f.status.value, f.message) for f in found]
    return found[0]


def _port(device: str, state: str | None, rate: float | None, layer: str | None = "InfiniBand", port: int = 1):
    return IbPort(device=device, port=port, state=state, rate_gbit_per_s=rate, link_layer=layer)


def _nic(name: str, mbit: int | None, state: str | None = "up", virtual: bool = False):
    return NetInterface(name=name, speed_mbit_per_s=mbit, operstate=state, is_virtual=virtual)


def _cites_nccl_networking(finding) -> None:
    assert len(finding.refs) == 1 and finding.refs[0].endswith(NCCL_NETWORKING_URL), finding.refs


# ----------------------------------------------------------------------------------------------------- network.rdma

def test_no_rdma_device_warns_on_a_machine_without_gpus():
    """An empty port list (ibv_devinfo found no HCA) is judged, GPUs or not: a warning that NCCL falls back to TCP
    sockets, observed 'none', expected the README's 100 Gb/s per node, the fix for single and multi node."""
    finding = _one("network.rdma", Facts(ib_ports=[]))
    assert finding.status == Status.WARN
    assert finding.message == "No InfiniBand/RoCE device: multi-node NCCL will use TCP sockets, far slower than RDMA."
    assert (finding.observed, finding.expected) == ("none", ">= 100 Gb/s RDMA per node")
    assert finding.fix.startswith("Single node: nothing to do. Multi-node: add RDMA NICs")
    assert finding.message_id == "network.rdma.none"
    _cites_nccl_networking(finding)


def test_no_port_list_at_all_is_not_judged():
    """ib_ports None (no ibv_devinfo, no sysfs capture): the check is skipped, it does not claim 'no RDMA device'."""
    finding = _one("network.rdma", Facts())
    assert finding.status == Status.SKIP and finding.message_id == "registry.not_judged"


def test_one_port_down_beside_a_fast_active_one_warns_about_the_port_only():
    """mlx5_0/1 ACTIVE at 400 Gb/s and mlx5_1/1 DOWN with no rate and no link layer: active bandwidth 400 ≥ 100, so
    the only warning is the port that is down: count 1, 'mlx5_1/1 DOWN', the NIC mlx5_1, observed every port as
    '<dev>/<port> <state> <rate or ?> Gb/s <link layer>' (the down one has no trailing link layer), expected ACTIVE,
    and NCCL's networking page."""
    ports = [_port("mlx5_0", "ACTIVE", 400), _port("mlx5_1", "DOWN", None, None)]
    finding = _one("network.rdma", Facts(ib_ports=ports))
    assert finding.status == Status.WARN
    assert finding.message == "1 RDMA port(s) not active: mlx5_1/1 DOWN."
    assert finding.subject.nic == "mlx5_1"
    assert finding.observed == "mlx5_0/1 ACTIVE 400 Gb/s InfiniBand, mlx5_1/1 DOWN ? Gb/s"
    assert finding.expected == "ACTIVE"
    assert finding.refs == [f"NCCL environment and networking: {NCCL_ENV_URL}"]
    assert finding.fix == ("Check cables and the subnet manager (`ibstat`, `sminfo`); for RoCE, the Ethernet link "
                           "(`ip link`).")


def test_two_ports_not_active_name_the_first_nic_and_exactly_100_gbit_is_enough():
    """mlx5_0/1 INIT, mlx5_1/1 ACTIVE 100 Gb/s RoCE (link layer Ethernet), mlx5_2/2 DOWN: 2 ports not active, listed
    in order 'mlx5_0/1 INIT, mlx5_2/2 DOWN', the finding's NIC the first of them (mlx5_0). Active bandwidth is the one
    ACTIVE port, 100 Gb/s: not below the README's 100, so no second warning."""
    ports = [_port("mlx5_0", "INIT", 200), _port("mlx5_1", "ACTIVE", 100, "Ethernet"),
             _port("mlx5_2", "DOWN", 200, port=2)]
    finding = _one("network.rdma", Facts(ib_ports=ports))
    assert finding.message == "2 RDMA port(s) not active: mlx5_0/1 INIT, mlx5_2/2 DOWN."
    assert finding.subject.nic == "mlx5_0"
    assert finding.observed == ("mlx5_0/1 INIT 200 Gb/s InfiniBand, mlx5_1/1 ACTIVE 100 Gb/s Ethernet, "
                                "mlx5_2/2 DOWN 200 Gb/s InfiniBand")


def test_a_slow_active_port_and_one_without_a_rate_warn_with_their_sum():
    """mlx5_0/1 ACTIVE at 56 Gb/s (FDR InfiniBand 4x) and mlx5_1/1 ACTIVE with no rate (counts 0): 56 + 0 = 56 Gb/s,
    below 100: one warning, no port down; the port without a rate shows '?'."""
    ports = [_port("mlx5_0", "ACTIVE", 56), _port("mlx5_1", "ACTIVE", None, "Ethernet")]
    finding = _one("network.rdma", Facts(ib_ports=ports))
    assert finding.status == Status.WARN
    assert finding.message == "Active RDMA bandwidth is 56 Gb/s per node, below 100 Gb/s."
    assert finding.message_values == {"total_gbit_per_s": 56, "minimum_gbit_per_s": 100}
    assert finding.observed == "mlx5_0/1 ACTIVE 56 Gb/s InfiniBand, mlx5_1/1 ACTIVE ? Gb/s Ethernet"
    assert finding.expected == ">= 100 Gb/s"
    assert finding.subject.nic is None
    _cites_nccl_networking(finding)


def test_ports_all_down_give_both_warnings_down_first():
    """Two DOWN ports at 200 Gb/s each: both not active (count 2), and the active bandwidth is 0 Gb/s: two
    warnings, the ports first, then the bandwidth."""
    ports = [_port("mlx5_0", "DOWN", 200), _port("mlx5_1", "DOWN", 200)]
    found = _judged("network.rdma", Facts(ib_ports=ports))
    assert [(f.status, f.message) for f in found] == [
        (Status.WARN, "2 RDMA port(s) not active: mlx5_0/1 DOWN, mlx5_1/1 DOWN."),
        (Status.WARN, "Active RDMA bandwidth is 0 Gb/s per node, below 100 Gb/s."),
    ]


def test_a_port_state_is_read_whatever_its_case_and_a_missing_state_is_not_active():
    """'Active' (mixed case) counts as ACTIVE; a port with no state at all is not active. 200 Gb/s active ≥ 100."""
    ports = [_port("mlx5_0", "Active", 200), _port("mlx5_1", None, 200)]
    finding = _one("network.rdma", Facts(ib_ports=ports))
    assert finding.message == "1 RDMA port(s) not active: mlx5_1/1 None."
    assert finding.subject.nic == "mlx5_1"


def test_fast_active_ports_pass_with_their_sum():
    """Two ACTIVE InfiniBand ports at 200 Gb/s (HDR): 200 + 200 = 400 Gb/s active, at least 100: one pass listing
    both ports."""
    ports = [_port("mlx5_0", "ACTIVE", 200), _port("mlx5_1", "ACTIVE", 200)]
    finding = _one("network.rdma", Facts(ib_ports=ports))
    described = "mlx5_0/1 ACTIVE 200 Gb/s InfiniBand, mlx5_1/1 ACTIVE 200 Gb/s InfiniBand"
    assert finding.status == Status.PASS
    assert finding.message == f"RDMA: {described}; 400 Gb/s active."
    assert finding.observed == described
    _cites_nccl_networking(finding)


# ------------------------------------------------------------------------------------------------ network.nic_speed

def test_the_recorded_h200_reports_no_nic_speed():
    """The H200's sysfs.txt: eth0 up with speed -1 (no speed reported), ifb0/ifb1 down, lo unknown. lo and ifb* are
    virtual, so the one physical NIC is eth0, without a speed: skipped, observed {'eth0': None}."""
    facts = build_facts({"sysfs.txt": (H200 / "sysfs.txt").read_text()})
    finding = _one("network.nic_speed", facts)
    assert finding.status == Status.SKIP
    assert finding.message == "No NIC reports a link speed (virtual NICs often do not)."
    assert finding.observed == {"eth0": None}


def test_the_fastest_physical_nic_that_is_up_decides_and_1_gbe_fails_without_rdma():
    """eno1 up at 1000 Mb/s, eno2 down (its 25000 Mb/s does not count), docker0 virtual at 10000 Mb/s (does not
    count), eno3 up at 0 Mb/s (no speed): the fastest is eno1, 1000 / 1000 = 1 Gb/s < 10 and no RDMA port: fail."""
    nics = [_nic("eno1", 1000), _nic("eno2", 25000, "down"), _nic("docker0", 10000, virtual=True), _nic("eno3", 0)]
    finding = _one("network.nic_speed", Facts(net_interfaces=nics, ib_ports=[]))
    assert finding.status == Status.FAIL
    assert finding.message == ("The fastest NIC runs at 1 Gb/s (eno1 1 Gb/s): too slow for multi-node training "
                               "(gradients of a 1B-parameter model take seconds per step).")
    assert finding.message_values["fastest_gbit_per_s"] == 1
    assert (finding.observed, finding.expected) == ("eno1 1 Gb/s", ">= 10 Gb/s, ideally RDMA")
    assert finding.fix == "Use this machine for single-node jobs, or add 100+ Gb/s RDMA NICs."
    _cites_nccl_networking(finding)


def test_a_nic_with_no_operstate_counts():
    """An interface whose operstate was not captured (None) is not known to be down: eth1 at 2500 Mb/s is the
    fastest, 2500 / 1000 = 2.5 Gb/s < 10 with no port list at all: fail."""
    finding = _one("network.nic_speed", Facts(net_interfaces=[_nic("eth1", 2500, None), _nic("eth0", 1000)]))
    assert finding.message_values["fastest_gbit_per_s"] == 2.5
    assert finding.observed == "eth1 2.5 Gb/s, eth0 1 Gb/s"


def test_exactly_10_gbe_is_enough_even_without_rdma():
    """eno1 at 2500 Mb/s and eno2 at 10000 Mb/s: the fastest is 10000 / 1000 = 10 Gb/s, not below 10: pass, listing
    both in order ('2.5 Gb/s', '10 Gb/s'), although there is no RDMA port."""
    finding = _one("network.nic_speed", Facts(net_interfaces=[_nic("eno1", 2500), _nic("eno2", 10000)], ib_ports=[]))
    assert finding.status == Status.PASS
    assert finding.message == "NICs: eno1 2.5 Gb/s, eno2 10 Gb/s."
    assert finding.observed == "eno1 2.5 Gb/s, eno2 10 Gb/s"
    _cites_nccl_networking(finding)


def test_a_slow_ethernet_nic_passes_when_the_machine_has_rdma():
    """1 GbE eno1 beside an RDMA port: the traffic between nodes goes over RDMA, so the slow NIC passes."""
    facts = Facts(net_interfaces=[_nic("eno1", 1000)], ib_ports=[_port("mlx5_0", "ACTIVE", 400)])
    finding = _one("network.nic_speed", facts)
    assert (finding.status, finding.message) == (Status.PASS, "NICs: eno1 1 Gb/s.")


# ------------------------------------------------------------------------------------------------------ network.gdr

def _gdr(modules: set[str], ports=(("mlx5_0", "ACTIVE", 400),)):
    facts = Facts(host=HostFacts(kernel_modules=modules), ib_ports=[_port(*port) for port in ports])
    return _one("network.gdr", facts)


@pytest.mark.parametrize("ports", [None, []])
def test_gpudirect_rdma_does_not_apply_without_an_rdma_device(ports):
    """No port list or an empty one: nothing to load, a pass whatever the modules."""
    facts = Facts(host=HostFacts(kernel_modules={"ib_uverbs"}), ib_ports=ports)
    finding = _one("network.gdr", facts)
    assert (finding.status, finding.message) == (Status.PASS, "No RDMA device, so GPUDirect RDMA does not apply.")


def test_both_peer_memory_modules_are_named_in_sorted_order():
    """nvidia_peermem (driver 470+) and the older Mellanox nv_peer_mem both loaded: sorted, '_' (0x5F) comes before
    'i' (0x69), so 'nv_peer_mem, nvidia_peermem'."""
    finding = _gdr({"nvidia_peermem", "nv_peer_mem", "ib_core"})
    assert (finding.status, finding.message) == (Status.PASS,
                                                 "GPUDirect RDMA module loaded: nv_peer_mem, nvidia_peermem.")


def test_the_old_nv_peer_mem_alone_is_enough():
    finding = _gdr({"nv_peer_mem", "mlx5_core"})
    assert (finding.status, finding.message) == (Status.PASS, "GPUDirect RDMA module loaded: nv_peer_mem.")


@pytest.mark.parametrize("modules", [{"ib_uverbs", "mlx5_ib"}, {"udmabuf", "mlx5_core"}])
def test_rdma_without_peermem_but_with_verbs_or_dmabuf_may_use_dma_buf(modules):
    """ib_uverbs (the verbs user interface) or a module with 'dmabuf' in its name (udmabuf): NCCL may use DMA-BUF,
    so a warning that says so, citing the GPUDirect RDMA docs and NCCL's page, with the modprobe fix."""
    finding = _gdr(modules)
    assert finding.status == Status.WARN
    assert finding.message == ("RDMA devices are present but nvidia_peermem is not loaded: NCCL can use DMA-BUF on "
                               "recent kernels/drivers, otherwise GPU↔NIC traffic is staged through host memory.")
    assert (finding.observed, finding.expected) == ("no nvidia_peermem",
                                                    "nvidia_peermem loaded or DMA-BUF in NCCL logs")
    assert finding.refs == [GPUDIRECT_RDMA_URL, f"NCCL environment and networking: {NCCL_ENV_URL}"]
    assert finding.fix.startswith("sudo modprobe nvidia_peermem (and add it to /etc/modules-load.d)")


def test_rdma_with_the_recorded_h200_modules_misses_gpudirect():
    """The H200's modules.txt lists nvidia_uvm and nvidia only: no peer-memory module, no verbs, no dmabuf; with an
    RDMA port that is the plain 'missing' warning."""
    facts = build_facts({"modules.txt": (H200 / "modules.txt").read_text()})
    assert facts.host.kernel_modules == {"nvidia_uvm", "nvidia"}
    facts.ib_ports = [_port("mlx5_0", "ACTIVE", 400)]
    finding = _one("network.gdr", facts)
    assert finding.status == Status.WARN
    assert finding.message == "RDMA devices are present but no GPUDirect RDMA module is loaded."
    assert (finding.observed, finding.expected) == ("no nvidia_peermem", None)
    assert finding.refs == [GPUDIRECT_RDMA_URL]
    assert finding.fix == "sudo modprobe nvidia_peermem"


# ----------------------------------------------------------------------------------------------------- network.port

def test_a_free_rendezvous_port_passes_and_names_29500():
    """torchrun's default --master-port is 29500 (PyTorch torchrun docs)."""
    finding = _one("network.port", Facts(rendezvous_port_free=True))
    assert finding.status == Status.PASS
    assert finding.message == "TCP port 29500 (torchrun's default rendezvous port) is free to bind."


def test_a_taken_rendezvous_port_warns_with_the_ss_command():
    finding = _one("network.port", Facts(rendezvous_port_free=False))
    assert finding.status == Status.WARN
    assert finding.message == ("TCP port 29500 is already in use: torchrun's default rendezvous would fail with "
                               "'address already in use'.")
    assert (finding.observed, finding.expected) == ("in use", "free")
    assert finding.fix.startswith("Find the holder with `ss -ltnp 'sport = :29500'`")
    assert len(finding.refs) == 1 and "torch/distributed/run.py" in finding.refs[0]


def test_an_unknown_port_state_is_not_judged():
    finding = _one("network.port", Facts())
    assert finding.status == Status.SKIP and finding.message_id == "registry.not_judged"
