"""`diagnose net`: only loopback is contacted (127.0.0.0/8, ::1); everything else is constructed or monkeypatched."""

import socket

import pytest

from gpuready.model import Report, Status
from gpuready.verbs.diagnose import net
from gpuready.verbs.diagnose.net import run_net, shared_path_digest
from gpuready.facts.net_interfaces import IfAddr, nccl_socket_interfaces
from gpuready.facts.net_interfaces import nccl_settings as real_nccl_settings

V4, V6 = socket.AF_INET, socket.AF_INET6


def statuses(report: Report, check_id: str) -> list[str]:
    return [f.status.value for f in report.findings if f.check_id == check_id]


@pytest.fixture(autouse=True)
def quiet_host(monkeypatch):
    """No firewall tools run and no NCCL settings leak in from the machine running the tests."""
    monkeypatch.setattr(net, "read_firewall_rules",
                        lambda timeout_s=3.0: {"nft": {"readable": False, "why": "Operation not permitted"},
                                               "iptables": {"readable": False, "why": "Permission denied"}})
    monkeypatch.setattr(net, "nccl_settings", lambda environ=None: {})


@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    yield server.getsockname()[1]
    server.close()


def closed_port() -> int:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # bound, never listened, now closed: a connect is refused
    return port


# --- live probes on loopback ----------------------------------------------------------------------------------------

def test_listening_port_passes(listener):
    report = run_net(["127.0.0.1"], port=listener, timeout_s=2.0)
    assert statuses(report, "network.resolve") == ["pass"]
    assert statuses(report, "network.peer_port") == ["pass"]
    assert statuses(report, "network.firewall") == []
    assert statuses(report, "nccl.wrong_interface") == ["skip"]  # the peer is this host
    assert statuses(report, "network.firewall_rules") == ["skip"]
    assert statuses(report, "network.mtu") == ["pass"]  # lo: 65536
    assert report.facts["peers"][0]["route_interface"] == net.interface_of("127.0.0.1", net.local_interface_entries())
    assert report.to_dict()["findings"]


def test_report_matches_schema(listener, tmp_path):
    import json
    from importlib import resources
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(resources.files("gpuready").joinpath("schema/report.schema.json").read_text())
    report = run_net(["127.0.0.1", "no-such-node.invalid"], port=listener, shared_path=_tree(tmp_path / "s"))
    jsonschema.validate(json.loads(json.dumps(report.to_dict(), allow_nan=False)), schema)


def test_ipv6_loopback(listener):
    if not socket.has_ipv6:
        pytest.skip("no IPv6")
    server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    try:
        server.bind(("::1", 0))
    except OSError:
        server.close()
        pytest.skip("::1 not configured")
    server.listen(1)
    try:
        report = run_net(["::1"], port=server.getsockname()[1], timeout_s=2.0)
    finally:
        server.close()
    assert statuses(report, "network.resolve") == ["pass"]
    assert statuses(report, "network.peer_port") == ["pass"]


def test_closed_port_is_refused():
    report = run_net(["127.0.0.1"], port=closed_port(), timeout_s=2.0)
    assert statuses(report, "network.peer_port") == ["fail"]
    port_finding = next(f for f in report.findings if f.check_id == "network.peer_port")
    assert port_finding.observed["outcome"] == "refused"
    assert "refused" in port_finding.message
    assert statuses(report, "network.firewall") == []
    assert report.exit_code() == 1


def test_unresolvable_name_fails():
    report = run_net(["no-such-node.invalid"], port=closed_port(), timeout_s=1.0)
    assert statuses(report, "network.resolve") == ["fail"]
    assert statuses(report, "network.peer_port") == []  # nothing to connect to
    assert statuses(report, "nccl.wrong_interface") == []


def test_timeout_is_a_firewall_warning(monkeypatch):
    def dropped(address, timeout=None, source_address=None, **kwargs):
        assert address[0] == "127.0.0.1"
        raise socket.timeout("timed out")

    monkeypatch.setattr(socket, "create_connection", dropped)
    report = run_net(["127.0.0.1"], port=29500, timeout_s=0.5)
    assert statuses(report, "network.peer_port") == ["fail"]
    assert statuses(report, "network.firewall") == ["warn"]
    firewall = next(f for f in report.findings if f.check_id == "network.firewall")
    assert "nft" in firewall.fix and "iptables" in firewall.fix and "ufw" in firewall.fix
    assert "firewall-cmd" in firewall.fix and "security group" in firewall.fix


