"""The NCCL_DEBUG log reader of `gpuready diagnose`: published logs (tests/fixtures/diagnose/nccl) and constructed
lines, one case per rule."""

from pathlib import Path

import pytest

from gpuready.facts import nccl_log as parse
from gpuready.facts.log_lines import feed_text
from helpers import judged
from gpuready.facts.nccl_log_reader import MAX_KEYS, NcclLogReader

NCCL = Path(__file__).parent / "fixtures" / "diagnose" / "nccl"


def run(text, source="nccl.log", **options):
    reader = feed_text(NcclLogReader(), source, text)
    return reader, judged(reader, host="ctx", **options)


def fixture(name):
    return run((NCCL / name).read_text(), source=name)


def of(findings, check_id):
    return [f for f in findings if f.check_id == check_id]


def lines(finding):
    return [(e.file, e.line) for e in finding.evidence]


# ------------------------------------------------------------------------------------------------ parsing


def test_prefixes_are_stripped_and_kept():
    event = parse.parse_line("[rank3]:node-b:4242:4300 [3] NCCL INFO NCCL version 2.21.5+cuda12.4")
    assert isinstance(event, parse.Version)
    assert (event.host, event.pid, event.dev, event.launcher_rank) == ("node-b", 4242, 3, 3)
    assert (event.version, event.cuda) == ("2.21.5", "12.4")
    event = parse.parse_line("[default0]:gpu1:10:11 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>")
    assert isinstance(event, parse.Interfaces) and event.launcher_rank == 0
    assert event.interfaces == (parse.Interface(name="eth0", address="10.0.0.1"),)
    event = parse.parse_line("[2026-04-22 21:34:20] h:1:2 [0] misc/shmutils.cc:132 NCCL WARN Error while creating "
                             "shared memory segment /dev/shm/nccl-WU88OE (size 9637888), error: No space left on device (28)")
    assert isinstance(event, parse.ShmError) and event.host == "h" and event.level == "WARN"
    assert (event.path, event.size_bytes, event.error) == ("/dev/shm/nccl-WU88OE", 9637888, "No space left on device (28)")


@pytest.mark.parametrize("text, kind, expected", [
    ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", "P2P", (0, 1, None)),
    ("h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read", "P2P", (0, 1, None)),
    ("h:1:2 [0] NCCL INFO Channel 00 : 3[3] -> 4[4] via SHM/direct/direct", "SHM", (3, 4, None)),
    ("h:1:2 [7] NCCL INFO Channel 03/0 : 7[b2000] -> 14[b1000] [send] via NET/IB/0/GDRDMA", "NET/IB", (7, 14, "send")),
    ("h:1:2 [0] NCCL INFO Channel 00 : 1[1e0] -> 0[1e0] [receive] via NET/Socket/0", "NET/Socket", (1, 0, "receive")),
    ("h:1:2 [0] NCCL INFO Channel 00 : 1[c2000] -> 0[c1000] via P2P/direct pointer", "P2P", (1, 0, None)),
    ("h:1:2 [2] NCCL INFO Ring 00 : 2[3d000] -> 3[3e000] via direct shared memory", "SHM", (2, 3, None)),
])
def test_transport_lines(text, kind, expected):
    event = parse.parse_line(text)
    assert isinstance(event, parse.Transport) and event.kind == kind
    assert (event.src_rank, event.dst_rank, event.direction) == expected


