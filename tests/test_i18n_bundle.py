"""What the reader and the parsers say about input they cannot use comes from the catalogue (issue 21): a file that
could not be parsed, an entry skipped or read in part, and a bundle that cannot be read at all read whole in Chinese,
while the English (the findings' `message`, `facts.sources`, a ValueError's text) stays as it always read."""

from __future__ import annotations

import copy
import io
import json
import pickle
import tarfile

import pytest

from gpuready.evidence.archive import InputLimits
from gpuready.evidence.reader import BundleError, read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.facts import units
from gpuready.facts.bad_input import ParseFailure, Sentence, said_of
from gpuready.facts.host_files import parse_meminfo
from gpuready.i18n import catalogue, message
from gpuready.pipeline import check_files

TOPO_GPU1024 = "\tGPU0\tGPU1024\tCPU Affinity\nGPU0\t X \tSYS\t0-7\nGPU1024\tSYS\t X \t0-7\n"


def findings_of(folder, limits: InputLimits = InputLimits()) -> dict[str, list[dict]]:
    """check_id → its findings, as the report document holds them."""
    document = check_files(read_bundle(folder, limits), CheckOptions())[0].to_dict()
    found: dict[str, list[dict]] = {}
    for finding in document["findings"]:
        found.setdefault(finding["check_id"], []).append(finding)
    return found


def in_chinese(finding: dict, suffix: str = "") -> str:
    return message(finding["message_id"] + suffix, "zh", **finding["message_values"])


@pytest.fixture
def hostile(tmp_path):
    (tmp_path / "meminfo.txt").write_text("SwapTotal: 1 kB\n")
    (tmp_path / "nvidia-smi-topo.txt").write_text(TOPO_GPU1024)
    (tmp_path / "nvml.json").write_bytes(b"\0\1\2\3binary\0\0\0")
    (tmp_path / "cpuinfo.txt").write_text("processor : 0\n" + "x" * 3000 + "\n")
    (tmp_path / "dmesg.txt").write_text("[    1.0] NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n")
    (tmp_path / "link.txt").symlink_to("/etc/hostname")
    (tmp_path / "sub").mkdir()
    return tmp_path


def test_unreadable_files_read_in_chinese_and_keep_their_english(hostile):
    unreadable = {finding["observed"]: finding for finding in findings_of(hostile)["bundle.unreadable"]}
    meminfo, topo, nvml = unreadable["meminfo.txt"], unreadable["nvidia-smi-topo.txt"], unreadable["nvml.json"]
    assert meminfo["message"] == "meminfo.txt could not be parsed as meminfo.txt: no MemTotal line"
    assert in_chinese(meminfo) == "meminfo.txt 无法按 meminfo.txt 解析：没有 MemTotal 行"
    assert topo["message"] == (
        "nvidia-smi-topo.txt could not be parsed as nvidia-smi-topo.txt: the GPU label 'GPU1024' is 1,024, beyond "
        "1,024 GPUs: no real machine has that many (NVML enumerates a few dozen in one host at most)")
    assert in_chinese(topo) == (
        "nvidia-smi-topo.txt 无法按 nvidia-smi-topo.txt 解析：GPU 标签 'GPU1024' 是 1,024，GPU 数超过了 1,024：没有真实的"
        "机器有这么多（NVML 在一台主机上最多枚举几十个）")
    assert nvml["message"] == ("nvml.json is not text: 7 of its first 13 characters are NUL, control characters or "
                               "undecodable bytes, not what a tool prints")
    assert in_chinese(nvml) == "nvml.json 不是文本：前 13 个字符中有 7 个是 NUL、控制字符或无法解码的字节，不像工具的输出"
    assert in_chinese(nvml, ".fix") == "重新收集 nvml.json（`gpuready collect`），或把它从 bundle 中移除。"


