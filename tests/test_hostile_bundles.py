"""Bad and hostile bundles: bounded, explicit, nothing lost, nothing exposed.

Each test builds its bundle in tmp_path (huge files are sparse or generated, archives are made here) and holds the
outcome to exact statuses, exit codes and the names in the messages.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from helpers import messages, report_for, statuses, tar_bytes
from gpuready.evidence import reader
from gpuready.evidence.limits import InputLimits
from gpuready.evidence.layout import BUNDLE_FILES
from gpuready.evidence.reader import BundleError, read_bundle
from gpuready.evidence.sniff import kind_of
from gpuready.checks.registry import CheckOptions
from gpuready.cli.main import main
from gpuready.evidence.build import build_facts
from gpuready.facts.kernel_log import parse_kernel_log, relevant_lines
from gpuready.model import Verdict
from gpuready.pipeline import check_report

COLLECT = FIXTURES / "h200-collect"
NVML = (COLLECT / "nvml.json").read_bytes()
XID79 = b"[ 1843.308145] NVRM: Xid (PCI:0000:91:00): 79, pid=1234, GPU has fallen off the bus.\n"
FILLER = b"[ 1000.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd, and more text\n"

# Runs in a child process: the report of one bundle, and that process's peak resident memory.
_MEASURE = """
import json, resource, sys
from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.evidence.build import build_facts
from gpuready.pipeline import check_report
def peak_rss_mib():
    # VmHWM belongs to this process image; ru_maxrss survives exec, so it would report pytest's own peak.
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
report = check_report(build_facts(read_bundle(sys.argv[1])), CheckOptions())
print(json.dumps({"xid": [f.status.value for f in report.findings if f.check_id == "health.xid"],
                  "exit_code": report.exit_code(), "sources": report.facts["sources"],
                  "peak_rss_mib": peak_rss_mib()}))
