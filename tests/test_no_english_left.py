"""A full report in Chinese has no English sentence left (issue 21): every message, fix, label and verdict comes from
the catalogue; what stays English is what is not to be translated: names (check ids, hosts, GPU models, files, bus
ids), units, commands in backticks, and text quoted from the evidence (a log line, a value the input held).

The detector: the rendered console (every finding, `--verbose`) minus those names and quotes; any run of four or more
English words left is a sentence someone forgot to put in the catalogue. The documents are recorded runs and real
published outputs of several machine classes (an H200 VM, a DGX H100 with a power brake, an Xid storm, an NCCL
failure, a torch crash), each through the verb that reads it, and the H200's recorded validate results judged now
(a saved report document keeps the sentences of the version that wrote it; burn and bench: tests/test_i18n_verbs.py).
"""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console

from conftest import FIXTURES, PUBLIC
from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.report.console import render_console
from gpuready.report.labels import labels_for
from gpuready.pipeline import check_files
from gpuready.evidence.build import build_facts
from gpuready.runner.local import RunOutcome
from gpuready.verbs.diagnose.run import diagnose
from gpuready.verbs.validate import build_report

WORD = r"[A-Za-z][A-Za-z'’-]*"
ENGLISH_RUN = re.compile(rf"{WORD}(?:[ ,/]+{WORD}){{3,}}")
"""Four or more English words in a row: a sentence, not a name or a field term."""
FIELD_TERMS = (
    "HW Power Brake Slowdown",  # nvidia-smi -q's own field name, quoted in a fix
    "ZeRO-Offload / FSDP CPU offload",  # the names of two features
)
QUOTING_PLACEHOLDERS = ("error", "line", "quoted")
"""Placeholders that hold what a tool printed (nvidia-smi's own error, a log line), by the catalogue's convention."""
CHECK_ID = re.compile(r"\b[a-z0-9_]+(?:\.[a-z0-9_*]+)+\b")
"""Check and message ids, file names (`nvidia-smi-q.txt`), versions."""


def quoted_and_named(document: dict) -> list[str]:
    """Every string the document holds as evidence or as a name: they are shown as they were given."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
    walk(document.get("host"))
    walk(document.get("facts"))
    for finding in document.get("findings", []):
        for key in ("evidence", "observed", "expected", "subject", "refs"):
            walk(finding.get(key))
        walk(quoted_values(finding))
    for measurement in document.get("measurements", []):
        walk(measurement.get("name"))
        walk(measurement.get("subject"))
    return [text for text in found if len(text) >= 4]


def quoted_values(finding: dict) -> list[str]:
    """The finding's placeholder values that quote its evidence (a part of a log line it cites) or are names (no run
    of English words); a value that is an English sentence of gpuready's own is not a quote, and is left to be found."""
    evidence = " ".join(str(item.get("text", "")) for item in finding.get("evidence") or [] if isinstance(item, dict))
    values = {key: value for key, value in (finding.get("message_values") or {}).items() if isinstance(value, str)}
    return [value for key, value in values.items()
            if key in QUOTING_PLACEHOLDERS or value in evidence or not ENGLISH_RUN.search(value)]


def english_left(document: dict) -> list[str]:
    stream = io.StringIO()
    # A console too wide to wrap: a quoted log line stays one line, as the document holds it.
    render_console(document, Console(file=stream, width=10_000, color_system=None), verbose=True, lang="zh")
    text = re.sub(r"`[^`]*`", " ", stream.getvalue())
    english_labels = [form for value in labels_for("en").values()
                      for part in (value if isinstance(value, tuple) else (value,)) for form in (part, part.upper())]
    for name in sorted(set(quoted_and_named(document) + english_labels + list(FIELD_TERMS)), key=len, reverse=True):
        if len(name) >= 4:  # whole words only: `No` or `GPU` must not eat a part of a word
            text = re.sub(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", " ", text)
    text = CHECK_ID.sub(" ", text)
    return [match.group(0) for match in ENGLISH_RUN.finditer(" ".join(text.split()))]


def checked(folder) -> dict:
    return check_files(read_bundle(folder), CheckOptions())[0].to_dict()


def diagnosed(path) -> dict:
    return diagnose([path]).to_dict()


VALIDATE_RESULTS = {int(rank): result for rank, result in
                    json.loads((FIXTURES / "h200-validate" / "rank-results.json").read_text())["results"].items()}


DOCUMENTS = {
    "check: H200 VM bundle (recorded)": lambda: checked(FIXTURES / "h200-collect"),
    "check: DGX H100 files with a power brake (published)": lambda: checked(PUBLIC / "dgx-h100-nvswitch"),
    "check: Xid and SXid kernel log (published)": lambda: checked(PUBLIC / "xid"),
    "check: uncorrectable ECC (published)": lambda: checked(PUBLIC / "ecc-errors"),
    "check: PCIe x8 link (published)": lambda: checked(PUBLIC / "pcie-x8"),
    "check: no driver (published)": lambda: checked(PUBLIC / "no-driver"),
    "diagnose: NCCL logs": lambda: diagnosed(FIXTURES / "diagnose" / "nccl"),
    "diagnose: torch crashes": lambda: diagnosed(FIXTURES / "diagnose" / "torch"),
    "validate: H200 one rank (recorded results, judged now)": lambda: build_report(
        RunOutcome(results=VALIDATE_RESULTS, failures=[]), build_facts(read_bundle(FIXTURES / "h200-collect")),
        "h200").to_dict(),
}


@pytest.mark.parametrize("name", DOCUMENTS)
def test_no_english_sentence_is_left_in_a_chinese_report(name):
    assert english_left(DOCUMENTS[name]()) == []


def test_the_detector_finds_an_english_sentence():
    """It would find a finding the catalogue does not know (kept in English) and an English label."""
    document = {"host": "node1", "verdict": "ready", "verdicts": {"single_node": "ready", "multi_node": "ready"},
                "judged_for": "single_node",
                "findings": [{"check_id": "gpu.new", "status": "warn", "message": "A new check says something here."}]}
    assert english_left(document) == ["A new check says something here"]