def test_skipped_and_truncated_entries_read_in_chinese(hostile):
    found = findings_of(hostile, InputLimits(max_file_bytes=1024))
    skipped = {finding["observed"]: finding for finding in found["bundle.skipped"]}
    assert skipped["link.txt"]["message"] == "link.txt was not read: a symbolic link (to /etc/hostname), not followed."
    assert in_chinese(skipped["link.txt"]) == "link.txt 未读取：符号链接（指向 /etc/hostname），不跟随。"
    assert in_chinese(skipped["sub"]) == "sub 未读取：文件夹（bundle 的文件都在同一个文件夹里；其中的内容没有读取）。"
    [truncated] = found["bundle.truncated"]
    assert truncated["message"] == (
        "cpuinfo.txt was read in part: only its first 1 KiB of 2.9 KiB were read (the most gpuready reads of a file "
        "it parses whole is 1 KiB); the rest was not parsed.")
    assert in_chinese(truncated) == (
        "cpuinfo.txt 只读取了一部分：只读取了开头的 1 KiB（共 2.9 KiB），其余部分未解析：gpuready 对整体解析的文件最多读取 1 KiB。")


def test_facts_sources_stay_english_in_the_document(hostile):
    document = check_files(read_bundle(hostile), CheckOptions())[0].to_dict()
    sources = json.loads(json.dumps(document["facts"]["sources"]))
    assert sources["link.txt"] == "skipped: a symbolic link (to /etc/hostname), not followed"
    assert sources["meminfo.txt"] == "unreadable: no MemTotal line"
    assert sources["dmesg.txt"] == "parsed"


def test_an_archive_member_label_and_its_reasons_read_in_chinese(tmp_path):
    """An archive's own entries (`x.tar.gz (the archive)`) and what was rejected are catalogue text too."""
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name, data in (("b/nvidia-smi-topo.txt", TOPO_GPU1024.encode()), ("/etc/shadow", b"root:x\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    unreadable = {finding["observed"]: finding for finding in findings_of(path)["bundle.unreadable"]}
    rejected = unreadable["evil.tar.gz (the archive)"]
    assert rejected["message"] == ("evil.tar.gz holds members that are not files of its bundle (b/), rejected unread: "
                                   "/etc/shadow")
    assert in_chinese(rejected) == "evil.tar.gz 包含不属于其 bundle（b/）的成员，未读取即拒绝：/etc/shadow"
    assert in_chinese(rejected, ".fix") == "重新收集 evil.tar.gz（归档）（`gpuready collect`），或把它从 bundle 中移除。"


def test_a_bundle_that_cannot_be_read_says_so_in_either_language(tmp_path):
    with pytest.raises(BundleError) as raised:
        read_bundle(tmp_path / "nowhere")
    assert str(raised.value) == f"bundle {tmp_path / 'nowhere'} does not exist"
    assert message(raised.value.said.msg_id, "zh", **raised.value.said.values) == f"bundle {tmp_path / 'nowhere'} 不存在"
    fake = tmp_path / "fake.tar.gz"
    fake.write_text("hello\n")
    with pytest.raises(BundleError) as raised:
        read_bundle(fake)
    assert message(raised.value.said.msg_id, "zh", **raised.value.said.values) == (
        f"{fake} 的名字像归档，但它不是：开头的字节既不是 tar 头，也不是 gzip、bzip2 或 xz")


def test_a_parse_failure_is_a_value_error_whose_text_is_the_english():
    with pytest.raises(ValueError, match=r"^no MemTotal line$") as raised:
        parse_meminfo("SwapTotal: 1 kB\n")
    assert isinstance(raised.value, ParseFailure)
    assert message(raised.value.said.msg_id, "zh") == "没有 MemTotal 行"


def test_a_sentence_is_its_english_wherever_a_string_goes():
    text = Sentence(ParseFailure("parse.cpu_list.backwards", entry="'7-3'").said)
    assert text == "CPU range runs backwards: '7-3'" and json.dumps({text: text}) == json.dumps({str(text): str(text)})
    for again in (copy.deepcopy(text), pickle.loads(pickle.dumps(text))):
        assert again == text and said_of(again) == text.said
    assert said_of("a plain name") == "a plain name"


def test_every_bound_says_what_it_counts_and_why_in_both_languages():
    for lang in ("en", "zh"):
        for limit in units.LIMITS:
            assert catalogue(lang)[f"parse.limit.{limit}"] and catalogue(lang)[f"parse.limit.{limit}.why"]


def test_a_parse_failure_survives_a_copy():
    from gpuready.facts.smi_tree import SmiParseError

    failure = SmiParseError("parse.xml.root", tag="html")
    for again in (copy.copy(failure), pickle.loads(pickle.dumps(failure))):
        assert type(again) is SmiParseError and str(again) == "the root element is <html>, not <nvidia_smi_log>"
        assert again.said == failure.said