def test_other_line_kinds():
    comm = parse.parse_line("h:1:2 [3] NCCL INFO comm 0x7f00 rank 3 nranks 8 cudaDev 3 nvmlDev 3 busId 1b000 "
                            "commId 0x1 - Init COMPLETE")
    assert isinstance(comm, parse.CommInit) and (comm.rank, comm.nranks, comm.cuda_dev, comm.bus_id, comm.complete) \
        == (3, 8, 3, "1b000", True)
    ib = parse.parse_line("h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB em1:172.18.28.82<0>")
    assert isinstance(ib, parse.IbDevices) and ib.devices == ("mlx5_0:1/IB", "mlx5_1:1/IB")
    refused = parse.parse_line("h:1:2 [0] NCCL INFO Call to connect returned Connection refused, retrying")
    assert isinstance(refused, parse.ConnectError) and refused.retrying and refused.error == "Connection refused"
    failed = parse.parse_line("h:1:2 [0] misc/socket.cc:484 NCCL WARN Connect to 10.38.10.112<21724> failed : "
                              "Connection refused")
    assert isinstance(failed, parse.ConnectError) and failed.peer == "10.38.10.112<21724>" and not failed.retrying
    env = parse.parse_line("h:1:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0")
    assert isinstance(env, parse.EnvSet) and (env.name, env.value) == ("NCCL_SOCKET_IFNAME", "docker0")
    assert isinstance(parse.parse_line("h:1:2 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"),
                      parse.IbMissing)
    error = parse.parse_line("torch.distributed.DistBackendError: NCCL error: ncclSystemError: System call failed")
    assert isinstance(error, parse.ResultError) and error.code == "ncclSystemError" and error.host is None
    assert parse.parse_line("an ordinary line") is None


# ------------------------------------------------------------------------------------------------ published logs


def test_shm_published_ci_infra_with_consequence():
    _reader, findings = fixture("shm-ci-infra-490.log")
    host = "mt-l-x86iavx512-45-172-t4-4-csmpw-runner-g4sfw-workflow"
    [shm] = of(findings, "nccl.shm_too_small")
    assert shm.status.value == "fail" and shm.subject.host == host
    assert lines(shm) == [("shm-ci-infra-490.log", 1), ("shm-ci-infra-490.log", 3)]
    assert shm.observed["size_bytes"] == [9637888, 9637892] and "9,637,888 bytes" in shm.message
    assert "--shm-size=1g" in shm.fix and "--ipc=host" in shm.fix and "medium: Memory" in shm.fix
    [socket] = of(findings, "nccl.warn")
    assert socket.consequence_of == "nccl.shm_too_small" and lines(socket) == [("shm-ci-infra-490.log", 12)]
    assert {f.check_id for f in findings} == {"nccl.shm_too_small", "nccl.warn"}


def test_shm_published_nccl_tests_three_ranks():
    _reader, findings = fixture("shm-nccl-tests-166.log")
    [shm] = findings
    assert (shm.check_id, shm.status.value, shm.subject.host) == ("nccl.shm_too_small", "fail", "ubuntu")
    assert [e.line for e in shm.evidence] == [1, 9, 11, 19, 21] and shm.observed["lines"] == 5
    assert 5967872 in shm.observed["size_bytes"]


def test_loopback_and_connect_refused_published():
    _reader, findings = fixture("lo-connect-refused-horovod-584.log")
    [wrong] = of(findings, "nccl.wrong_interface")
    assert wrong.status.value == "fail" and wrong.subject.host == "paigcr-b-gpu-1012" and wrong.subject.nic == "lo"
    assert wrong.subject.rank == 2
    assert set(wrong.observed) == {"lo:127.0.0.1", "eth1:fe80::215:5dff:fe33:ff6d%eth1"}
    assert lines(wrong) == [("lo-connect-refused-horovod-584.log", 5), ("lo-connect-refused-horovod-584.log", 7)]
    [unreachable] = of(findings, "network.unreachable")
    assert unreachable.status.value == "fail" and unreachable.consequence_of == "nccl.wrong_interface"
    assert [e.line for e in unreachable.evidence] == [10, 17] and unreachable.observed["errors"] == ["Connection refused"]
    assert not of(findings, "nccl.warn")


def test_aws_socket_nodes_without_ib_published():
    reader, findings = fixture("ib-none-socket-nccl-226.log")
    [ib] = findings
    assert (ib.check_id, ib.status.value, ib.subject.host) == ("nccl.ib_missing", "warn", "ctx")
    assert len(ib.observed["hosts"]) == 8 and ib.observed["reasons"] == ["no_device"]
    assert "ibstat" in ib.fix and "--device=/dev/infiniband" in ib.fix
    assert [e.line for e in ib.evidence] == [1, 3, 6, 8, 9]
    assert len(reader.facts().host_address) == 7  # all in 172.31/16: no subnet finding


