"""InfiniBand/RoCE rails (issue 33): ibstat, ibv_devinfo and sysfs into ports, judged by checks/ib_rails.py.

The ibstat and ibv_devinfo texts are published outputs, each with its source; the sysfs captures follow the kernel's
file layout (Documentation/ABI/stable/sysfs-class-infiniband: `4: ACTIVE`, `5: LinkUp`, `400 Gb/sec (4X NDR)`)."""

from __future__ import annotations

from conftest import PUBLIC
from gpuready.checks.ib_rails import nccl_device_list
from gpuready.checks.registry import run_checks
from gpuready.evidence.build import build_facts
from gpuready.evidence.reader import read_bundle
from gpuready.evidence.sniff import kind_of
from gpuready.facts.network_files import parse_ib_sysfs, parse_ibv_devinfo
from gpuready.facts.types import Facts, IbPort, NetInterface
from gpuready.model import Status

IB = PUBLIC / "ib-rails"
IB_IDS = ["network.rail_down", "network.rail_rate", "network.link_layer_mixed", "network.ib_counters",
          "network.nccl_devices"]

# NVIDIA/nccl-tests#128 ("nccl-tests on different GPUs"), the poster's ibstat: two ConnectX-6 (MT4123), one down.
IBSTAT_ONE_DOWN = (IB / "ibstat-nccl-tests-128.txt").read_text()

# kvcache-ai/Mooncake#1999, the poster's ibstat (RoCE): two ConnectX-7 (MT4129) Active on Ethernet, and a ConnectX-6 Dx
# (MT4125) that is down and of which no port is up (a card not cabled: no rail). Its last port's lines after
# `Physical state` were cut in the thread.
IBSTAT_ROCE = (IB / "ibstat-mooncake-1999.txt").read_text()

# leptonai/gpud PR #482 ("handle Polling state"): a ConnectX-7 port that is Down and Polling, the only port shown.
IBSTAT_POLLING = (IB / "ibstat-gpud-pr482.txt").read_text()

# deepseek-ai/DeepEP#60 ("RDMA bandwidth is not normal"), the poster's ibv_devinfo: a ConnectX-7 port down.
IBV_DEVINFO_DOWN = (IB / "ibv_devinfo-deepep-60.txt").read_text()


def _judged(facts: Facts) -> dict[str, list]:
    findings = run_checks(facts, only=IB_IDS)
    return {check_id: [f for f in findings if f.check_id == check_id and f.status in (Status.WARN, Status.FAIL)]
            for check_id in IB_IDS}


def _flagged(facts: Facts) -> dict[str, list]:
    return {check_id: found for check_id, found in _judged(facts).items() if found}


def _sysfs(ports: dict[str, dict[str, str]], models: dict[str, str]) -> str:
    """A `collect` sysfs.txt (head-style sections) in the kernel's layout: `<dev>/<port>` → file → content."""
    sections = [f"==> /sys/class/infiniband/{device}/hca_type <==\n{model}\n" for device, model in models.items()]
    for key, files in ports.items():
        device, port = key.split("/")
        sections += [f"==> /sys/class/infiniband/{device}/ports/{port}/{name} <==\n{value}\n"
                     for name, value in files.items()]
    return "\n".join(sections)


def _port_files(state: str = "4: ACTIVE", phys: str = "5: LinkUp", rate: str = "400 Gb/sec (4X NDR)",
                layer: str = "InfiniBand", **counters: str) -> dict[str, str]:
    files = {"state": state, "phys_state": phys, "rate": rate, "link_layer": layer}
    files.update({f"counters/{name}": value for name, value in counters.items()})
    return files


def _eight_rails(**changed: dict[str, str]) -> str:
    """An HGX H100 node's eight ConnectX-7 rails (MT4129), all Active at 400 Gb/s unless `changed`."""
    ports = {f"mlx5_{n}/1": changed.get(f"mlx5_{n}", _port_files()) for n in range(8)}
    return _sysfs(ports, {f"mlx5_{n}": "MT4129" for n in range(8)})


# ----------------------------------------------------------------------------------------------------------- parsers
def test_ibstat_ports_read_with_state_physical_state_rate_layer_and_model():
    ports = parse_ibv_devinfo(IBSTAT_ONE_DOWN)
    assert [(p.device, p.port, p.state, p.phys_state, p.rate_gbit_per_s, p.link_layer, p.hca_type) for p in ports] == [
        ("mlx5_0", 1, "ACTIVE", "LinkUp", 200.0, "InfiniBand", "MT4123"),
        ("mlx5_1", 1, "DOWN", "Disabled", 10.0, "InfiniBand", "MT4123")]
    polling = parse_ibv_devinfo(IBSTAT_POLLING)
    assert [(p.device, p.state, p.phys_state) for p in polling] == [("mlx5_10", "DOWN", "Polling")]


