"""The findings of diagnose's NCCL log reader, its nccl-tests reader and `diagnose net` come from the message catalogue
(diagnose_nccl.po, diagnose_nccl_tests.po, diagnose_net.po): the English reads as it always did, and the Chinese
rendering of the report document leaves no English sentence behind, only names, commands and what the logs said."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from gpuready.i18n import text_in
from gpuready.model import Finding, Report
from gpuready.report.translate import in_language
from gpuready.verbs.diagnose import net
from gpuready.facts.log_lines import feed_text
from helpers import judged
from gpuready.facts.nccl_log_reader import NcclLogReader
from gpuready.facts.nccl_tests_reader import NcclTestsReader

FIXTURES = Path(__file__).parent / "fixtures"

# Constructed NCCL_DEBUG logs, one per kind of finding the reader's catalogue text has.
LOGS = {
    "version_mismatch": "a:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\nb:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "docker0": ("node-a:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to docker0\n"
                "node-a:1:1 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>\n"
                "node-b:2:2 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0>\n"),
    "one_node_loopback": "solo:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
    "subnets": ("a:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0>\n"
                "b:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.3.7<0>"),
    "shared_address": ("a:1:1 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>\n"
                       "b:1:1 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>"),
    "connect": ("a:1:1 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"
                "a:1:1 [0] misc/socket.cc:484 NCCL WARN Connect to 10.0.0.9<4000> failed : Connection timed out\n"
                "b:1:1 [0] NCCL INFO Call to connect returned Connection refused, retrying\n"),
    "socket_where_ib": ("a:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n"
                        "b:1:1 [0] NCCL INFO NET/IB : No device found.\n"
                        "b:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n"
                        "b:1:5 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0\n"
                        "a:1:5 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0\n"),
    "p2p_disabled": ("h:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1\n"
                     "h:1:1 [0] NCCL INFO Channel 00 : 0[41000] -> 1[81000] via SHM/direct/direct\n"
                     "h:1:1 [0] NCCL INFO Channel 01 : 0[41000] -> 2[81000] via SHM/direct/direct\n"),
    "p2p_unavailable": ("h:1:1 [0] NCCL INFO Could not enable P2P between dev 0(=41000) and dev 1(=81000)\n"
                        "h:1:1 [0] NCCL INFO Channel 00 : 0[41000] -> 1[81000] via SHM/direct/direct\n"),
    "p2p_hang": ("h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
                 "h:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC\n"
                 "[rank0]:[E ProcessGroupNCCL.cpp:1] [Rank 0] Watchdog caught collective operation timeout: "
                 "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600060 milliseconds before timing out.\n"),
    "shm_then_warns": ("h:1:1 [0] misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment "
                       "/dev/shm/nccl-abc (size 9637888), error: No space left on device (28)\n"
                       "h:2:2 [1] NCCL WARN NET/Socket : remote process exited or there was a network error\n"
                       "other:3:3 [0] transport/net_ib.cc:1 NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> "
                       "with status=12\n"),
    "unexplained": "\n".join([f"h:1:1 [{i}] misc/foo.cc:1 NCCL WARN Something odd on channel {i}" for i in range(3)]
                             + ["RuntimeError: NCCL error in: x.cpp:1, ncclInternalError: internal error"]),
    "dropped": "\n".join(f"h{i}:1:1 [0] NCCL WARN distinct failure kind {chr(65 + i % 26)}{chr(65 + i // 26)} x"
                         for i in range(80)),
}

# Words the Chinese keeps in English on purpose: a quoted NCCL error, a footer's label.
KEPT = ("Avg bus bandwidth", "no socket interface found")
_ENGLISH_RUN = re.compile(r"[A-Za-z][A-Za-z'-]*(?: +[A-Za-z][A-Za-z'-]*){2,}")


def _values(values: object) -> list[str]:
    """The plain strings among a finding's values, nested ones included (names, log lines, file names)."""
    if isinstance(values, dict):
        inner = values.get("message_values", values) if isinstance(values.get("message_id"), str) else values
        return [text for value in inner.values() for text in _values(value)]
    if isinstance(values, list):
        return [text for value in values for text in _values(value)]
    return [values] if isinstance(values, str) and values else []