def test_name_mapped_to_loopback_warns(monkeypatch):
    real = socket.getaddrinfo

    def fake(host, *args, **kwargs):  # /etc/hosts: `127.0.1.1 node7`
        if host == "node7.example":
            return [(V4, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    report = run_net(["node7.example", "localhost"], port=closed_port(), timeout_s=1.0)
    assert statuses(report, "network.resolve") == ["warn", "pass"]


def test_own_hostname_on_loopback_warns(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "node7.example")
    monkeypatch.setattr(net, "resolve", lambda name: ["127.0.1.1"])
    report = run_net([], port=29500)
    assert statuses(report, "network.hostname") == ["warn"]
    assert report.host == "node7.example"


def test_loopback_names():
    assert net.is_loopback_name("localhost") and net.is_loopback_name("127.0.0.1") and net.is_loopback_name("::1")
    assert net.is_loopback_name("foo.localhost")
    assert not net.is_loopback_name("node7") and not net.is_loopback_name("10.0.0.1")


def test_firewall_rules_judged():
    closed = {"iptables": {"readable": True, "text": "-P INPUT DROP\n-A INPUT -p tcp --dport 22 -j ACCEPT\n"}}
    assert net.judge_firewall_rules(closed, 29500)[0] == Status.WARN
    opened = {"iptables": {"readable": True, "text": "-P INPUT DROP\n-A INPUT -p tcp --dport 29500 -j ACCEPT\n"}}
    assert net.judge_firewall_rules(opened, 29500)[0] == Status.PASS
    open_nft = {"nft": {"readable": True, "text": "table inet filter {\n chain input {\n  type filter hook input "
                                                  "priority 0; policy accept;\n }\n}\n"}}
    assert net.judge_firewall_rules(open_nft, 29500)[0] == Status.PASS
    assert net.judge_firewall_rules({"nft": {"readable": False, "why": "x"}}, 29500)[0] == Status.SKIP


# --- NCCL's interface choice, on constructed interface lists ------------------------------------------------------

LO = [IfAddr("lo", V4, "127.0.0.1", "255.0.0.0"), IfAddr("lo", V6, "::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")]
DOCKER0 = [IfAddr("docker0", V4, "172.17.0.1", "255.255.0.0")]
ETH0 = [IfAddr("eth0", V4, "10.0.0.5", "255.255.255.0"), IfAddr("eth0", V6, "fe80::1%eth0", "ffff:ffff:ffff:ffff::")]
ETH1 = [IfAddr("eth1", V4, "192.168.1.5", "255.255.255.0")]
ETH01 = [IfAddr("eth01", V4, "10.9.0.5", "255.255.255.0")]
IB0 = [IfAddr("ib0", V4, "10.1.0.5", "255.255.255.0")]
PACKET = [IfAddr("eth0", 17, "02:00:00:00:00:01")]  # AF_PACKET: not an IP address, ignored


def test_nccl_lo_only():
    assert nccl_socket_interfaces(LO) == ["lo"]


def test_nccl_default_skips_lo_and_docker():
    assert nccl_socket_interfaces(LO + DOCKER0 + ETH0) == ["eth0"]
    assert nccl_socket_interfaces(DOCKER0 + LO + ETH1 + ETH0)[0] == "eth1"  # getifaddrs order, not sorted
    assert nccl_socket_interfaces(LO + DOCKER0) == ["docker0"]  # docker before lo when nothing else


def test_nccl_default_prefers_ib():
    assert nccl_socket_interfaces(LO + ETH0 + IB0) == ["ib0"]


def test_nccl_default_comm_id_subnet():
    assert nccl_socket_interfaces(LO + ETH0 + ETH1, comm_id="192.168.1.9:23456") == ["eth1"]


def test_nccl_ifname_exclude():
    assert nccl_socket_interfaces(LO + DOCKER0 + ETH0 + ETH1, socket_ifname="^docker,lo") == ["eth0", "eth1"]
    assert nccl_socket_interfaces(LO + DOCKER0 + ETH0, socket_ifname="^=docker0") == ["lo", "eth0"]


def test_nccl_ifname_exact_and_prefix():
    assert nccl_socket_interfaces(LO + ETH0 + ETH01 + ETH1 + PACKET, socket_ifname="=eth0") == ["eth0"]
    assert nccl_socket_interfaces(LO + ETH0 + ETH01 + ETH1, socket_ifname="eth0") == ["eth0", "eth01"]
    assert nccl_socket_interfaces(LO + ETH0 + ETH1, socket_ifname="=eth1,eth0") == ["eth0", "eth1"]
    assert nccl_socket_interfaces(LO + ETH0, socket_ifname="=ens5") == []
    assert nccl_socket_interfaces(LO + ETH0, socket_ifname="lo") == ["lo"]  # IPv6 ::1 skipped, 127.0.0.1 kept


def test_nccl_ifname_family():
    v6_only = [IfAddr("eth0", V6, "fd00::5", "ffff:ffff:ffff:ffff::"), IfAddr("eth1", V4, "10.0.0.6", "255.0.0.0")]
    assert nccl_socket_interfaces(v6_only, socket_family="AF_INET") == ["eth1"]
    assert nccl_socket_interfaces(v6_only, socket_family="AF_INET6") == ["eth0"]


def test_nccl_settings_from_conf_file(tmp_path):
    conf = tmp_path / "nccl.conf"
    conf.write_text("NCCL_DEBUG=WARN\nNCCL_SOCKET_IFNAME==ens1f0\n")
    from_file = real_nccl_settings
    settings = from_file({"NCCL_CONF_FILE": str(conf)})
    assert settings["NCCL_SOCKET_IFNAME"] == "=ens1f0" and settings["NCCL_SOCKET_IFNAME.source"] == str(conf)
    assert from_file({"NCCL_CONF_FILE": str(conf), "NCCL_SOCKET_IFNAME": "eth"})["NCCL_SOCKET_IFNAME"] == "eth"


def test_wrong_interface_fails(monkeypatch):
    entries = LO + DOCKER0 + ETH0
    monkeypatch.setattr(net, "local_interface_entries", lambda: entries)
    monkeypatch.setattr(net, "resolve", lambda name: ["10.0.0.9"] if name == "node2" else ["10.0.0.5"])
    monkeypatch.setattr(net, "route_source", lambda address, port: "10.0.0.5")
    monkeypatch.setattr(net, "tcp_probe", lambda address, port, timeout_s: ("connected", None))
    monkeypatch.setattr(net, "mtu_of", lambda names: {name: 1500 for name in names})
    monkeypatch.setattr(net, "nccl_settings", lambda environ=None: {"NCCL_SOCKET_IFNAME": "docker",
                                                                      "NCCL_SOCKET_IFNAME.source": "environment"})
    report = run_net(["node2"])
    assert statuses(report, "nccl.wrong_interface") == ["fail"]
    finding = next(f for f in report.findings if f.check_id == "nccl.wrong_interface")
    assert finding.subject.nic == "docker0" and finding.expected == "eth0" and "=eth0" in finding.fix

    monkeypatch.setattr(net, "nccl_settings", lambda environ=None: {})
    report = run_net(["node2"])
    assert statuses(report, "nccl.wrong_interface") == ["pass"]
    assert statuses(report, "network.peer_port") == ["pass"]
    assert statuses(report, "network.mtu") == ["pass"]


def test_low_mtu_warns(monkeypatch):
    monkeypatch.setattr(net, "mtu_of", lambda names: {name: 1400 for name in names})
    report = run_net(["127.0.0.1"], port=closed_port(), timeout_s=1.0)
    assert statuses(report, "network.mtu") == ["warn"]


# --- shared path --------------------------------------------------------------------------------------------------

def _tree(root, payload=b"weights" * 1000):
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("hello\n")
    (root / "sub" / "model.bin").write_bytes(payload)
    return root


def test_shared_path_digest_equal_and_changed(tmp_path):
    one = _tree(tmp_path / "one")
    two = _tree(tmp_path / "two")
    assert shared_path_digest(one)["digest"] == shared_path_digest(two)["digest"]
    data = bytearray((two / "sub" / "model.bin").read_bytes())
    data[100] ^= 1
    (two / "sub" / "model.bin").write_bytes(bytes(data))
    assert shared_path_digest(one)["digest"] != shared_path_digest(two)["digest"]


def test_shared_path_digest_bounded(tmp_path):
    root = _tree(tmp_path / "one", payload=b"x" * 5000)
    small = shared_path_digest(root, hash_bytes_per_file=1024)
    assert small["hashed_bytes"] == 1024 + 6 and small["files"] == 2 and small["bytes"] == 5006
    capped = shared_path_digest(root, max_files=1)
    assert capped["left_out"] == 1 and capped["method"]["content_limited"]


def test_shared_path_finding(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    root = _tree(tmp_path / "one")
    report = run_net([], shared_path=root)
    assert statuses(report, "network.shared_path") == ["pass"]
    assert report.facts["shared_path"]["digest"] == shared_path_digest(root)["digest"]
    assert "rank 1 of 2" in next(f.message for f in report.findings if f.check_id == "network.shared_path")
    missing = run_net([], shared_path=tmp_path / "absent")
    assert statuses(missing, "network.shared_path") == ["fail"]