def test_ibv_devinfo_port_gets_its_model_from_vendor_part_id():
    ports = parse_ibv_devinfo(IBV_DEVINFO_DOWN)
    assert [(p.device, p.port, p.state, p.link_layer, p.hca_type) for p in ports] == [
        ("mlx5_0", 1, "DOWN", "InfiniBand", "MT4129")]


def test_sysfs_reads_phys_state_counters_and_hca_type():
    from gpuready.facts.host_files import split_sections
    text = _sysfs({"mlx5_3/1": _port_files(state="1: DOWN", phys="2: Polling", rate="10 Gb/sec (4X SDR)",
                                           symbol_error="17", link_downed="0")}, {"mlx5_3": "MT4129"})
    [port] = parse_ib_sysfs(split_sections(text))
    assert (port.state, port.phys_state, port.rate_gbit_per_s, port.hca_type) == ("DOWN", "Polling", 10.0, "MT4129")
    assert port.counters == {"symbol_error": 17, "link_downed": 0}


def test_pasted_ibstat_is_recognised_by_content_whatever_its_name(tmp_path):
    assert kind_of(IBSTAT_ONE_DOWN) == "ibv_devinfo.txt"
    assert kind_of(IBSTAT_POLLING) == "ibv_devinfo.txt"
    assert kind_of("CA 'mlx5_0' is what I have\nno type line here\n") is None
    pasted = tmp_path / "out"
    pasted.write_text(IBSTAT_ONE_DOWN)
    facts = build_facts(read_bundle(pasted))
    flagged = _flagged(facts)
    assert set(flagged) == {"network.rail_down"}
    [finding] = flagged["network.rail_down"]
    assert finding.status is Status.FAIL and "mlx5_1/1 DOWN (Disabled)" in finding.message
    assert finding.subject.nic == "mlx5_1"


# ------------------------------------------------------------------------------------------------------------ checks
def test_roce_ethernet_only_machine_gets_no_finding():
    """Mooncake#1999: the down MT4125 has no Active sibling (no rail); two Ethernet rails are not 'mixed'."""
    facts = Facts(ib_ports=parse_ibv_devinfo(IBSTAT_ROCE), env={})
    assert _flagged(facts) == {}


def test_single_nic_and_nic_less_machines_get_no_finding():
    assert _flagged(Facts(ib_ports=parse_ibv_devinfo(IBSTAT_POLLING), env={})) == {}
    assert _flagged(Facts(ib_ports=parse_ibv_devinfo(IBV_DEVINFO_DOWN), env={})) == {}
    assert _flagged(Facts(ib_ports=[], env={}, net_interfaces=[])) == {}


def test_all_rails_active_at_full_rate_gets_no_finding():
    facts = build_facts({"sysfs.txt": _eight_rails()})
    assert len(facts.ib_ports) == 8 and _flagged(facts) == {}


def test_polling_rail_fails_and_slow_rail_warns_by_name():
    text = _eight_rails(mlx5_3=_port_files(state="1: DOWN", phys="2: Polling", rate="10 Gb/sec (4X SDR)"),
                        mlx5_6=_port_files(rate="200 Gb/sec (2X NDR)"))
    flagged = _flagged(build_facts({"sysfs.txt": text}))
    assert set(flagged) == {"network.rail_down", "network.rail_rate"}
    [down] = flagged["network.rail_down"]
    assert down.status is Status.FAIL and "mlx5_3/1 DOWN (Polling)" in down.message and "1 of the machine's 8" in \
        down.message
    [slow] = flagged["network.rail_rate"]
    assert slow.status is Status.WARN and "mlx5_6/1 200 Gb/s" in slow.message and "400 Gb/s" in slow.message
    assert "mlx5_3" not in slow.message  # a down port's nominal rate is no negotiated rate


