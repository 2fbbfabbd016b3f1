"""`collect --out/--tar/--force`: where a bundle goes, and what is refused (exit 2, one sentence, nothing touched)."""

import json
import os
import re
import tarfile

import pytest

from conftest import FIXTURES
from gpuready.cli import main as cli
from gpuready.evidence import collect as collect_module
from gpuready.verbs import collect as collect_verb
from gpuready.evidence.collect import OutputError, plan_output, write_bundle
from gpuready.evidence.layout import BUNDLE_FILES
from helpers import report_for

RECORDED = {path.name: path.read_text() for path in (FIXTURES / "h200-collect").iterdir() if path.name != "README.md"}


@pytest.fixture
def fake_collect(monkeypatch):
    """collect() hands back the recorded H200 bundle; no tool runs. Counts its calls."""
    calls = []

    def collect(with_torch=True):
        calls.append(with_torch)
        return dict(RECORDED), json.loads(RECORDED["manifest.json"])
    monkeypatch.setattr(collect_verb, "collect", collect)
    return calls


def run(capsys, *args):
    code = cli.main(["collect", *map(str, args), "--fast"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(capsys, fake_collect, *args):
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and fake_collect == [], (code, out, err)  # refused before collecting
    assert err.count("\n") == 1 and err.startswith("gpuready: ") and "Traceback" not in err
    return err.strip().removeprefix("gpuready: ")


def test_new_folder(tmp_path, capsys, fake_collect):
    code, out, err = run(capsys, "--out", tmp_path / "b")
    assert code == 0 and err == "" and fake_collect == [False]
    assert sorted(path.name for path in (tmp_path / "b").iterdir()) == sorted(RECORDED)
    assert out == (f"gpuready: wrote {len(RECORDED)} files to {tmp_path / 'b'}; not collected: ibv_devinfo.txt, "
                   "ip-addr.txt, lspci-vv.txt (manifest.json says why)\n")
    assert report_for(tmp_path / "b").to_dict()["verdict"] == report_for(FIXTURES / "h200-collect").to_dict()["verdict"]


def test_empty_folder_is_used(tmp_path, capsys, fake_collect):
    (tmp_path / "b").mkdir()
    assert run(capsys, "--out", tmp_path / "b")[0] == 0
    assert len(list((tmp_path / "b").iterdir())) == len(RECORDED)


def _old_bundle(folder):
    folder.mkdir()
    for name in ("manifest.json", "nvidia-smi.txt", "lspci-vv.txt"):  # lspci-vv.txt: not in the new bundle
        (folder / name).write_text(f"old {name}")


def test_non_empty_folder_is_refused_and_kept(tmp_path, capsys, fake_collect):
    _old_bundle(tmp_path / "b")
    assert refused(capsys, fake_collect, "--out", tmp_path / "b") == (
        f"{tmp_path / 'b'} is not empty (an older bundle there would be read as this one); give a new or empty "
        "folder, or add --force to remove its contents first")
    assert (tmp_path / "b" / "lspci-vv.txt").read_text() == "old lspci-vv.txt"


def test_force_replaces_an_old_bundle_and_leaves_no_stale_file(tmp_path, capsys, fake_collect):
    _old_bundle(tmp_path / "b")
    assert run(capsys, "--out", tmp_path / "b", "--force")[0] == 0
    assert sorted(path.name for path in (tmp_path / "b").iterdir()) == sorted(RECORDED)  # lspci-vv.txt is gone
    assert (tmp_path / "b" / "manifest.json").read_text() == RECORDED["manifest.json"]


@pytest.mark.parametrize("stranger", ["notes.txt", ".bashrc", "README.md", "subfolder", "env.txt-link"])
def test_force_refuses_a_folder_that_is_not_a_bundle(tmp_path, capsys, fake_collect, stranger):
    _old_bundle(tmp_path / "b")
    precious = tmp_path / "precious.txt"
    precious.write_text("keep")
    if stranger == "subfolder":
        (tmp_path / "b" / "sysfs.txt").mkdir()  # a bundle name, but a folder
        stranger = "sysfs.txt"
    elif stranger == "env.txt-link":
        (tmp_path / "b" / "env.txt").symlink_to(precious)  # a bundle name, but a link
        stranger = "env.txt"
    else:
        (tmp_path / "b" / stranger).write_text("mine")
    before = sorted(path.name for path in (tmp_path / "b").iterdir())
    assert refused(capsys, fake_collect, "--out", tmp_path / "b", "--force") == (
        f"refusing --force: {tmp_path / 'b'} holds {stranger!r}, which is not a bundle file; empty it yourself or "
        "choose another --out")
    assert sorted(path.name for path in (tmp_path / "b").iterdir()) == before and precious.read_text() == "keep"


def test_force_on_a_home_like_folder(tmp_path, capsys, fake_collect):
    home = tmp_path / "home"
    (home / "alice").mkdir(parents=True)
    (home / "notes.txt").write_text("x")
    assert refused(capsys, fake_collect, "--out", home, "--force") == (
        f"refusing --force: {home} holds 'alice' and 1 more entries that are not bundle files; empty it yourself "
        "or choose another --out")
    assert (home / "alice").is_dir() and (home / "notes.txt").exists()


def test_missing_parent_is_not_created(tmp_path, capsys, fake_collect):
    for out in (tmp_path / "no" / "such" / "b", tmp_path / "no" / "b.tar.gz"):
        assert refused(capsys, fake_collect, "--out", out) == (
            f"folder {out.parent} does not exist; create it first (collect creates only the last part of --out)")
    assert not (tmp_path / "no").exists()


def test_an_existing_file_is_not_a_folder(tmp_path, capsys, fake_collect):
    (tmp_path / "f").write_text("x")
    assert refused(capsys, fake_collect, "--out", tmp_path / "f", "--force") == (
        f"{tmp_path / 'f'} already exists and is not a folder; choose another --out")
    assert (tmp_path / "f").read_text() == "x"


def _members(archive):
    with tarfile.open(archive) as tar:
        return [member.name for member in tar.getmembers()]


def test_tar_appends_the_suffix_to_exactly_that_path(tmp_path, capsys, fake_collect):
    code, out, _ = run(capsys, "--out", tmp_path / "node17", "--tar")
    assert code == 0 and sorted(os.listdir(tmp_path)) == ["node17.tar.gz"]
    members = _members(tmp_path / "node17.tar.gz")
    assert members[-1] == "node17/manifest.json"  # written last: an archive with a manifest is whole
    assert sorted(members) == sorted(f"node17/{name}" for name in RECORDED)
    assert out.startswith(f"gpuready: wrote {len(RECORDED)} files to {tmp_path / 'node17.tar.gz'};")
    assert report_for(tmp_path / "node17.tar.gz").to_dict()["verdict"] == "ready_with_warnings"


@pytest.mark.parametrize("name, member_folder", [("x.tar.gz", "x"), ("x.tgz", "x"), ("v1.2.tar.gz", "v1.2"),
                                                 (".tar.gz", "bundle")])
def test_an_archive_name_is_used_as_given_and_implies_tar(tmp_path, capsys, fake_collect, name, member_folder):
    assert run(capsys, "--out", tmp_path / name)[0] == 0  # no --tar: the name says archive
    assert os.listdir(tmp_path) == [name]
    assert {member.split("/")[0] for member in _members(tmp_path / name)} == {member_folder}


@pytest.mark.parametrize("out", ["{tmp}", "{tmp}/", ".", "..", "/"])
def test_tar_never_writes_beside_a_folder(tmp_path, capsys, fake_collect, monkeypatch, out):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = out.format(tmp=work)
    message = refused(capsys, fake_collect, "--out", out, "--tar")
    assert re.fullmatch(rf"{re.escape(out)} is a folder; with --tar, --out names the archive itself \(for example "
                        r".*bundle\.tar\.gz\)", message), message
    assert os.listdir(tmp_path) == ["work"] and os.listdir(work) == []


def test_an_existing_archive_needs_force(tmp_path, capsys, fake_collect):
    archive = tmp_path / "b.tar.gz"
    archive.write_bytes(b"old")
    assert refused(capsys, fake_collect, "--out", archive) == (
        f"{archive} already exists; add --force to replace it, or choose another --out")
    assert archive.read_bytes() == b"old"
    assert run(capsys, "--out", tmp_path / "b", "--tar", "--force")[0] == 0
    assert len(_members(archive)) == len(RECORDED) and os.listdir(tmp_path) == ["b.tar.gz"]  # no partial file left


def test_an_archive_name_that_is_a_folder_is_refused_even_with_force(tmp_path, capsys, fake_collect):
    (tmp_path / "b.tar.gz").mkdir()
    message = refused(capsys, fake_collect, "--out", tmp_path / "b.tar.gz", "--force")
    assert message.startswith(f"{tmp_path / 'b.tar.gz'} is a folder; with --tar")


def test_write_failure_is_one_sentence(tmp_path, capsys, fake_collect, monkeypatch):
    def fail(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(collect_module, "_write_archive", fail)
    code, out, err = run(capsys, "--out", tmp_path / "b.tar.gz")
    assert code == 2 and out == ""
    assert err == f"gpuready: cannot write the bundle to {tmp_path / 'b.tar.gz'}: Permission denied\n"


def test_write_bundle_api(tmp_path):
    files = {"env.txt": "A=1\n", "manifest.json": "{}"}
    assert write_bundle(files, tmp_path / "b", as_tar=False) == tmp_path / "b"
    with pytest.raises(OutputError):
        write_bundle(files, tmp_path / "b", as_tar=False)
    assert write_bundle({"env.txt": "B=2\n"}, tmp_path / "b", as_tar=False, force=True) == tmp_path / "b"
    assert os.listdir(tmp_path / "b") == ["env.txt"] and (tmp_path / "b" / "env.txt").read_text() == "B=2\n"
    with pytest.raises(ValueError):
        write_bundle({"../escape.txt": "x"}, tmp_path / "c", as_tar=False)
    assert plan_output(tmp_path / "c", as_tar=True).path == tmp_path / "c.tar.gz"
    assert set(BUNDLE_FILES) >= set(RECORDED)  # what --force may remove: only names a bundle can hold


def test_redact_through_the_command_line(tmp_path, capsys, fake_collect, monkeypatch):
    monkeypatch.setattr(collect_verb, "collect", lambda with_torch=True: (
        {**RECORDED, "env.txt": "MASTER_ADDR=trainer-7\n"}, json.loads(RECORDED["manifest.json"])))
    assert cli.main(["collect", "--out", str(tmp_path / "b"), "--redact"]) == 0
    assert "trainer-7" not in (tmp_path / "b" / "env.txt").read_text()
    assert re.fullmatch(r"host-[0-9a-f]{8}", json.loads((tmp_path / "b" / "manifest.json").read_text())["host"])


def test_a_path_that_cannot_be_looked_at_is_one_sentence(tmp_path, capsys, fake_collect):
    out = tmp_path / ("x" * 300)  # longer than a file name may be: stat fails with ENAMETOOLONG
    assert refused(capsys, fake_collect, "--out", out / "b") == f"{out / 'b'} cannot be used (File name too long)"