"""


def _measure(bundle: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", _MEASURE, str(bundle)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _folder(tmp_path: Path, name: str = "bundle", **files: bytes | str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for file_name, content in files.items():
        path = folder / file_name.replace("__", ".").replace("_dash_", "-")
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return folder


def _tar(path: Path, members: list[tuple[str, object]]) -> Path:
    """A .tar.gz of `members` (see helpers.tar_bytes)."""
    path.write_bytes(gzip.compress(tar_bytes(members)))
    return path


def _bundle_states(report) -> dict:
    return {name: state for name, state in report.facts["sources"].items() if state != "missing"}


# --- 1. No silent truncation, bounded memory ------------------------------------------------------------------------

def test_a_100_mb_kernel_log_is_read_to_its_last_line_in_bounded_memory(tmp_path):
    folder = tmp_path / "bundle"
    folder.mkdir()
    with open(folder / "dmesg.txt", "wb") as log:
        block = FILLER * 10_000
        for _ in range(100_000_000 // len(block) + 1):
            log.write(block)
        log.write(XID79)  # the very last line
    assert (folder / "dmesg.txt").stat().st_size > 100_000_000
    measured = _measure(folder)
    assert measured["xid"] == ["fail"] and measured["exit_code"] == 1
    assert measured["sources"]["dmesg.txt"] == "parsed"  # read whole: no `read in part`
    assert measured["peak_rss_mib"] < 200


def test_an_8_gib_sparse_kernel_log_is_read_to_its_end_in_bounded_memory(tmp_path):
    folder = tmp_path / "bundle"
    folder.mkdir()
    with open(folder / "dmesg.txt", "wb") as log:
        log.truncate(8 << 30)
        log.seek(8 << 30)
        log.write(XID79)
    with open(folder / "dmesg.txt", "rb") as log:
        try:
            sparse = os.lseek(log.fileno(), 0, os.SEEK_DATA) > 0
        except (AttributeError, OSError):
            sparse = False
    if not sparse:
        pytest.skip("this file system does not keep sparse files (or cannot say where their data is)")
    started = time.monotonic()
    measured = _measure(folder)
    assert measured["xid"] == ["fail"] and measured["exit_code"] == 1
    assert measured["peak_rss_mib"] < 200
    assert time.monotonic() - started < 60


def test_a_nul_stretch_in_a_kernel_log_is_dropped_not_read_as_binary(tmp_path):
    # What a crash leaves in syslog files: a run of NUL bytes, then the next boot's lines.
    folder = _folder(tmp_path, dmesg__txt=FILLER * 10 + bytes(3 << 20) + XID79)
    report = report_for(folder)
    assert _bundle_states(report)["dmesg.txt"] == "parsed"
    assert statuses(report, "health.xid") == ["fail"]


def test_a_kernel_log_past_the_kept_lines_or_with_endless_lines_says_so(tmp_path):
    report = report_for(_folder(tmp_path, "many", dmesg__txt=XID79 * 100), limits=InputLimits(max_log_kept_bytes=4096))
    assert _bundle_states(report)["dmesg.txt"].startswith(
        "parsed; read in part: its lines about NVIDIA, NVSwitch, PCIe and IOMMU passed the 4 KiB gpuready keeps after ")
    assert statuses(report, "bundle.truncated") == ["warn"] and statuses(report, "health.xid") == ["fail"]
    # One line of 1 MiB without a newline (a binary blob would not be text): cut, and the Xid after it still found.
    report = report_for(_folder(tmp_path, "long", dmesg__txt=b"x" * (1 << 20) + b"\n" + XID79))
    assert _bundle_states(report)["dmesg.txt"] == \
        "parsed; read in part: 1 line(s) longer than 64 KiB were cut to their first 64 KiB"
    assert statuses(report, "health.xid") == ["fail"]


def test_names_with_terminal_escapes_are_written_out(tmp_path):
    archive = _tar(tmp_path / "esc.tar.gz", [("b/nvml.json", NVML), ("b/\x1b]0;owned\x07.txt", b"hi\n"),
                                            ("x/\x1b[2Jy", b"a")])
    report = report_for(archive)
    assert _bundle_states(report) == {"\\x1b]0;owned\\x07.txt": "ignored: not a tool output gpuready recognises",
                                      "x/\\x1b[2Jy": "rejected: outside the bundle's folder (b/)",
                                      "nvml.json": "parsed"}
    assert "\x1b" not in json.dumps(report.to_dict(), ensure_ascii=False)


def test_the_kernel_log_keeps_only_its_parser_lines_and_gives_the_same_events():
    text = (FIXTURES / "public" / "xid" / "xid79-no-xid-multiline-dmesg.txt").read_text()
    indented = "[  100.000000] pcieport 0000:00:01.0: something\n    NVRM: continued on an indented line\n"
    for log in (text, indented + text, "\n".join(FILLER.decode() for _ in range(50)) + "\n" + indented):
        kept = list(relevant_lines(io.StringIO(log)))
        assert parse_kernel_log(kept) == parse_kernel_log(log)
        assert parse_kernel_log("".join(kept)) == parse_kernel_log(log)
        assert parse_kernel_log(io.StringIO(log)) == parse_kernel_log(log)
        assert all(any(marker in line for marker in ("NVRM", "nvswitch", "AER", "PCIe Bus Error", "iommu:",
                                                     "GPU reset executed")) or not line[:1].isspace()
                   for line in kept)


def test_a_file_parsed_whole_over_the_cap_is_read_up_to_it_and_says_so(tmp_path, monkeypatch):
    limits = InputLimits(max_file_bytes=1 << 20)
    packages = "".join(f"package{index}==1.0.{index}\n" for index in range(150_000)).encode()  # about 3 MiB
    folder = tmp_path / "bundle"
    shutil.copytree(COLLECT, folder)
    (folder / "pip-freeze.txt").write_bytes(packages)
    archive = _tar(tmp_path / "bundle.tar.gz", [(f"bundle/{path.name}", path.read_bytes())
                                               for path in sorted(folder.iterdir())])
    for bundle in (folder, archive):
        report = report_for(bundle, limits=limits)
        state = report.facts["sources"]["pip-freeze.txt"]
        assert state == (f"parsed; read in part: only its first 1 MiB of {len(packages) / 2**20:.1f} MiB were read "
                         "(the most gpuready reads of a file it parses whole is 1 MiB); the rest was not parsed")
        assert statuses(report, "bundle.truncated") == ["warn"]
        assert messages(report, "bundle.truncated").startswith("pip-freeze.txt was read in part: only its first 1 MiB")
        assert report.verdict() == Verdict.READY_WITH_WARNINGS and report.exit_code() == 0


def test_sniffing_reads_only_the_head_of_a_file():
    chatter = b"".join(b"line %d of a long build log\n" % index for index in range(100_000))  # 2.8 MB
    raw = _CountingReader(chatter + (FIXTURES / "public" / "dgx-h100-nvswitch" / "nvidia-smi-topo.txt").read_bytes())
    bundle_reader = reader.BundleReader()
    bundle_reader.read_entry("build.log", raw, len(raw.getvalue()))
    assert bundle_reader.bundle.not_read == {"build.log": "ignored: not a tool output gpuready recognises"}
    assert raw.bytes_read <= reader.HEAD_BYTES
    assert kind_of("x" * reader.HEAD_BYTES + "<nvidia_smi_log>") is None


class _CountingReader(io.BytesIO):
    bytes_read = 0

    def read(self, size=-1):
        data = super().read(size)
        self.bytes_read += len(data)
        return data


# --- 2. Nothing read is not ready -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["empty folder", "unrelated files", "tar of links only"])
def test_nothing_read_is_unknown_and_exit_2_with_the_list(tmp_path, capsys, kind):
    if kind == "empty folder":
        bundle = _folder(tmp_path)
        listed = []
    elif kind == "unrelated files":
        bundle = _folder(tmp_path, notes__txt="Meeting notes: the GPUs arrived.\n", photo__jpg=os.urandom(4096))
        listed = ["notes.txt (ignored: not a tool output gpuready recognises)", "photo.jpg (ignored: not text)"]
    else:
        bundle = _tar(tmp_path / "links.tar.gz", [("b/nvml.json", (tarfile.SYMTYPE, "/etc/nvml.json")),
                                                 ("b/dmesg.txt", (tarfile.LNKTYPE, "b/elsewhere"))])
        listed = ["nvml.json (skipped: a symbolic link (to /etc/nvml.json) in the archive, not followed)",
                  "dmesg.txt (skipped: a hard link (to b/elsewhere) in the archive, not followed)"]
    report = report_for(bundle)
    assert report.verdict() == Verdict.UNKNOWN and report.exit_code() == 2
    for item in listed:
        assert item in report.not_enough_evidence.english()
    assert main(["check", "--bundle", str(bundle), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["verdict"] == "unknown" and document["exit_code"] == 2


def test_a_symlink_in_a_folder_is_skipped_and_named_never_followed(tmp_path):
    outside = tmp_path / "kern.log"
    outside.write_bytes(XID79)
    folder = _folder(tmp_path, nvml__json=NVML)
    (folder / "dmesg.txt").symlink_to(outside)
    (folder / "more").symlink_to(tmp_path)  # a link to a folder
    bundle = read_bundle(folder)
    assert "dmesg.txt" not in bundle and "more" not in bundle
    report = check_report(build_facts(bundle), CheckOptions())
    states = _bundle_states(report)
    assert states["dmesg.txt"] == f"skipped: a symbolic link (to {outside}), not followed"
    assert states["more"] == f"skipped: a symbolic link (to {tmp_path}), not followed"
    assert statuses(report, "bundle.skipped") == ["warn", "warn"]
    assert f"dmesg.txt was not read: a symbolic link (to {outside}), not followed." in \
        messages(report, "bundle.skipped")
    assert statuses(report, "health.xid") == ["skip"]  # the Xid in the linked file was not read
    assert report.exit_code() == 0 and report.verdict() == Verdict.READY_WITH_WARNINGS


def test_a_folder_where_a_bundle_file_should_be_is_unreadable(tmp_path, capsys):
    folder = _folder(tmp_path, nvml__json=NVML)
    (folder / "nvidia-smi-q.xml").mkdir()
    (folder / "logs").mkdir()
    out = tmp_path / "report.json"
    assert main(["check", "--bundle", str(folder), "--json", "--out", str(out)]) == 2
    document = json.loads(out.read_text())
    errors = [f for f in document["findings"] if f["check_id"] == "bundle.unreadable"]
    assert [(f["status"], f["observed"], f["message"]) for f in errors] == [
        ("error", "nvidia-smi-q.xml", "nvidia-smi-q.xml is a folder, not the file `nvidia-smi -q -x` writes")]
    assert document["facts"]["sources"]["logs"] == \
        "skipped: a folder (a bundle's files sit in one folder; its contents were not read)"


def test_a_fifo_under_a_bundle_name_is_skipped_not_waited_on(tmp_path):
    folder = _folder(tmp_path, nvml__json=NVML)
    os.mkfifo(folder / "dmesg.txt")
    report = report_for(folder)
    assert _bundle_states(report)["dmesg.txt"] == "skipped: not a regular file (a device, FIFO or socket)"
    assert statuses(report, "bundle.skipped") == ["warn"]


@pytest.mark.parametrize("name", sorted(BUNDLE_FILES))
def test_random_bytes_under_any_bundle_name_are_not_text_not_parsed(tmp_path, name):
    garbage = os.urandom(20_000)
    folder = _folder(tmp_path, nvml__json=NVML) if name != "nvml.json" else _folder(tmp_path)
    (folder / name).write_bytes(garbage)
    report = report_for(folder)
    state = report.facts["sources"][name]
    assert state.startswith("unreadable: is not text: "), state
    sentence = messages(report, "bundle.unreadable")
    assert sentence.startswith(f"{name} is not text: ") and sentence.count(". ") == 0
    assert report.exit_code() == 2
    # The live path (no reader) refuses it the same way, before any parser sees it.
    facts = build_facts({name: garbage.decode("utf-8", errors="replace")})
    assert facts.sources[name].startswith("unreadable: is not text: ")


# --- 3. Tar members -------------------------------------------------------------------------------------------------

def test_members_outside_the_bundle_folder_are_rejected_by_name(tmp_path):
    archive = _tar(tmp_path / "evil.tar.gz", [
        ("b/nvml.json", NVML), ("../../etc/cron.d/job", b"* * * * * root true\n"), ("/etc/shadow", b"root:x\n"),
        ("other/kern.log", XID79), ("b/nvml.json", b"{}"), ("b/sub/notes.txt", b"hello\n")])
    report = report_for(archive)
    states = _bundle_states(report)
    assert states == {
        "nvml.json": "parsed",
        "../../etc/cron.d/job": "rejected: a path that climbs out of the archive (..)",
        "/etc/shadow": "rejected: an absolute path",
        "other/kern.log": "rejected: outside the bundle's folder (b/)",
        "b/nvml.json (copy 2)": "rejected: a second member of the same name (the first was read)",
        "b/sub/notes.txt": "skipped: in a subfolder of the bundle (a bundle's files sit in one folder)",
    }
    assert messages(report, "bundle.unreadable") == (
        "evil.tar.gz holds members that are not files of its bundle (b/), rejected unread: ../../etc/cron.d/job, "
        "/etc/shadow, other/kern.log, b/nvml.json (copy 2)")
    assert statuses(report, "health.xid") == ["skip"]  # other/kern.log was not merged in
    assert len(report.facts["gpus"]) == 1  # the first nvml.json, not the `{}` that followed it
    assert report.exit_code() == 2


def test_a_tar_of_several_bundles_is_refused_pointing_to_fleet(tmp_path, capsys):
    archive = _tar(tmp_path / "fleet.tar.gz", [("host1/nvml.json", NVML), ("host2/nvml.json", NVML),
                                               ("host2/dmesg.txt", XID79)])
    with pytest.raises(BundleError) as raised:
        read_bundle(archive)
    assert str(raised.value) == (
        f"{archive} holds 2 bundles (host1/, host2/); check reads one machine's bundle: check each folder on its "
        "own, or compare the machines with `gpuready fleet` (a later release)")
    assert main(["check", "--bundle", str(archive)]) == 2
    assert "`gpuready fleet`" in capsys.readouterr().err


def test_a_tar_of_one_folder_at_any_depth_or_none_is_read(tmp_path):
    for members in ([("nvml.json", NVML)], [("./", None), ("./nvml.json", NVML)],
                    [("tmp/", None), ("tmp/gpuready-bundle/", None), ("tmp/gpuready-bundle/nvml.json", NVML)]):
        report = report_for(_tar(tmp_path / "one.tar.gz", members))
        assert _bundle_states(report) == {"nvml.json": "parsed"}, members
        assert report.exit_code() == 0


def test_a_decompression_bomb_member_is_not_inflated_whole(tmp_path):
    # 10 GiB of zeros in a 10 MB .tar.gz (gzip members of 1 MiB of zeros, concatenated), then one more member.
    path = tmp_path / "bomb.tar.gz"
    bomb = tarfile.TarInfo("b/nvidia-smi-q.xml")
    bomb.size = 10 << 30
    after = tarfile.TarInfo("b/nvml.json")
    after.size = len(NVML)
    zeros = gzip.compress(bytes(1 << 20), 9)
    with open(path, "wb") as archive:
        archive.write(gzip.compress(bomb.tobuf(tarfile.GNU_FORMAT)))
        for _ in range(10 << 10):
            archive.write(zeros)
        archive.write(gzip.compress(after.tobuf(tarfile.GNU_FORMAT) + NVML + bytes(-len(NVML) % 512) + bytes(1024)))
    started = time.monotonic()
    report = report_for(path)
    assert time.monotonic() - started < 20
    states = _bundle_states(report)
    assert states["nvidia-smi-q.xml"].startswith("unreadable: is not text: ")
    assert states["bomb.tar.gz (the archive)"] == (
        "read in part: reading it stopped at b/nvidia-smi-q.xml (of 10 GiB): the members pass the 1 GiB gpuready "
        "inflates from one archive; any members after it were not read")
    assert "nvml.json" not in states  # after the bomb: not reached, and said so above
    assert statuses(report, "bundle.truncated") == ["warn"]
    assert report.verdict() == Verdict.UNKNOWN and report.exit_code() == 2


def test_a_kernel_log_member_is_streamed_within_the_archive_budget(tmp_path, monkeypatch):
    limits = InputLimits(max_archive_bytes=4 << 20)
    log = FILLER * 20_000 + XID79  # 1.8 MB, under the budget: read to its last line
    report = report_for(_tar(tmp_path / "a.tar.gz", [("b/nvml.json", NVML), ("b/dmesg.txt", log)]), limits=limits)
    assert _bundle_states(report)["dmesg.txt"] == "parsed" and statuses(report, "health.xid") == ["fail"]
    log = FILLER * 60_000 + XID79  # 5.4 MB: over it, read in part and said so
    report = report_for(_tar(tmp_path / "b.tar.gz", [("b/nvml.json", NVML), ("b/dmesg.txt", log)]), limits=limits)
    assert _bundle_states(report)["dmesg.txt"].startswith("parsed; read in part: only its first 4 MiB of 5.")
    assert statuses(report, "bundle.truncated") == ["warn", "warn"]  # the member, and the archive


def test_an_archive_with_too_many_members_is_read_in_part(tmp_path, monkeypatch):
    members = [("b/nvml.json", NVML)] + [(f"b/note{index:02}.txt", b"hello\n") for index in range(20)]
    report = report_for(_tar(tmp_path / "many.tar.gz", members), limits=InputLimits(max_members=10))
    states = _bundle_states(report)
    assert states["many.tar.gz (the archive)"] == \
        "read in part: it holds more than 10 members; those after b/note08.txt were not read"
    assert states["nvml.json"] == "parsed" and "note09.txt" not in states


def test_a_damaged_archive_keeps_what_was_read_and_names_where_it_broke(tmp_path):
    archive = _tar(tmp_path / "cut.tar.gz", [("b/nvml.json", NVML), ("b/dmesg.txt", FILLER * 5000 + XID79)])
    data = archive.read_bytes()
    archive.write_bytes(data[:len(data) // 2])  # a download cut halfway
    report = report_for(archive)
    assert _bundle_states(report)["nvml.json"] == "parsed"
    assert messages(report, "bundle.unreadable").startswith("cut.tar.gz (the archive) is damaged in or after member")
    assert report.exit_code() == 2


# --- 4. Permissions -------------------------------------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_an_input_error_and_the_report_is_still_written(tmp_path):
    folder = _folder(tmp_path, nvml__json=NVML, dmesg__txt=XID79)
    (folder / "dmesg.txt").chmod(0)
    out = tmp_path / "report.json"
    assert main(["check", "--bundle", str(folder), "--json", "--out", str(out)]) == 2
    document = json.loads(out.read_text())
    assert [(f["status"], f["message"]) for f in document["findings"] if f["check_id"] == "bundle.unreadable"] == \
        [("error", "dmesg.txt cannot be read (Permission denied)")]
    assert document["exit_code"] == 2


def test_a_permission_error_on_open_is_an_input_error_even_as_root(tmp_path, monkeypatch, capsys):
    folder = _folder(tmp_path, nvml__json=NVML, dmesg__txt=XID79)
    real_open = os.open

    def refuse_dmesg(path, flags, *args, **kwargs):
        if str(path).endswith("dmesg.txt"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse_dmesg)
    out = tmp_path / "report.json"
    assert main(["check", "--bundle", str(folder), "--json", "--out", str(out)]) == 2
    document = json.loads(out.read_text())
    assert document["facts"]["sources"]["dmesg.txt"] == "unreadable: cannot be read (Permission denied)"
    assert [f["message"] for f in document["findings"] if f["check_id"] == "bundle.unreadable"] == \
        ["dmesg.txt cannot be read (Permission denied)"]
    assert "internal error" not in capsys.readouterr().err


# --- 5. Parser failures are one sentence about the file -------------------------------------------------------------

def test_deeply_nested_xml_is_one_sentence_not_a_crash(tmp_path):
    nested = "<nvidia_smi_log>" + "<a>" * 100_000 + "</a>" * 100_000 + "</nvidia_smi_log>"
    report = report_for(_folder(tmp_path, nvidia_dash_smi_dash_q__xml=nested, nvml__json=NVML))
    assert messages(report, "bundle.unreadable") == (
        "nvidia-smi-q.xml could not be parsed as nvidia-smi-q.xml: its layout is not what that tool prints "
        "(RecursionError at the parser)")
    assert report.exit_code() == 2


def test_deeply_nested_json_is_one_sentence(tmp_path):
    report = report_for(_folder(tmp_path, nvml__json="[" * 100_000))
    assert messages(report, "bundle.unreadable") == (
        "nvml.json could not be parsed as nvml.json: its layout is not what that tool prints "
        "(RecursionError at the parser)")
    assert report.exit_code() == 2


@pytest.mark.parametrize("error", [IndexError("list index out of range"), KeyError("bus_id"),
                                   TypeError("'NoneType' object is not subscriptable"),
                                   ValueError("invalid literal for int() with base 10: 'x'")])
def test_python_internals_never_reach_the_message(monkeypatch, error):
    def broken(text):
        raise error

    monkeypatch.setattr("gpuready.evidence.build.parse_lspci", broken)
    facts = build_facts({"lspci-vv.txt": "00:00.0 Host bridge: Intel Corporation Device 1234\n"})
    name = type(error).__name__
    assert facts.input_errors == [("lspci-vv.txt", "lspci-vv.txt could not be parsed as lspci-vv.txt: its layout is "
                                                   f"not what that tool prints ({name} at the parser)")]


def test_a_parsers_own_sentence_is_kept(tmp_path):
    report = report_for(_folder(tmp_path, meminfo__txt="Buffers: 12 kB\n", nvml__json=NVML))
    assert messages(report, "bundle.unreadable") == "meminfo.txt could not be parsed as meminfo.txt: no MemTotal line"
