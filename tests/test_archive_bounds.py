"""Issue 20, "Archives and memory are bounded": an archive is known by its first bytes (never `tarfile.is_tarfile`,
whose xz attempt read a gigabyte of NUL bytes for minutes and called it an empty archive), its members are walked
without being held, what is read is capped by `InputLimits` (each with an option), an archive of which nothing can
be read is an input error (exit 2, one sentence, no verdict), and `diagnose` has a budget for the whole run whose
overrun is a finding naming what was skipped. Peak memory on the worst inputs: benchmarks/input_memory.py."""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from helpers import report_for, statuses, tar_bytes
from gpuready.evidence.archive import MemberWalk, format_of, open_tar
from gpuready.evidence.limits import InputLimits
from gpuready.evidence.reader import MAX_LISTED, BundleError, read_bundle
from gpuready.cli.main import main
from gpuready.facts.nccl_log import _NOT_A_COLLECTIVE
from gpuready.evidence.markers import marker_pattern
from gpuready.evidence.walk import InputError
from gpuready.verbs.diagnose.run import diagnose
from gpuready.facts.torch_log_reader import TorchErrorReader

NVML = (FIXTURES / "h200-collect" / "nvml.json").read_bytes()
XID79 = b"[ 1843.308145] NVRM: Xid (PCI:0000:91:00): 79, pid=1234, GPU has fallen off the bus.\n"


def _sparse_nul(path: Path, size: int = 1 << 30) -> Path:
    with open(path, "wb") as out:
        out.truncate(size)
    return path


# --- recognised by the first bytes ------------------------------------------------------------------------------------

