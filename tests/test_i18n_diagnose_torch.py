"""diagnose's PyTorch-distributed findings (torch.*, gloo.timeout, nccl.timeout / nccl.error raised by torch, CUDA and
driver errors, rendezvous errors, flight-recorder dumps) and its own notes come from the message catalogue (issue 21):
each carries a message_id, renders whole in Chinese (only names, commands and quoted log text stay as they are), keeps
the English it always had, and no placeholder holds an English word chosen in code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuready.i18n import catalogue, message
from gpuready.report.translate import in_language
from gpuready.facts.log_lines import feed_text
from helpers import judged
from gpuready.facts.k8s_reader import K8sNodeReader
from gpuready.verbs.diagnose.run import diagnose
from gpuready.facts.torch_log_reader import TorchErrorReader

FIXTURES = Path(__file__).parent / "fixtures"
TORCH = FIXTURES / "diagnose" / "torch"
SOFTWARE = FIXTURES / "diagnose" / "software"
ELASTIC = (TORCH / "elastic_cppo_6.log").read_text()
WATCHDOG = ("[rank{r}]:[E626 06:24:44.9 ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for "
            "600020 milliseconds before timing out.")
CONSTRUCTED = {
    "gloo.log": "[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                "waiting 10000ms for recv operation to complete\n[rank1]: NCCL error in: x.cpp:1, unhandled system "
                "error, NCCL version 2.18.1\n",
    "gloo_alone.log": "Timed out waiting 5000ms for send operation to complete\n",
    "sigsegv.log": ELASTIC.replace("-9 (pid: 14750)", "-11 (pid: 14750)"),
    "sigabrt.log": ELASTIC.replace("-9 (pid: 14750)", "-6 (pid: 14750)"),
    "sigbus.log": ELASTIC.replace("-9 (pid: 14750)", "-7 (pid: 14750)"),
    "sigterm.log": ELASTIC.replace("-9 (pid: 14750)", "-15 (pid: 14750)"),
    "sigint.log": ELASTIC.replace("-9 (pid: 14750)", "-2 (pid: 14750)"),
    "behind.log": "\n".join([WATCHDOG.format(r=0, seq=9), WATCHDOG.format(r=1, seq=9), WATCHDOG.format(r=2, seq=8)]),
    "absent.log": "\n".join([WATCHDOG.format(r=0, seq=9), WATCHDOG.format(r=2, seq=9)]),
    "failed.log": "\n".join([WATCHDOG.format(r=0, seq=9), WATCHDOG.format(r=1, seq=9),
                             "[rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]),
    "oom.log": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
    "unnamed_gpu.log": "Found GPU0: with CUDA capability sm_35 is not compatible with the current PyTorch "
                       "installation.\n",
    "no_rank.log": ELASTIC.replace("  rank      : 0 (local_rank: 0)\n", ""),
    "nccl_kinds.log": "NCCL error in: a.cpp:1, unhandled cuda error, NCCL version 2.18.1\n\n\n\n"
                      "NCCL error in: b.cpp:2, invalid usage, NCCL version 2.18.1\n\n\n\n"
                      "NCCL error in: c.cpp:3, unhandled system error, NCCL version 2.18.1\n"
                      "Last error:\nsocket: connection closed by peer\n",
    "no_wheel.log": "NVIDIA Tesla K40m with CUDA capability sm_35 is not compatible with the current PyTorch "
                    "installation.\n",
    "built.log": "torch 2.1.0+cu121\nRuntimeError: The NVIDIA driver on your system is too old (found version "
                 "11040).\nCUDA error: forward compatibility was attempted on non supported HW\n",
    "net.log": "node2:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
               "[c10d] The client socket has failed to connect to [10.0.0.1]:29500 (errno: 110 - Connection timed "
               "out).\n"
               "[c10d] The client socket has failed to connect to [10.0.0.9]:29500 (errno: 111 - Connection "
               "refused).\n"
               "DistNetworkError: The server socket has failed to bind to [::]:29501 (errno: 98 - Address already in "
               "use).\n"
               "[c10d] The client socket has timed out after 1800s while trying to connect to (10.0.0.5, 29400).\n"
               "[c10d] The client socket has failed to connect to any network address of (10.0.0.7, 29600).\n"
               "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients "
               "joined.\n"
               "torch.distributed.DistNetworkError: Connection reset by peer\n"
               "RendezvousConnectionError: No route to host\n",
}
_WORDS = re.compile(r"(?<![\w.-])[A-Za-z][\w'-]*(?: [A-Za-z][\w'-]*){2,}")


def _english_phrases(text: str) -> list[str]:
    """Three words or more in a row, two of them plain lower-case words: English prose (a Chinese sentence keeps the
    field's terms: `PyTorch CUDA wheel`, `flight-recorder dump`, `rank`)."""
    return [run for run in _WORDS.findall(text) if sum(word.isalpha() and word.islower() for word in run.split()) >= 2]


def _fr_dump(enqueued: int, completed: int) -> dict:
    entries = [{"record_id": seq, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
                "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce", "time_created_ns": 1000 + seq,
                "input_sizes": [[4]], "output_sizes": [[4]], "state": "completed" if seq <= completed else "started",
                "time_discovered_started_ns": None, "time_discovered_completed_ns": None, "retired": True,
                "timeout_ms": 600000, "is_p2p": False, "frames": []} for seq in range(1, enqueued + 1)]
    return {"version": "2.4", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
            "pg_status": {}, "entries": entries}


def _inputs(tmp_path: Path) -> list[Path]:
    """Every published torch traceback, the software-stack ones, the recorded runs, the constructed variants and
    flight-recorder dumps (behind, stuck, completed, pickled)."""
    paths = sorted(TORCH.glob("*.log")) + sorted(SOFTWARE.glob("*.log")) + \
        sorted((FIXTURES / "diagnose" / "recorded").glob("*.log"))
    for name, text in CONSTRUCTED.items():
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    for folder, dumps in (("behind", [(5, 4), (3, 3)]), ("stuck", [(2, 1), (2, 1)]), ("completed", [(2, 2), (2, 2)])):
        (tmp_path / folder).mkdir()
        for rank, (enqueued, completed) in enumerate(dumps):
            (tmp_path / folder / f"nccl_trace_rank_{rank}").write_text(json.dumps(_fr_dump(enqueued, completed)))
        paths.append(tmp_path / folder)
    (tmp_path / "dump.pkl").write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")
    paths.append(tmp_path / "dump.pkl")
    return paths


def _readers():
    return [TorchErrorReader()]


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> list[tuple[str, dict]]:
    """(the input's text, its report document) for each input, read by the PyTorch reader alone."""
    found = []
    for path in _inputs(tmp_path_factory.mktemp("torch")):
        text = path.read_text(errors="replace") if path.is_file() else ""
        found.append((text, diagnose([path], readers=_readers).to_dict()))
    return found


def _strings(values: object) -> list[str]:
    """The plain strings among a finding's values, nested parts included."""
    if isinstance(values, dict):
        return [text for key, value in values.items() if key != "message_id" for text in _strings(value)]
    if isinstance(values, list):
        return [text for value in values for text in _strings(value)]
    return [values] if isinstance(values, str) else []


QUOTED_TERMS = ("No space left on device", "NVIDIA device plugin")
"""An errno's text that a template quotes, and a product's name."""


def _without_names(text: str, values: dict) -> str:
    """`text` less what stays as it is in any language: commands in backticks, quoted error strings, the values."""
    for value in sorted(_strings(values) + list(QUOTED_TERMS), key=len, reverse=True):
        if value:
            text = text.replace(value, " ")
    return re.sub(r"`[^`]*`|'[^']*'", " ", text)


def test_every_finding_of_the_torch_reader_is_catalogued_in_both_languages(documents):
    ids = set()
    for _text, document in documents:
        for finding in document["findings"]:
            assert finding.get("message_id"), finding["message"]
            ids.add(finding["message_id"])
            for msg_id in (finding["message_id"], finding["message_id"] + ".fix"):
                assert (msg_id in catalogue("en")) == (msg_id in catalogue("zh"))
            assert (finding["fix"] is not None) == (finding["message_id"] + ".fix" in catalogue("en"))
    # each kind of finding the reader writes was seen: the variants above cover them
    assert {"torch.oom.cuda", "torch.rank_failed.first", "torch.ranks_terminated.sigterm", "gloo.timeout.peer_missing",
            "nccl.timeout.watchdog", "nccl.timeout.watchdog.all", "nccl.error.torch", "nccl.error.torch.last",
            "software.driver_cuda.log.too_old", "software.driver_cuda.log.forward_compat",
            "software.torch_arch.log.wheel", "software.torch_arch.log.no_wheel",
            "software.torch_arch.log.no_kernel_image", "software.nccl.log.undefined_symbol",
            "software.nccl.log.no_kernels", "nccl.p2p_unsupported.cuda", "network.port_in_use.rendezvous",
            "network.firewall.rendezvous", "network.unreachable.rendezvous", "nccl.flight_recorder_unread.pickle",
            "nccl.rank_behind.flight_recorder", "nccl.flight_recorder.stuck", "nccl.flight_recorder.completed"} <= ids


def test_the_chinese_reads_chinese_with_only_names_commands_and_quotes_left(documents):
    for _text, document in documents:
        chinese = in_language(document, "zh")["findings"]
        for english, finding in zip(document["findings"], chinese):
            values = finding.get("message_values") or {}
            for key in ("message", "fix"):
                if finding.get(key) is None:
                    continue
                assert finding[key] != english[key] and re.search(r"[\u4e00-\u9fff]", finding[key]), finding[key]
                left = _english_phrases(_without_names(finding[key], values))
                assert not left, (finding["message_id"], key, left, finding[key])


def test_no_placeholder_holds_english_words_chosen_in_code(documents):
    """A value with three words in a row is quoted from the input (a log's error text), never written by the code."""
    for text, document in documents:
        for finding in document["findings"]:
            for value in _strings(finding.get("message_values") or {}):
                if _english_phrases(value):
                    assert value in text, (finding["message_id"], value)


def _finding(documents, msg_id: str, needle: str = "") -> dict:
    return next(finding for _text, document in documents for finding in document["findings"]
                if finding["message_id"] == msg_id and needle in finding["message"])


@pytest.mark.parametrize("msg_id, needle, english, chinese", [
    ("torch.oom.cuda", "rank 11",
     "CUDA out of memory on rank 11 on cuda:3: tried to allocate 4.35 GiB with 1.70 GiB free of 63.42 GiB; the other "
     "ranks then wait for it.",
     "rank 11（cuda:3）上 CUDA 显存不足（OOM）：尝试分配 4.35 GiB，而 63.42 GiB 中只剩 1.70 GiB 空闲；其他 rank 随后都在"
     "等它。"),
    ("torch.rank_failed.first", "SIGSEGV",
     "The first process to fail was rank 0 (local_rank 0) on mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker: "
     "SIGSEGV: a crash in native code (CUDA, NCCL, an extension); torchrun then stopped the others.",
     "最先失败的进程是 mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker 上的 rank 0（local_rank 0）：SIGSEGV："
     "native 代码崩溃（CUDA、NCCL 或某个扩展）；随后 torchrun 停掉了其他进程。"),
    ("gloo.timeout.peer_missing", "rank(s) 0 ",
     "rank(s) 0 waited 10 s in a gloo collective (recv) and timed out: a peer never joined it. The suspect is rank(s) "
     "1, which did not time out themselves: hung, stopped, or slower than the timeout; the rank that timed out is the "
     "one that waited, not the cause.",
     "rank 0 在 gloo 集合通信（recv）中等了 10 s 后超时：有一个 peer 始终没有加入。嫌疑对象是 rank 1（自己没有超时）："
     "卡住了、已经停止，或者比超时还慢；超时的 rank 是等待的一方，不是原因。"),
    ("nccl.timeout.watchdog", "SeqNum 9 ",
     "ALLREDUCE SeqNum 9 timed out on rank(s) 0, 1 after 600000 ms; rank(s) 2 never started it (behind (a lower "
     "SeqNum)).",
     "ALLREDUCE SeqNum 9 在 rank 0, 1 上超时（等了 600000 ms）；rank 2 始终没有开始它（落后：SeqNum 更低）。"),
    ("network.unreachable.rendezvous", "10.0.0.5",
     "Rendezvous / TCPStore connection to 10.0.0.5:29400 failed: connect timed out after 1800s.",
     "到 10.0.0.5:29400 的 Rendezvous / TCPStore 连接失败：连接在 1800s 后超时。"),
])
def test_representative_findings_keep_their_english_and_read_in_chinese(documents, msg_id, needle, english, chinese):
    finding = _finding(documents, msg_id, needle)
    assert finding["message"] == english
    assert message(msg_id, "zh", **finding["message_values"]) == chinese


def test_fixes_keep_their_english(documents):
    failed = _finding(documents, "torch.rank_failed.first", "SIGSEGV")
    assert failed["fix"] == ("Start with rank 0 (local_rank 0) on "
                             "mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker: run `gpuready diagnose` on that "
                             "host's dmesg for Xid errors; rerun the rank with `TORCH_SHOW_CPP_STACKTRACES=1` and "
                             "`python -X faulthandler`.")
    reset = _finding(documents, "network.unreachable.rendezvous", "(MASTER_ADDR:MASTER_PORT) failed: Connection reset")
    assert reset["fix"].startswith("The rendezvous store (MASTER_ADDR:MASTER_PORT) dropped the connection: ")
    assert reset["fix"].endswith("; `gpuready diagnose net --peers HOST` (on each node) tests ports and name "
                                 "resolution.")
    refused = _finding(documents, "network.unreachable.rendezvous", "10.0.0.9")
    assert refused["fix"].startswith("Nothing listens on 10.0.0.9:29500: start rank 0 first")
    assert refused["fix"].endswith("`gpuready diagnose net --peers 10.0.0.9 --port 29500` (on each node) tests ports "
                                   "and name resolution.")
    timeout = _finding(documents, "nccl.timeout.watchdog", "SeqNum 9 ")
    assert timeout["fix"].startswith("Read rank 2's log around SeqNum 9 (an exception, OOM, data-loader stall")
    assert "then `torchfrtrace <dump_dir>` (or `python -m torch.distributed.flight_recorder.fr_trace <dump_dir>`) " \
           "names the missing rank" in timeout["fix"]
    message_zh = in_language({"findings": [timeout]}, "zh")["findings"][0]["fix"]
    assert message_zh.startswith("查看 rank 2 的日志中 SeqNum 9 附近的内容")


def test_diagnose_names_what_it_read_in_the_readers_language(tmp_path):
    (tmp_path / "a.log").write_text("all quiet\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\x01\x02binary")
    finding = diagnose([tmp_path], readers=_readers).to_dict()["findings"][0]
    assert finding["message"].startswith("Nothing wrong found in 1 file(s) read (1 binary; 1 log): ")
    chinese = in_language({"findings": [finding]}, "zh")["findings"][0]["message"]
    assert chinese.startswith("读取的 1 个文件（1 个二进制文件；1 个日志）中没有发现问题")


def test_a_node_labelled_by_its_pci_device_is_named_in_the_readers_language():
    reader = feed_text(K8sNodeReader(), "node.txt", "Name:               gpu-7\nLabels:             "
                       "feature.node.kubernetes.io/pci-10de.present=true\nCapacity:\n  cpu:                64\n"
                       "  memory:             527932972Ki\n  nvidia.com/gpu:     0\n  pods:               110\n"
                       "Allocatable:\n  cpu:                64\n  nvidia.com/gpu:     0\nSystem Info:\n")
    finding = judged(reader, host="inputs")[0]
    assert "labelled feature.node.kubernetes.io/pci-10de.present=true (an NVIDIA PCI device)" in finding.message
    assert finding.observed["label"] == "feature.node.kubernetes.io/pci-10de.present=true (an NVIDIA PCI device)"
    chinese = message(finding.message_id, "zh", **finding.message_values)
    assert "feature.node.kubernetes.io/pci-10de.present=true（NVIDIA 的 PCI 设备）" in chinese
    assert "an NVIDIA PCI device" not in chinese


def test_parts_are_catalogue_text_not_english_values(documents):
    """The causes the code picks (a signal's meaning, what to do, where a rank ran) travel as nested ids."""
    failed = _finding(documents, "torch.rank_failed.first", "SIGBUS")
    values = failed["message_values"]
    assert values["meaning"] == {"message_id": "torch.rank_failed.exit.sigbus", "message_values": {"code": -7}}
    assert values["advice"]["message_id"] == "torch.rank_failed.exit.sigbus.advice"
    assert values["who"]["message_id"] == "torch.rank_failed.who.rank_on_host"


def test_every_part_fills_in_both_languages():
    """The parts no input above reaches (a driver table row without a full-feature driver, …) fill all the same."""
    from babel.messages.pofile import read_po

    from gpuready.i18n import LOCALE_DIR, placeholders

    with open(LOCALE_DIR / "en" / "LC_MESSAGES" / "diagnose_torch.po", "rb") as po_file:
        ids = [entry.id for entry in read_po(po_file) if entry.id]
    assert len(ids) > 100
    for msg_id in ids:
        values = {name: 1 for name in placeholders(catalogue("en")[msg_id])}
        assert message(msg_id, "en", **values) and message(msg_id, "zh", **values)


@pytest.mark.parametrize("folder", ["host", "dcgm", "k8s"])
def test_host_dcgm_and_k8s_findings_read_chinese(folder):
    """Their ids are the kind of fix; what the tool saw (how the OOM killer acted, whose memory ran out, which
    DataLoader error, where DCGM failed) are nested parts, so the English is as it was and the Chinese is whole."""
    from gpuready.facts.dcgm_reader import DcgmDiagReader
    from gpuready.facts.host_log_reader import HostLogReader

    document = diagnose([FIXTURES / "diagnose" / folder],
                        readers=lambda: [HostLogReader(), DcgmDiagReader(), K8sNodeReader()]).to_dict()
    assert document["findings"]
    chinese = in_language(document, "zh")["findings"]
    for english, finding in zip(document["findings"], chinese):
        assert finding.get("message_id"), english["message"]
        for key in ("message", "fix"):
            if finding.get(key) is not None:
                assert re.search(r"[\u4e00-\u9fff]", finding[key]), finding[key]
                left = _english_phrases(_without_names(finding[key], finding["message_values"]))
                assert not left, (finding["message_id"], key, left)


def test_a_host_oom_is_said_in_parts():
    from gpuready.facts.host_log_reader import HostLogReader

    reader = feed_text(HostLogReader(), "dmesg.txt",
                       "[100.1] python invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0\n"
                       "[100.2] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                       "oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1,task=python,pid=4242,uid=0\n"
                       "[100.3] Memory cgroup out of memory: Killed process 4242 (python) total-vm:9000000kB, "
                       "anon-rss:4194304kB, file-rss:0kB, shmem-rss:0kB\n")
    finding = judged(reader, host="node1")[0]
    assert finding.message_id == "host.oom.limit"
    assert finding.message == ("The Linux OOM killer killed python (pid 4242), 4.0 GiB resident (anon-rss): a memory "
                               "cgroup ran out (the container's or job's memory limit, /kubepods/pod1), not the whole "
                               "host.")
    assert message(finding.message_id, "zh", **finding.message_values) == (
        "Linux OOM killer 杀掉了 python (pid 4242)，常驻内存 4.0 GiB（anon-rss）：耗尽的是某个内存 cgroup（容器或作业的"
        "内存上限，/kubepods/pod1），而不是整台主机。")


def test_an_input_that_cannot_be_read_is_said_in_either_language(tmp_path):
    from gpuready.evidence.walk import InputError

    with pytest.raises(InputError) as raised:
        diagnose([tmp_path / "nope.log"], readers=_readers)
    assert str(raised.value) == f"{tmp_path / 'nope.log'}: no such file or folder"
    sentence = raised.value.sentence
    assert message(sentence.msg_id, "zh", **sentence.values) == f"{tmp_path / 'nope.log'}：没有这个文件或文件夹"


def test_diagnose_s_usage_errors_are_said_in_the_users_language(tmp_path, capsys):
    from gpuready.cli.main import main

    assert main(["diagnose", str(tmp_path / "nope"), "--lang", "zh"]) == 2
    assert capsys.readouterr().err.strip() == f"gpuready: {tmp_path / 'nope'}：没有这个文件或文件夹"
    assert main(["diagnose", str(tmp_path), "--peers", "node2"]) == 2
    assert capsys.readouterr().err.strip() == \
        "gpuready: --peers and --shared-path go with `gpuready diagnose net --peers HOST`"
