"""--json is strict JSON in UTF-8 whatever bytes the inputs hold (issue 32): a file name or line with undecodable
bytes reaches Python as lone surrogates (`\\udcff`, os.fsdecode's surrogateescape); json.dumps would keep them as
`\\udcff` escapes, which Python reads back but a strict parser (jq, a UTF-8 decoder) refuses. They are written as
U+FFFD, as the console writes them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FIXTURES
from gpuready.cli.main import main

H200_COLLECT = FIXTURES / "h200-collect"
XID79_DMESG = FIXTURES / "diagnose" / "kernel" / "akash-209-xid79-dmesg-T.txt"
"""`dmesg -T | grep NVRM` with Xid 79 (akash-network/support#209)."""
UNDECODABLE = st.binary(min_size=1, max_size=6).map(lambda raw: bytes(b | 0x80 for b in raw))
"""Bytes 0x80–0xff: never valid UTF-8 on their own (a lone continuation or lead byte)."""
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)


def _strict(out: str) -> dict:
    """What a strict reader sees: the bytes decode as UTF-8 and every string (escapes decoded) is valid Unicode."""
    raw = out.encode("utf-8", "surrogatepass")
    document = json.loads(raw.decode("utf-8", "strict"))
    for text in _strings(document):
        text.encode("utf-8", "strict")  # a lone surrogate, even one written as an escape, raises here
    return document


def _named(folder: Path, stem: bytes, suffix: bytes) -> Path:
    return Path(os.fsdecode(os.fsencode(folder) + b"/" + stem + suffix))


@SETTINGS
@given(name=UNDECODABLE, content=UNDECODABLE)
def test_check_bundle_json_is_strict_utf8(tmp_path_factory, capsys, name, content):
    bundle = tmp_path_factory.mktemp("bundle") / os.fsdecode(b"node" + name)
    shutil.copytree(H200_COLLECT, bundle)
    with open(bundle / "dmesg.txt", "ab") as log:
        log.write(b"[ 1.0] NVRM: " + content + b"\n")
    shutil.copy(XID79_DMESG, _named(bundle, b"dmesg-" + name, b".txt"))
    code = main(["check", "--bundle", str(bundle), "--json"])
    document = _strict(capsys.readouterr().out)
    assert code == document["exit_code"]


@SETTINGS
@given(name=UNDECODABLE, content=UNDECODABLE)
def test_diagnose_json_is_strict_utf8(tmp_path_factory, capsys, name, content):
    folder = tmp_path_factory.mktemp("ticket")
    log = _named(folder, b"rank" + name, b".log")
    log.write_bytes(XID79_DMESG.read_bytes() + b"NVRM: Xid (PCI:0000:00:06): 79, name=" + content + b"\n")
    code = main(["diagnose", str(log), "--json"])
    document = _strict(capsys.readouterr().out)
    assert code == document["exit_code"] == 1  # Xid 79: a GPU fell off the bus
    assert any("\ufffd" in text for text in _strings(document))  # the file's name, as the console shows it
