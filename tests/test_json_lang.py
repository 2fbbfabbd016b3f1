"""compare --json and fleet --json under --lang zh (issue 32): their sentences follow --lang as check's --json does
(`language` says which; message ids and values stay, so a reader renders them again in any language)."""

from __future__ import annotations

import json
import re
import shutil

from conftest import FIXTURES
from gpuready.cli.main import main

H200_COLLECT = FIXTURES / "h200-collect"
"""One healthy H200 recorded by `gpuready collect` (its README)."""
FLEET_RUNS = sorted((FIXTURES / "h200-validate-timing").glob("validate-default-*.json"))
CJK = re.compile(r"[\u4e00-\u9fff]")


def _json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_compare_json_follows_lang(tmp_path, capsys):
    """The recorded H200 bundle, then the same without meminfo.txt: host.memory_ratio warned (512 GiB of RAM for
    141 GB of GPU memory) and is now not judged for want of the file: it recovered, and its message says why."""
    without = tmp_path / "without-meminfo"
    shutil.copytree(H200_COLLECT, without)
    (without / "meminfo.txt").unlink()
    for bundle, name in ((H200_COLLECT, "base.json"), (without, "new.json")):
        main(["check", "--bundle", str(bundle), "--out", str(tmp_path / name)])
        capsys.readouterr()
    base, new = str(tmp_path / "base.json"), str(tmp_path / "new.json")
    _code, english = _json(capsys, "compare", "--json", base, new)
    code, chinese = _json(capsys, "compare", "--json", "--lang", "zh", base, new)
    assert code == 0 and "language" not in english and chinese["language"] == "zh"
    recovered = {entry["check_id"]: entry for entry in chinese["recovered"]}
    entry = recovered["host.memory_ratio"]
    assert (entry["base"], entry["new"]) == ("warn", "skip")
    assert CJK.search(entry["message"]) and "meminfo.txt" in entry["message"], entry["message"]
    assert "Not judged" in {e["check_id"]: e for e in english["recovered"]}["host.memory_ratio"]["message"]
    assert entry["message_id"] == "registry.not_judged"  # the id stays: `report` renders it again in English


def test_fleet_json_follows_lang(tmp_path, capsys):
    """Two recorded validate runs and a file cut off mid-JSON: the unreadable file's reason is Chinese."""
    for number, run in enumerate(FLEET_RUNS, start=1):
        document = json.loads(run.read_text())
        document["host"] = f"node{number}"
        (tmp_path / f"node{number}.json").write_text(json.dumps(document))
    (tmp_path / "node9.json").write_text('{"host": "node9", "findings": [')
    _code, english = _json(capsys, "fleet", "--json", str(tmp_path))
    code, chinese = _json(capsys, "fleet", "--json", "--lang", "zh", str(tmp_path))
    assert code == 2 and chinese["language"] == "zh" and "language" not in english  # README: not a report, exit 2
    assert chinese["summary"] == english["summary"] and chinese["summary"]["unreadable"] == 1
    [item] = chinese["unreadable"]
    assert item["file"].endswith("node9.json") and CJK.search(item["reason"]) and "JSON" in item["reason"]
    assert english["unreadable"][0]["reason"].startswith("not JSON")