def test_p2p_hang_published():
    _reader, findings = fixture("p2p-hang-nccl-606.log")
    [hang] = of(findings, "nccl.p2p_hang")
    assert hang.status.value == "warn" and hang.subject.host == "nccl-tests"
    assert lines(hang) == [("p2p-hang-nccl-606.log", 18)]
    assert "ACSCtl" in hang.fix and "iommu=pt" in hang.fix and "not a cure" in hang.fix
    [transport] = of(findings, "nccl.transport")
    assert transport.status.value == "pass" and transport.observed["intra_node"] == {"P2P": 1}


def test_shm_instead_of_p2p_published():
    _reader, findings = fixture("p2p-level-loc-shm-nccl-606.log")
    [transport] = findings
    assert (transport.check_id, transport.status.value) == ("nccl.transport", "warn")
    assert "NCCL_P2P_LEVEL=LOC" in transport.message
    assert [e.line for e in transport.evidence] == [7, 14]
    assert "ACSCtl" in transport.fix


def test_libibverbs_and_loopback_in_containers_published():
    reader, findings = fixture("libibverbs-lo-horovod-789.log")
    [wrong] = of(findings, "nccl.wrong_interface")
    assert (wrong.status.value, wrong.subject.host, wrong.subject.nic) == ("fail", "e53b7da88fea", "lo")
    [ib] = of(findings, "nccl.ib_missing")
    assert ib.status.value == "warn" and ib.observed["hosts"] == ["51ca79e04561", "e53b7da88fea"]
    assert ib.observed["reasons"] == ["libibverbs"] and "rdma-core" in ib.fix
    assert [e.line for e in ib.evidence] == [1, 9, 13]
    assert {version for version, _line in reader.facts().versions.values()} == {"2.3.5"}
    assert reader.facts().rank_host == {0: "e53b7da88fea", 1: "e53b7da88fea", 3: "51ca79e04561"}


def test_ib_device_not_opened_in_docker_published():
    _reader, findings = fixture("ib-open-device-docker-nccl-451.log")
    [ib] = findings
    assert (ib.check_id, ib.status.value, ib.subject.host) == ("nccl.ib_missing", "fail", "ctx")
    assert "NCCL_IB_DISABLE=0" in ib.message or "cannot be opened" in ib.message
    assert [e.line for e in ib.evidence] == [2, 3, 4]
    assert "--device=/dev/infiniband" in ib.fix


def test_veth_link_local_published():
    reader, findings = fixture("veth-linklocal-pytorch-68893.log")
    [wrong] = of(findings, "nccl.wrong_interface")
    assert (wrong.status.value, wrong.subject.host, wrong.subject.nic) == ("fail", "ip-172-31-0-137", "veth75fa783")
    assert [e.line for e in wrong.evidence] == [5]
    assert {version for version, _line in reader.facts().versions.values()} == {"2.7.8"}
    [transport] = of(findings, "nccl.transport")
    assert transport.status.value == "pass" and transport.observed["inter_node"] == {"NET/Socket": 1}


def test_ib_in_use_published_is_quiet():
    reader, findings = fixture("ib-using-nccl-1925.log")
    assert findings == []
    assert set(reader.facts().ib_hosts) == {"nccl-sleep-c7d759db6-2bp29", "nccl-sleep-c7d759db6-cgz82"}
    assert reader.facts().rank_host[7] == "nccl-sleep-c7d759db6-cgz82" and reader.facts().nranks == 8


# ------------------------------------------------------------------------------------------------ constructed