def test_a_gigabyte_of_nul_bytes_is_not_an_archive(tmp_path, capsys):
    nul = _sparse_nul(tmp_path / "bundle.tar")
    assert format_of(nul) is None
    assert main(["check", "--bundle", str(nul)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gpuready: {nul} is named like an archive but is not one: its first bytes are neither a tar header nor "
        "gzip, bzip2 or xz")
    bare = _sparse_nul(tmp_path / "disk.img")  # no archive name: one file, looked at by its head only
    report = diagnose([bare])
    assert report.facts["diagnose"]["inputs"][0]["bytes_read"] <= 64 * 1024
    assert report.facts["diagnose"]["inputs"][0]["kind"] == "binary"
    assert report.verdict().value == "unknown"


@pytest.mark.parametrize("compress, expected", [(lambda data: data, "tar"), (gzip.compress, "tar.gz"),
                                                (bz2.compress, "tar.bz2"), (lzma.compress, "tar.xz")])
def test_each_compression_is_known_by_its_magic_not_its_name(tmp_path, compress, expected):
    path = tmp_path / "upload.bin"  # a ticket attachment keeps no useful name
    path.write_bytes(compress(tar_bytes([("b/nvml.json", NVML), ("b/dmesg.txt", XID79)])))
    assert format_of(path) == expected
    report = report_for(path)
    assert statuses(report, "health.xid") == ["fail"] and len(report.facts["gpus"]) == 1


@pytest.mark.parametrize("compress, suffix", [(gzip.compress, ".gz"), (bz2.compress, ".bz2"), (lzma.compress, ".xz")])
def test_a_compressed_log_that_holds_no_tar_is_read_as_one_file(tmp_path, compress, suffix):
    log = tmp_path / f"kern.log.1{suffix}"
    log.write_bytes(compress(b"[ 1000.0] usb 1-1: new device\n" * 1000 + XID79))
    assert format_of(log) == suffix[1:]
    found = {finding.check_id: finding.status.value for finding in diagnose([log]).findings}
    assert found.get("health.xid") == "fail"
    bundle = read_bundle(log)
    assert bundle.kinds == {"kern.log.1": "dmesg.txt"} and "Xid" in bundle["kern.log.1"]


def test_a_compressed_file_is_inflated_only_up_to_its_budget(tmp_path):
    bomb = tmp_path / "dmesg.txt.gz"
    bomb.write_bytes(gzip.compress(XID79 + b"[ 1000.0] usb 1-1: new device\n" * 2_000_000, 9))  # 60 MiB in 0.2
    limits = InputLimits(max_archive_bytes=1 << 20)
    bundle = read_bundle(bomb, limits)
    assert bundle.partial["dmesg.txt"].startswith("only its first 1 MiB were read (gpuready inflates at most 1 MiB")
    report = diagnose([bomb], limits=limits)
    assert report.facts["diagnose"]["inputs"][0]["note"] == \
        "read in part: diagnose inflates at most 1 MiB of a compressed file"


# --- archives in archives ---------------------------------------------------------------------------------------------

def test_archives_and_compressed_files_in_an_archive_are_read_as_members_of_it(tmp_path):
    node = gzip.compress(tar_bytes([("node1/dmesg.txt", XID79), ("node1/rank0.log", b"ok\n")]))
    outer = tmp_path / "ticket.tar"
    outer.write_bytes(tar_bytes([("ticket/node1.tar.gz", node), ("ticket/kern.log.1.xz", lzma.compress(XID79)),
                                 ("ticket/broken.gz", b"\x1f\x8b" + bytes(100))]))
    report = diagnose([outer])
    inputs = {entry["file"].removeprefix(f"{outer}/"): entry for entry in report.facts["diagnose"]["inputs"]}
    assert {name: entry["kind"] for name, entry in inputs.items()} == {
        "ticket/node1.tar.gz/node1/dmesg.txt": "dmesg.txt", "ticket/node1.tar.gz/node1/rank0.log": "log",
        "ticket/kern.log.1.xz": "dmesg.txt", "ticket/broken.gz": None}
    assert inputs["ticket/broken.gz"]["note"].startswith("cannot be read (")
    assert statuses(report, "health.xid") == ["fail"]
    assert inputs["ticket/node1.tar.gz/node1/dmesg.txt"]["fed"] == {"kernel": 1}


def test_archives_nested_past_the_depth_limit_are_named_not_read(tmp_path):
    data = tar_bytes([("dmesg.txt", XID79)])
    for level in range(3):
        data = tar_bytes([(f"level{level}.tar", data)])
    path = tmp_path / "deep.tar"
    path.write_bytes(data)
    report = diagnose([path], limits=InputLimits(max_depth=3))
    notes = {entry["file"].removeprefix(f"{path}/"): entry.get("note") for entry in report.facts["diagnose"]["inputs"]}
    assert notes == {"level2.tar/level1.tar/level0.tar": "deeper than 3 folders: not read"}
    assert statuses(diagnose([path]), "health.xid") == ["fail"]


def test_an_archive_in_an_archive_is_inflated_within_what_is_left_of_its_budget(tmp_path):
    bomb = gzip.compress(tar_bytes([("b/dmesg.txt", XID79 + b"[ 1000.0] usb 1-1: new device\n" * 200_000)]), 9)
    path = tmp_path / "ticket.tar"
    path.write_bytes(tar_bytes([("ticket/bomb.tar.gz", bomb), ("ticket/after.log", b"MARK\n")]))
    report = diagnose([path], limits=InputLimits(max_archive_bytes=1 << 20))
    notes = {entry["file"].removeprefix(f"{path}/"): entry.get("note") for entry in report.facts["diagnose"]["inputs"]}
    left = 1024 - len(bomb) / 1024  # KiB: the outer archive's budget less the member it has inflated
    assert notes["ticket/bomb.tar.gz/b/dmesg.txt"] == (
        f"not read, nor what follows: past the {left:.1f} KiB or 10000 files diagnose reads from one archive")
    assert notes["ticket/after.log"] is None  # the outer archive is read on


# --- members walked, not held ----------------------------------------------------------------------------------------

def test_members_are_walked_without_tarfile_keeping_them(tmp_path):
    path = tmp_path / "links.tar"
    path.write_bytes(tar_bytes([(f"b/link{index}", (tarfile.SYMTYPE, "/etc/passwd")) for index in range(3000)]))
    with open_tar(path, "tar") as archive:
        walk = MemberWalk(archive, InputLimits(max_members=10_000))
        held = max(len(archive.members) for _member in walk)
    assert walk.count == 3000 and held == 0 and walk.stopped_at is None and walk.damage is None


def test_an_archive_of_links_only_is_an_input_error_not_a_verdict(tmp_path, capsys):
    path = tmp_path / "links.tar.gz"
    path.write_bytes(gzip.compress(tar_bytes([(f"b/link{index}", (tarfile.SYMTYPE, "/etc/passwd"))
                                               for index in range(5000)])))
    with pytest.raises(InputError) as raised:
        diagnose([path])
    assert str(raised.value) == (f"{path} holds no file diagnose can read: its first 4096 members are folders, links, "
                                 "devices or names that leave the archive")
    assert main(["diagnose", str(path), "--max-members", "20000"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"gpuready: {path} holds no file diagnose can read: its 5000 member(s) are folders, links, devices or names "
        "that leave the archive")
    report = report_for(path, limits=InputLimits(max_members=20_000))  # check: skipped links listed up to a cap
    sources = report.facts["sources"]
    assert sum(state.startswith("skipped: a symbolic link") for state in sources.values()) == MAX_LISTED
    assert sources[f"{path.name} (the archive) (entries)"] == (
        f"read in part: {5000 - MAX_LISTED} skipped more members were not read and are counted, not listed (the "
        f"first {MAX_LISTED} are)")


def test_an_empty_or_headerless_archive_gives_a_reason_never_a_verdict(tmp_path):
    empty = tmp_path / "empty.tar.gz"
    empty.write_bytes(gzip.compress(bytes(10240)))  # what `tar czf x.tar.gz --files-from /dev/null` writes
    with pytest.raises(BundleError) as raised:
        read_bundle(empty)
    assert str(raised.value) == f"{empty} holds no tool output gpuready recognises (not text)"
    assert main(["check", "--bundle", str(empty)]) == 2


def test_the_member_limit_is_an_option(tmp_path, capsys):
    members = [("b/nvml.json", NVML)] + [(f"b/note{index:02}.txt", b"hello\n") for index in range(20)]
    path = tmp_path / "many.tar"
    path.write_bytes(tar_bytes(members))
    assert main(["check", "--bundle", str(path), "--max-members", "5", "--json"]) in (0, 1)
    out = capsys.readouterr().out
    assert "it holds more than 5 members; those after b/note03.txt were not read" in out
    assert main(["check", "--bundle", str(path), "--max-members", "0"]) == 2
    assert "--max-members: '0' is not a whole number of archive members from 1 to 100,000,000" in \
        capsys.readouterr().err


# --- diagnose: one budget for the whole run ---------------------------------------------------------------------------

def test_diagnose_past_its_input_budget_names_what_it_skipped(tmp_path):
    first, second = tmp_path / "a.log", tmp_path / "b.log"
    first.write_bytes(b"[ 1000.0] usb 1-1: new device\n" * 40_000)  # 1.2 MB
    second.write_bytes(XID79)
    report = diagnose([first, second], limits=InputLimits(max_input_bytes=1 << 20))
    skipped = [finding for finding in report.findings if finding.check_id == "diagnose.inputs_skipped"]
    assert [finding.status.value for finding in skipped] == ["warn"]
    assert skipped[0].observed["inputs"] == [str(first), str(second)]
    assert skipped[0].message.startswith(f"2 input(s) were not read, read in part or not parsed, because this run's "
                                         f"budget was spent (1 MiB read from all inputs, 64 MiB of tool outputs kept "
                                         f"whole): {first}, {second}.")
    assert not [finding for finding in report.findings if finding.check_id == "health.xid"]  # not read: not judged


def test_diagnose_keeps_tool_outputs_whole_only_within_its_budget(tmp_path):
    smi = (FIXTURES / "public" / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt").read_bytes()
    for index in range(3):
        (tmp_path / f"node{index}-q.txt").write_bytes(smi)
    report = diagnose([tmp_path], limits=InputLimits(max_held_bytes=len(smi) * 2 + 1))
    notes = {entry["file"].rsplit("/", 1)[-1]: entry.get("note") for entry in report.facts["diagnose"]["inputs"]}
    assert notes["node0-q.txt"] is None and notes["node1-q.txt"] is None
    assert notes["node2-q.txt"].startswith("not parsed: the tool outputs before it hold ")
    assert [f.observed["inputs"] for f in report.findings if f.check_id == "diagnose.inputs_skipped"] == \
        [[f"{tmp_path.name}/node2-q.txt"]]


def test_a_log_that_starts_with_a_bracket_is_streamed_not_parsed_as_json(tmp_path):
    log = tmp_path / "rank0.log"
    log.write_bytes(b"[rank0]: torch.distributed.DistBackendError: NCCL error in: x.cpp:1, unhandled system error\n"
                    * 10 + XID79)
    assert TorchErrorReader().offer_file(log) is False
    dump = tmp_path / "nccl_trace_rank_0.json"
    entry = '{"record_id": 0, "collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "scheduled"}'
    dump.write_text('{\n  "version": "2.4", "pg_config": {}, "entries": [' + entry + ']}')
    assert TorchErrorReader().offer_file(dump) is True


# --- the marker search runs on RE2: no lookaround, same lines ---------------------------------------------------------

_OLD_NCCL_INFO = re.compile(rb"NCCL INFO (?!\w+: opCount )")
"""The marker as it was, with a lookahead RE2 does not have."""


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([b"NCCL INFO ", b"AllReduce", b": opCount ", b":", b" ", b"opCount", b"o", b"C",
                                 b"x", b"_", b"\t", b"\xc3\xa9", b": opC"]), min_size=1, max_size=8))
def test_the_nccl_marker_without_lookahead_marks_the_same_lines(pieces):
    line = b"".join(pieces)
    assert bool(marker_pattern("NCCL INFO " + _NOT_A_COLLECTIVE).search(line)) == bool(_OLD_NCCL_INFO.search(line))


# --- damaged archives: a reason, never a traceback --------------------------------------------------------------------

_SMALL_BUNDLE = tar_bytes([("b/nvml.json", NVML[:4000]), ("b/dmesg.txt", XID79 * 20),
                            ("b/link", (tarfile.SYMTYPE, "/etc/shadow"))])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(compression=st.sampled_from(["tar", "gz", "xz"]), cut=st.floats(0, 1),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), max_size=6))
def test_a_damaged_archive_gives_a_reason_or_a_report_never_an_exception(tmp_path_factory, compression, cut, flips):
    data = bytearray({"tar": lambda raw: raw, "gz": gzip.compress, "xz": lzma.compress}[compression](_SMALL_BUNDLE))
    for where, mask in flips:
        data[min(int(where * len(data)), len(data) - 1)] ^= mask
    path = tmp_path_factory.mktemp("damaged") / "bundle.tar.gz"
    path.write_bytes(bytes(data[:max(1, int(cut * len(data)))]))
    try:
        bundle = read_bundle(path)
    except BundleError as error:
        assert str(error) and "\n" not in str(error)
    else:
        assert all("\n" not in sentence for _name, sentence in bundle.errors)
    try:
        diagnose([path])
    except InputError as error:
        assert str(error) and "\n" not in str(error)