def english_left(text: str, values: dict) -> list[str]:
    """Runs of three or more English words in `text` once the values, backticked commands and KEPT are taken out."""
    for value in sorted(_values(values), key=len, reverse=True):
        text = text.replace(value, " ")
    text = re.sub(r"`[^`]*`", " ", text)
    for phrase in KEPT:
        text = text.replace(phrase, " ")
    return _ENGLISH_RUN.findall(text)


def nccl_findings(text: str, **options) -> list[Finding]:
    reader = feed_text(NcclLogReader(), "nccl.log", text)
    return judged(reader, host="ctx", **options)


def document(findings: list[Finding]) -> dict:
    """The findings as a report document holds them (JSON), which the console renders in the reader's language."""
    return json.loads(json.dumps(Report(tool_version="test", host="ctx", findings=findings).to_dict()))


def chinese(findings: list[Finding]) -> list[dict]:
    return in_language(document(findings), "zh")["findings"]


def nccl_tests_findings(text: str, **options) -> list[Finding]:
    reader = feed_text(NcclTestsReader(), "run.txt", text)
    return judged(reader, host="ctx", **options)


def all_findings() -> list[Finding]:
    found = [finding for text in LOGS.values() for finding in nccl_findings(text)]
    for path in sorted((FIXTURES / "diagnose" / "nccl").glob("*.log")):
        found += nccl_findings(path.read_text())
    a3mega = (FIXTURES / "diagnose" / "nccl_tests" / "all_reduce_16x_h100_a3mega.txt").read_text()
    one_row = "   134217728      33554432     float     sum      -1   1211.2  110.81  110.81    N/A   1211.8  110.76  110.76    N/A\n"
    for text, options in (
            (a3mega, {}), (a3mega, {"expect_busbw_gb_per_s": 300}), (a3mega, {"expect_busbw_gb_per_s": 450}),
            (a3mega.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 50 FAILED")
             .replace("      0    47743", "     12    47743"), {}),
            ("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 70.742 \n", {}),
            ((FIXTURES / "diagnose" / "nccl_tests" / "all_gather_16x_gke_no_header.txt").read_text(), {}),
            ((FIXTURES / "public" / "pcie-4090-no-p2p" / "all_reduce_perf.txt").read_text(), {}),
            (one_row, {}), (one_row.replace("sum      -1", "sum       0"), {})):
        found += nccl_tests_findings(text, **options)
    return found


