"""diagnose's framework (evidence/stream.py, verbs/diagnose/run.py) with a reader of its own: what reaches the readers, with which
line numbers, from which inputs, and how findings are ranked."""

import io
import tarfile

import pytest

from gpuready.evidence import lines
from gpuready.evidence.limits import DEFAULT_LIMITS
from gpuready.evidence.walk import InputError
from gpuready.facts.log_lines import Reader
from gpuready.model import Finding, Status, Subject
from gpuready.verbs.diagnose import run


class Collecting(Reader):
    name = "collecting"
    markers = r"MARK\d"

    def __init__(self):
        self.lines = []

    def feed(self, line):
        self.lines.append(line)


def _scan(monkeypatch, tmp_path, files, chunk=None):
    if chunk:
        monkeypatch.setattr(lines, "CHUNK_BYTES", chunk)
    reader = Collecting()
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    report = run.diagnose([tmp_path / name for name in files], readers=lambda: [reader])
    return reader, report


@pytest.mark.parametrize("chunk", [None, 7, 64])
def test_line_numbers_survive_chunk_edges_crlf_ansi_and_nul(monkeypatch, tmp_path, chunk):
    data = (b"noise\r\nMARK1 first\r\n\x1b[31mMARK2 red\x1b[0m\r\nmore noise\n\n"
            b"two MARK3 MARK4 on one line\nMA\x00RK5 with a NUL inside\nlast MARK6 without newline")
    reader, report = _scan(monkeypatch, tmp_path, {"log.txt": data}, chunk)
    assert [(line.number, line.text) for line in reader.lines] == [
        (2, "MARK1 first"), (3, "MARK2 red"), (6, "two MARK3 MARK4 on one line"), (7, "MARK5 with a NUL inside"),
        (8, "last MARK6 without newline")]
    assert [(line.source.rsplit("/", 1)[-1], line.number) for line in reader.lines] == [
        ("log.txt", 2), ("log.txt", 3), ("log.txt", 6), ("log.txt", 7), ("log.txt", 8)]
    inputs = report.facts["diagnose"]["inputs"]
    assert inputs[0]["lines"] == 8 and inputs[0]["fed"] == {"collecting": 5}


def test_a_long_line_is_cut_and_counted_once(monkeypatch, tmp_path):
    data = b"MARK1 " + b"x" * (DEFAULT_LIMITS.max_line_bytes * 3) + b"\nMARK2 after\n"
    reader, report = _scan(monkeypatch, tmp_path, {"long.log": data}, chunk=4096)
    assert [line.number for line in reader.lines] == [1, 2]
    assert len(reader.lines[0].text) <= 1600 and reader.lines[1].text == "MARK2 after"


def test_binary_junk_is_named_not_read(monkeypatch, tmp_path):
    junk = bytes(range(256)) * 400
    reader, report = _scan(monkeypatch, tmp_path, {"core": junk, "ok.log": b"MARK1\n"})
    notes = {entry["file"].rsplit("/", 1)[-1]: entry for entry in report.facts["diagnose"]["inputs"]}
    assert notes["core"]["kind"] == "binary" and notes["core"]["note"].startswith("not read: it is not text")
    assert [line.text for line in reader.lines] == ["MARK1"]


def test_folders_archives_and_links(tmp_path):
    folder = tmp_path / "ticket"
    (folder / "node2").mkdir(parents=True)
    (folder / "rank0.err").write_text("MARK1 in a folder\n")
    (folder / "node2" / "out").write_text("ok\nMARK2 deeper\n")
    (folder / "link").symlink_to("/etc/passwd")
    archive = tmp_path / "bundle.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        data = b"x\nMARK3 in an archive\n"
        info = tarfile.TarInfo("bundle/app.log")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    reader = Collecting()
    report = run.diagnose([folder, archive], readers=lambda: [reader])
    assert [(line.source.split("/", 1)[-1] if "tar" not in line.source else line.source.rsplit("/", 2)[-2] + "/" +
             line.source.rsplit("/", 1)[-1], line.number) for line in reader.lines] == [
        ("node2/out", 2), ("rank0.err", 1), ("bundle/app.log", 2)]
    notes = {entry["file"]: entry.get("note") for entry in report.facts["diagnose"]["inputs"]}
    assert notes["ticket/link"] == "a symbolic link: not followed"


def test_a_missing_path_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file or folder"):
        run.diagnose([tmp_path / "nope"], readers=lambda: [Collecting()])


def test_nothing_found_says_what_was_read(tmp_path):
    (tmp_path / "a.log").write_text("all quiet\n")
    report = run.diagnose([tmp_path / "a.log"], readers=lambda: [Collecting()])
    assert [(f.check_id, f.status) for f in report.findings] == [("diagnose.nothing_found", Status.PASS)]
    assert "1 file(s) read (1 log)" in report.findings[0].message
    assert report.exit_code() == 2 and report.verdict().value == "unknown"


def test_root_causes_come_first_and_consequences_follow_their_cause():
    host = Subject(host="h")
    shm = Finding(check_id="nccl.shm_too_small", status=Status.FAIL, subject=host, message="shm")
    socket_error = Finding(check_id="nccl.warn", status=Status.FAIL, subject=host, message="socket",
                           consequence_of="nccl.shm_too_small")
    remote = Finding(check_id="nccl.error", status=Status.FAIL, subject=host, message="remote",
                     consequence_of="nccl.warn")
    unrelated = Finding(check_id="gpu.reset", status=Status.WARN, subject=host, message="reset")
    orphan = Finding(check_id="xid.45", status=Status.WARN, subject=host, message="orphan",
                     consequence_of="xid.79")  # its cause is not among the findings: it stands as a root
    ordered = run.rank([unrelated, remote, socket_error, orphan, shm])
    assert [f.message for f in ordered] == ["shm", "socket", "remote", "reset", "orphan"]