def test_version_mismatch_interleaved_ranks():
    text = "\n".join([
        "[rank0]:node-a:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "[rank4]:node-b:200:200 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
        "[rank1]:node-a:101:101 [1] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "[rank0]:node-a:100:110 [0] NCCL INFO comm 0x1 rank 0 nranks 8 cudaDev 0 busId 1b000 - Init START",
        "[rank4]:node-b:200:210 [0] NCCL INFO comm 0x2 rank 4 nranks 8 cudaDev 0 busId 1b000 - Init START",
        "[rank5]:node-b:201:201 [1] NCCL INFO NCCL version 2.18.1+cuda12.1",
    ])
    _reader, findings = run(text)
    [mismatch] = findings
    assert (mismatch.check_id, mismatch.status.value) == ("nccl.version_mismatch", "fail")
    assert mismatch.observed == {"2.18.1": ["node-b rank 4", "node-b rank 5"],
                                 "2.21.5": ["node-a rank 0", "node-a rank 1"]}
    assert [e.line for e in mismatch.evidence] == [2, 1]


def test_same_version_different_cuda_suffix_is_no_mismatch():
    _reader, findings = run("a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                            "b:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.1")
    assert of(findings, "nccl.version_mismatch") == []


def test_docker0_interface_across_hosts():
    text = ("node-a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0\n"
            "node-a:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
            "node-b:2:2 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0>\n")
    _reader, findings = run(text)
    [wrong] = findings
    assert (wrong.check_id, wrong.status.value, wrong.subject.host, wrong.subject.nic) == \
        ("nccl.wrong_interface", "fail", "node-a", "docker0")
    assert "Docker bridge" in wrong.message and "NCCL_SOCKET_IFNAME" in wrong.fix
    assert [e.line for e in wrong.evidence] == [2]


def test_single_node_loopback_is_only_a_warning():
    _reader, findings = run("solo:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>")
    [wrong] = findings
    assert (wrong.check_id, wrong.status.value) == ("nccl.wrong_interface", "warn")


def test_subnets_differ_and_shared_container_address():
    _reader, findings = run("a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0>\n"
                            "b:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.3.7<0>")
    [wrong] = findings
    assert wrong.check_id == "nccl.wrong_interface" and "different subnets" in wrong.message
    assert wrong.observed == {"a": "10.1.0.5", "b": "192.168.3.7"} and [e.line for e in wrong.evidence] == [1, 2]
    _reader, findings = run("a:1:1 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>\n"
                            "b:1:1 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>")
    [wrong] = findings
    assert wrong.status.value == "fail" and "--network=host" in wrong.fix


def test_link_local_169_254():
    _reader, findings = run("a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth1:169.254.3.1<0>\n"
                            "b:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>")
    [wrong] = findings
    assert wrong.subject.host == "a" and "link-local" in wrong.message and wrong.status.value == "fail"


def test_connect_refused_retrying_then_final():
    text = ("a:1:1 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"
            "a:1:1 [0] misc/socket.cc:484 NCCL WARN Connect to 10.0.0.9<4000> failed : Connection timed out\n"
            "b:1:1 [0] NCCL INFO Call to connect returned Connection refused, retrying\n")
    _reader, findings = run(text)
    by_host = {f.subject.host: f for f in of(findings, "network.unreachable")}
    assert by_host["a"].status.value == "fail" and by_host["a"].observed["peers"] == ["10.0.0.9<4000>"]
    assert by_host["b"].status.value == "warn" and by_host["b"].consequence_of is None
    assert [e.line for e in by_host["a"].evidence] == [1, 2]


def test_socket_between_nodes_where_ib_expected():
    text = ("a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
            "b:1:1 [0] NCCL INFO NET/IB : No device found.\n"
            "b:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n"
            "b:1:5 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0\n"
            "a:1:5 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n")
    _reader, findings = run(text)
    [ib] = of(findings, "nccl.ib_missing")
    assert (ib.status.value, ib.subject.host) == ("fail", "b") and "a uses NET/IB" in ib.message
    [transport] = of(findings, "nccl.transport")
    assert transport.status.value == "fail" and "NET/Socket" in transport.message
    assert [e.line for e in transport.evidence] == [2, 4]


def test_ib_and_p2p_everywhere_passes():
    text = "\n".join(
        [f"n{r // 2}:1{r}:1{r} [{r % 2}] NCCL INFO comm 0x1 rank {r} nranks 4 cudaDev {r % 2} busId 1b000 - Init START"
         for r in range(4)]
        + ["n0:10:20 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
           "n1:12:22 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[1] via P2P/IPC",
           "n0:11:21 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/0/GDRDMA"]
        + [f"n{r // 2}:1{r}:1{r} [{r % 2}] NCCL INFO comm 0x1 rank {r} nranks 4 cudaDev {r % 2} busId 1b000 - Init COMPLETE"
           for r in range(4)])
    _reader, findings = run(text)
    [transport] = findings
    assert transport.status.value == "pass"
    assert transport.observed == {"intra_node": {"P2P": 2}, "inter_node": {"NET/IB": 1}, "communicators": {
        "nranks=4": {"nranks": 4, "hosts": ["n0", "n1"], "transports": ["P2P", "NET/IB"], "gdr": True}}}


def test_shm_within_node_blames_could_not_enable_p2p():
    text = ("h:1:1 [0] NCCL INFO Could not enable P2P between dev 0(=41000) and dev 1(=81000)\n"
            "h:1:1 [0] NCCL INFO Channel 00 : 0[41000] -> 1[81000] via SHM/direct/direct\n")
    _reader, findings = run(text)
    [transport] = findings
    assert transport.status.value == "warn" and "could not enable P2P" in transport.message
    assert [e.line for e in transport.evidence] == [2, 1]


def test_p2p_then_watchdog_timeout_fails():
    text = ("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            "h:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n"
            "[rank0]:[E ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600060 milliseconds before timing out.\n")
    _reader, findings = run(text)
    [hang] = of(findings, "nccl.p2p_hang")
    assert hang.status.value == "fail" and [e.line for e in hang.evidence] == [1, 2, 3]


def test_p2p_then_init_complete_is_no_hang():
    text = ("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n")
    _reader, findings = run(text)
    assert of(findings, "nccl.p2p_hang") == []


def test_remote_exit_after_shm_root_and_plain_warns():
    text = ("h:1:1 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-abc "
            "(size 9637888), error: No space left on device (28)\n"
            "h:2:2 [1] NCCL WARN NET/Socket : remote process exited or there was a network error\n"
            "other:3:3 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with status=12\n")
    _reader, findings = run(text)
    warns = of(findings, "nccl.warn")
    remote = next(f for f in warns if "remote process exited" in f.message)
    assert remote.consequence_of == "nccl.shm_too_small" and [e.line for e in remote.evidence] == [2]
    plain = next(f for f in warns if "Got completion" in f.message)
    assert plain.subject.host == "other" and plain.consequence_of == "nccl.shm_too_small"


def test_unexplained_warns_grouped_and_error_codes_fail():
    text = "\n".join([f"h:1:1 [{i}] misc/foo.cc:1 NCCL WARN Something odd on channel {i}" for i in range(7)]
                     + ["RuntimeError: NCCL error in: x.cpp:1, ncclInternalError: internal error"])
    _reader, findings = run(text)
    odd = next(f for f in findings if "Something odd" in f.message)
    assert odd.status.value == "warn" and odd.consequence_of is None and odd.observed["lines"] == 7
    assert len(odd.evidence) == 5
    code = next(f for f in findings if "ncclInternalError" in f.message)
    assert code.status.value == "fail" and code.subject.host == "ctx" and [e.line for e in code.evidence] == [8]


def test_state_stays_bounded():
    reader = NcclLogReader()
    text = "\n".join(f"h{i}:1:1 [0] NCCL WARN distinct failure kind {chr(65 + i % 26)}{chr(65 + i // 26 % 26)} x"
                     for i in range(MAX_KEYS + 500))
    feed_text(reader, "big.log", text)
    assert len(reader.facts().hosts) == MAX_KEYS and len(reader.facts().warns) <= 64 and reader.facts().warns_dropped > 0
    findings = judged(reader, host="ctx")
    assert any("were counted but not kept" in f.message for f in findings)
    assert all(len(f.evidence) <= 5 for f in findings)


def test_every_finding_has_evidence():
    for path in sorted(NCCL.glob("*.log")):
        _reader, findings = fixture(path.name)
        for finding in findings:
            assert finding.evidence, (path.name, finding.check_id)