def test_every_finding_has_an_id_and_renders_in_chinese_without_english_sentences():
    findings = all_findings()
    kinds = {finding.message_id for finding in findings}
    assert len(kinds) >= 25, sorted(kinds)
    for finding, shown in zip(findings, chinese(findings)):
        assert finding.message_id, finding.message
        assert text_in("en", finding.message_id, finding.message_values) == finding.message
        assert shown["message"] != finding.message and re.search(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", shown["message"])
        assert not english_left(shown["message"], finding.message_values), (finding.message_id, shown["message"])
        assert (shown["fix"] is None) == (finding.fix is None), finding.message_id
        if finding.fix:
            assert not english_left(shown["fix"], finding.message_values), (finding.message_id, shown["fix"])


def test_shm_ib_and_transport_read_the_same_in_english_and_whole_in_chinese():
    [shm, socket_warn] = [f for f in nccl_findings(LOGS["shm_then_warns"]) if f.check_id == "nccl.shm_too_small"] + \
        [f for f in nccl_findings(LOGS["shm_then_warns"]) if f.check_id == "nccl.warn"][:1]
    assert shm.message == (
        "NCCL could not create its shared-memory segments of 9,637,888 bytes (9.2 MiB) in /dev/shm (1 line; No space "
        "left on device (28)): /dev/shm is too small or full. Docker gives containers 64 MB by default; each pair of "
        "local ranks needs segments of this size.")
    assert socket_warn.message == ("remote process exited (1 line): a consequence of nccl.shm_too_small, not a "
                                   "separate fault.")
    shm_zh, warn_zh = chinese([shm, socket_warn])
    assert shm_zh["message"] == (
        "NCCL 无法在 /dev/shm 中创建大小为 9,637,888 字节（9.2 MiB）的共享内存段（1 行；No space left on device (28)）："
        "/dev/shm 太小或已满。Docker 默认只给容器 64 MB；每一对本地 rank 都需要这样大小的段。")
    assert shm_zh["fix"].startswith("Docker：`--shm-size=1g`（或 `--ipc=host`）；Kubernetes：")
    assert warn_zh["message"] == "远端进程已退出（1 行）：是 nccl.shm_too_small 的后果，不是另一个故障。"

    found = nccl_findings(LOGS["socket_where_ib"])
    [ib] = [f for f in found if f.check_id == "nccl.ib_missing"]
    [transport] = [f for f in found if f.check_id == "nccl.transport"]
    assert ib.message == ("NCCL cannot use InfiniBand/RoCE: no IB/RoCE device is visible (none installed, its driver "
                          "not loaded, or /dev/infiniband not in the container). It falls back to TCP sockets although "
                          "a uses NET/IB.")
    assert transport.message == ("NCCL sends between nodes over TCP sockets (NET/Socket) although a uses NET/IB, "
                                 "because no IB/RoCE device is visible (none installed, its driver not loaded, or "
                                 "/dev/infiniband not in the container): inter-node bandwidth is a fraction of IB's. "
                                 "between nodes: NET/IB (1 rank pair, e.g. 0→8), NET/Socket (1 rank pair, e.g. 0→8).")
    ib_zh, transport_zh = chinese([ib, transport])
    assert ib_zh["message"] == ("NCCL 无法使用 InfiniBand/RoCE：看不到任何 IB/RoCE 设备（没有安装、驱动未加载，或容器内没有 "
                                "/dev/infiniband）。它会退回到 TCP socket，尽管a 使用了 NET/IB。")
    assert transport_zh["message"] == ("NCCL 在节点之间走 TCP socket（NET/Socket），尽管a 使用了 NET/IB，原因是看不到任何 "
                                       "IB/RoCE 设备（没有安装、驱动未加载，或容器内没有 /dev/infiniband）：节点间带宽只有 IB "
                                       "的几分之一。节点间：NET/IB（1 对 rank，"
                                       "例如 0→8）、NET/Socket（1 对 rank，例如 0→8）。")
    assert ib_zh["fix"] == ("在主机上检查 `ibstat` / `ibv_devinfo`；在容器中加上 `--device=/dev/infiniband`，或使用 "
                            "Kubernetes 的 RDMA 设备插件。之后 NCCL_DEBUG=INFO 应当打印 `NET/IB : Using [0]mlx5_0:1/IB`。")


def test_a_cause_chosen_in_code_is_catalogue_text_not_an_english_value():
    [transport] = nccl_findings(LOGS["p2p_disabled"])
    assert transport.message_values["cause"] == {"message_id": "nccl_log.p2p_off.disabled",
                                                 "message_values": {"value": "1"}}
    assert "P2P is disabled by NCCL_P2P_DISABLE=1. within nodes: SHM (2 rank pairs, e.g. " in transport.message
    [shown] = chinese([transport])
    assert "P2P 被 NCCL_P2P_DISABLE=1 关闭。节点内：SHM（2 对 rank，例如 " in shown["message"]

    [wrong] = nccl_findings(LOGS["docker0"])
    assert wrong.message == "NCCL uses docker0:172.17.0.1 (Docker bridge) for its sockets; other nodes cannot reach it there."
    assert chinese([wrong])[0]["message"] == "NCCL 的 socket 使用了 docker0:172.17.0.1（Docker 网桥）；其他节点无法通过它连到这里。"


def test_nccl_tests_findings_in_both_languages():
    findings = nccl_tests_findings((FIXTURES / "diagnose" / "nccl_tests" / "all_reduce_16x_h100_a3mega.txt")
                                   .read_text(), expect_busbw_gb_per_s=450)
    busbw = next(f for f in findings if f.check_id == "nccl_tests.busbw_low")
    assert busbw.message == ("nccl-tests all_reduce over 16× NVIDIA H100 80GB HBM3 on 2 hosts (run.txt): busbw 338.8 "
                             "GB/s at 8,192 MiB (out-of-place), 75% of the 450.0 GB/s expected. The footer's Avg bus "
                             "bandwidth (70.742 GB/s) averages every size and is not judged.")
    shown = {f["check_id"]: f for f in chinese(findings)}
    assert shown["nccl_tests.busbw_low"]["message"] == (
        "nccl-tests all_reduce，16× NVIDIA H100 80GB HBM3，跨 2 台主机（run.txt）：busbw 338.8 GB/s（8,192 MiB，"
        "out-of-place），为预期 450.0 GB/s 的 75%。末尾的 Avg bus bandwidth（70.742 GB/s）是所有大小的平均值，不作评判。")
    assert shown["nccl_tests.busbw_low"]["fix"].startswith("用大尺寸重跑（`all_reduce_perf -b 8 -e 8G -f 2`）")
    assert shown["nccl_tests.wrong"]["message"] == "nccl-tests 数据校验：检查了 31 行，没有错误。"


@pytest.fixture
def quiet_host(monkeypatch):
    monkeypatch.setattr(net, "read_firewall_rules", lambda timeout_s=3.0: {
        "nft": {"readable": False, "why": "not installed", "reason": "not_installed"},
        "iptables": {"readable": False, "why": "no answer within 3 s", "reason": "timeout", "timeout_s": 3.0}})
    monkeypatch.setattr(net, "nccl_settings", lambda environ=None: {})


def test_diagnose_net_in_both_languages(monkeypatch, quiet_host, tmp_path):
    def dropped(address, timeout=None, source_address=None, **kwargs):
        raise socket.timeout("timed out")

    monkeypatch.setattr(socket, "create_connection", dropped)
    report = net.run_net(["127.0.0.1", "no-such-node.invalid"], port=29500, timeout_s=0.5,
                         shared_path=tmp_path / "absent")
    by_id = {finding.check_id: finding for finding in report.findings}
    assert by_id["network.firewall"].message == ("A firewall likely drops TCP 29500 between this node and 127.0.0.1: "
                                                 "a silent timeout, not a refusal.")
    assert by_id["network.firewall_rules"].message == (
        "Firewall rules not read (nft: not installed; iptables: no answer within 3 s). Reading them needs root: "
        "`sudo nft list ruleset` / `sudo iptables -S`.")
    shown = {finding["check_id"]: finding for finding in chinese(report.findings)}
    assert shown["network.firewall"]["message"] == \
        "很可能有防火墙丢弃了本节点与 127.0.0.1 之间的 TCP 29500：表现为无声的超时，而不是拒绝连接。"
    assert shown["network.firewall"]["fix"].startswith("在对端向集群子网放行 TCP 29500（")
    assert shown["network.firewall_rules"]["message"] == (
        "未读取防火墙规则（nft：未安装；iptables：3 s 内无应答）。读取它们需要 root：`sudo nft list ruleset` / "
        "`sudo iptables -S`。")
    assert shown["network.peer_port"]["message"] == \
        "127.0.0.1（127.0.0.1）TCP 29500：0.5 s 后超时，数据包在途中被丢弃（被过滤）。"
    assert shown["network.shared_path"]["message"].endswith("不是文件夹。")
    for finding, rendered in zip(report.findings, chinese(report.findings)):
        assert finding.message_id, finding.message
        assert not english_left(rendered["message"], finding.message_values), rendered["message"]
        if finding.fix:
            assert not english_left(rendered["fix"], finding.message_values), rendered["fix"]


def test_no_chinese_entry_of_these_domains_keeps_an_english_sentence():
    """Every entry, the parts no test above reaches included, filled with placeholder values."""
    from string import Formatter

    from babel.messages.pofile import read_po

    from gpuready.i18n import LOCALE_DIR

    for domain in ("diagnose_nccl", "diagnose_nccl_tests", "diagnose_net"):
        with open(LOCALE_DIR / "zh" / "LC_MESSAGES" / f"{domain}.po", "rb") as po_file:
            entries = [(entry.id, entry.string) for entry in read_po(po_file) if entry.id]
        assert len(entries) > 30, domain
        for msg_id, text in entries:
            values = {name: 1234.5 if spec else "VALUE" for _literal, name, spec, _conversion in Formatter().parse(text)
                      if name is not None}
            filled = text.format(**values)
            assert not english_left(filled, values), (msg_id, filled)
    # the check sees English where there is some
    assert english_left(text_in("en", "nccl.shm_too_small", {"detail": "VALUE"}), {"detail": "VALUE"})