def test_a_dual_port_adapter_cabled_once_is_no_lost_rail():
    """Eight single-port rails plus a dual-port ConnectX-7 (MT4129) for storage whose second port is not cabled (Down,
    Disabled): its adapter is on the fabric through port 1, so no rail is lost; network.rdma names the idle port
    (a warning), network.rail_down says nothing. The same port on an adapter with no Active port is a lost rail."""
    ports = {f"mlx5_{n}/1": _port_files() for n in range(8)}
    ports["mlx5_8/1"] = _port_files()
    ports["mlx5_8/2"] = _port_files(state="1: DOWN", phys="3: Disabled")
    models = {f"mlx5_{n}": "MT4129" for n in range(9)}
    facts = build_facts({"sysfs.txt": _sysfs(ports, models)})
    assert "network.rail_down" not in _flagged(facts)
    rdma = [f for f in run_checks(facts) if f.check_id == "network.rdma" and f.status is Status.WARN]
    assert len(rdma) == 1 and "mlx5_8/2" in rdma[0].message
    ports["mlx5_8/1"] = _port_files(state="1: DOWN", phys="3: Disabled")
    lost = _flagged(build_facts({"sysfs.txt": _sysfs(ports, models)}))["network.rail_down"]
    assert [f.status for f in lost] == [Status.FAIL] and "mlx5_8/1" in lost[0].message


def test_error_counters_from_a_bundle_warn_and_never_fail():
    text = _eight_rails(mlx5_2=_port_files(symbol_error="1043", link_downed="2", port_rcv_errors="0"))
    flagged = _flagged(build_facts({"sysfs.txt": text}))
    assert set(flagged) == {"network.ib_counters"}
    [finding] = flagged["network.ib_counters"]
    assert finding.status is Status.WARN
    assert "mlx5_2/1 link_downed=2, mlx5_2/1 symbol_error=1043" in finding.message
    assert "since boot" in finding.message and "port_rcv_errors" not in finding.message


def test_mixed_link_layer_warns_unless_nccl_ib_hca_keeps_one():
    text = _eight_rails(mlx5_7=_port_files(layer="Ethernet", rate="400 Gb/sec (4X NDR)"))
    facts = build_facts({"sysfs.txt": text})
    [mixed] = _flagged(facts)["network.link_layer_mixed"]
    assert mixed.status is Status.WARN and "Ethernet: mlx5_7/1" in mixed.message
    facts.env = {"NCCL_IB_HCA": "=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6"}
    assert _flagged(facts) == {}
    facts.env = {"NCCL_IB_HCA": "^=mlx5_7"}
    assert _flagged(facts) == {}


def _roce_with_interfaces(env: dict[str, str]) -> Facts:
    nics = [NetInterface(name=name, speed_mbit_per_s=None, operstate="up") for name in ("ens3", "lo", "bond0")]
    return Facts(ib_ports=parse_ibv_devinfo(IBSTAT_ROCE), net_interfaces=nics, env=env)


def test_nccl_settings_naming_devices_the_machine_lacks_fail():
    for env, missing in [({"NCCL_IB_HCA": "mlx5_8"}, "mlx5_8"), ({"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:2"}, "mlx5_1:2"),
                         ({"NCCL_IB_HCA": "=mlx5_1,mlx5_2"}, "mlx5_2"), ({"NCCL_SOCKET_IFNAME": "eth0"}, "eth0"),
                         ({"NCCL_SOCKET_IFNAME": "=bond"}, "bond")]:
        [finding] = _flagged(_roce_with_interfaces(env))["network.nccl_devices"]
        assert finding.status is Status.FAIL and f"devices this machine does not have: {missing} (" in finding.message
    for env in [{"NCCL_IB_HCA": "mlx5"}, {"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}, {"NCCL_IB_HCA": "^mlx5_9"},
                {"NCCL_SOCKET_IFNAME": "en,bond"}, {"NCCL_SOCKET_IFNAME": "^docker,lo"},
                {"NCCL_SOCKET_IFNAME": "=bond0"}]:
        assert _flagged(_roce_with_interfaces(env)) == {}, env


def test_nccl_ib_hca_on_a_machine_without_rdma_fails():
    facts = Facts(ib_ports=[], net_interfaces=[], env={"NCCL_IB_HCA": "mlx5_0"})
    [finding] = _flagged(facts)["network.nccl_devices"]
    assert "mlx5_0" in finding.message and "present: -" in finding.message


def test_nccl_device_list_syntax():
    assert nccl_device_list("^=mlx5_0:1,mlx5_1") == (True, True, [("mlx5_0", 1), ("mlx5_1", None)])
    assert nccl_device_list("mlx5") == (False, False, [("mlx5", None)])


def test_chinese_texts_keep_device_names_and_counters():
    from gpuready.i18n import text_in
    text = text_in("zh", "network.ib_counters.nonzero", {"counters": "mlx5_2/1 symbol_error=1043"})
    assert "mlx5_2/1 symbol_error=1043" in text and "累计" in text


def test_ib_port_facts_have_defaults_for_old_bundles():
    port = IbPort(device="mlx5_0", port=1, state="ACTIVE", rate_gbit_per_s=400.0)
    assert port.phys_state is None and port.hca_type is None and port.counters == {}
