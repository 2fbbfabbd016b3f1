"""`dcgmi diag -r N` text output: one line in, one typed row out; a run's rows folded into its tests. Parsing only.

The table dcgmi prints (DCGM dcgmi/Diag.cpp, `DIAG_DATA` stencil `| <name, 25> | <info, 45> |`):

    Successfully ran diagnostic for group.
    +---------------------------+------------------------------------------------+
    | Diagnostic                | Result                                         |
    +===========================+================================================+
    |-----  Deployment  --------+------------------------------------------------|
    | Denylist                  | Pass                                           |
    +-----  Hardware  ----------+------------------------------------------------+
    | GPU Memory                | Pass - GPUs: 1, 2, 3, 4, 5, 6, 7               |      DCGM 2.x / 3.x: one summary
    |                           | Fail - GPU: 0                                  |      row per result, then the
    | Warning                   | GPU 0 Thermal violations totaling 13.3 second  |      reasons cut every 45
    |                           | s started at 9.7 seconds into the test …       |      characters
    | memory                    | Fail                                           |      DCGM 4.x: the overall
    |                           | GPU0: Fail                                     |      result, then one row per
    | Warning: GPU0             | …                                              |      GPU and its reasons

`Warning` / `Error` rows carry the reasons; `Info` rows are notes (max power reached, …), never failures.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

INFO_WIDTH = 45
"""dcgmi cuts a message into pieces of this many characters (`DATA_INFO_TAG_LEN`), one table row each."""

MARKERS = (r"\| [^|\n]{25} \|(?: |$)|-----  [A-Z]|Successfully ran diagnostic|Unable to complete diagnostic|"
           r"Diagnostic could not be run|Diagnostic can only be performed")
"""A table row (dcgmi's name column is always 25 wide), a section rule, the line before the table, a diag that could
not run. ASCII, literal-led."""

_ROW = re.compile(r"^\s{0,8}\| (?P<name>[^|\n]{25}) \|(?P<info>[^|\n]{0,120})\|?\s{0,4}$")
_SECTION = re.compile(r"^\s{0,8}[|+]-----\s{1,4}(?P<section>[A-Za-z][A-Za-z ]{0,30}?)\s{1,4}-{1,40}\+")
_RESULT_WORD = r"(?P<result>Pass|Fail|Warn|Skip|Not Run)"
# `Pass - All`, `Fail - GPU: 0`, `Pass - GPUs: 1, 2, 3`, the bare `Fail` (a deployment test, or DCGM 4.x's overall).
_SUMMARY = re.compile(r"^" + _RESULT_WORD + r"(?: - (?:(?P<all>All)|(?:GPU|CPU)s?:? ?(?P<ids>\d[\d, ]{0,400})))?"
                      r"\s{0,4}$")
# DCGM 4.x per-entity result: `GPU0: Pass`.
_ENTITY = re.compile(r"^(?P<group>GPU|CPU)(?P<id>\d{1,4}): " + _RESULT_WORD + r"\s{0,4}$")
_MESSAGE_NAME = re.compile(r"^(?P<kind>Warning|Error|Info)(?:: (?P<group>GPU|CPU)(?P<id>\d{1,4}))?$")
_RUN_START = re.compile(r"Successfully ran diagnostic for group")
_RUN_FAILED = re.compile(r"(?P<text>(?:Error: )?(?:Unable to complete diagnostic|Diagnostic could not be run|"
                         r"Diagnostic can only be performed)[^\n]{0,300})")
_GPU_IN_TEXT = re.compile(r"\bGPU ?(?P<id>\d{1,4})\b")
_INTERNAL = re.compile(r"internal error", re.IGNORECASE)
_CUDA_NOT_READY = re.compile(r"system not yet initiali[sz]ed", re.IGNORECASE)
"""CUDA's text for cudaErrorSystemNotReady / CUDA_ERROR_SYSTEM_NOT_READY (802), quoted by DCGM when cuInit fails."""
METADATA_ROWS = ("DCGM Version", "Driver Version Detected", "GPU Device IDs Detected", "CPU Device IDs Detected",
                 "EUD Test Version", "CPU EUD Test Version", "Number of CPUs Detected")


@dataclass(frozen=True)
class DiagLine:
    kind: str
    """`start` (Successfully ran…), `failed_to_run` (dcgmi could not run the diagnostic), `section`, `header`
    (`| Diagnostic | Result |`), `row` (a data row). Borders (`+---+`, `+===+`) are None."""
    name: str = ""
    """The row's first column, stripped (empty on a continuation row); the section's name."""
    info: str = ""
    """The row's second column, exactly as printed after its leading space, right-stripped."""


def parse_line(text: str) -> DiagLine | None:
    """One line of dcgmi's text output, or None where it is not one."""
    if match := _ROW.match(text):
        name, info = match.group("name").strip(), match.group("info")
        info = (info[1:] if info.startswith(" ") else info).rstrip()
        if name == "Diagnostic" and info == "Result":
            return DiagLine(kind="header")
        return DiagLine(kind="row", name=name, info=info)
    if match := _SECTION.match(text):
        return DiagLine(kind="section", name=match.group("section").strip())
    if _RUN_START.search(text):
        return DiagLine(kind="start")
    if match := _RUN_FAILED.search(text):
        return DiagLine(kind="failed_to_run", info=match.group("text").strip())
    return None


def is_result(info: str) -> bool:
    """Whether a row's second column is a test result (`Pass`, `Fail - GPU: 0`, `GPU0: Pass`)."""
    return bool(_SUMMARY.match(info) or _ENTITY.match(info))


@dataclass
class DiagMessage:
    kind: str
    """`Warning`, `Error` or `Info`."""
    text: str
    gpu: int | None
    """The GPU the message is about: its `Warning: GPU0` label, else the first `GPU n` in its text."""
    rows: list[int] = field(default_factory=list)


@dataclass
class DiagTest:
    name: str
    section: str | None
    result: str
    """The worst result printed for it: `Fail`, `Warn`, `Skip`, `Pass` (`Not Run` counts as `Skip`)."""
    failed_gpus: list[int] = field(default_factory=list)
    warned_gpus: list[int] = field(default_factory=list)
    all_gpus_failed: bool = False
    messages: list[DiagMessage] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    """Indices (into the run's rows) of the lines that show the result and its reasons."""

    @property
    def warnings(self) -> list[DiagMessage]:
        return [message for message in self.messages if message.kind in ("Warning", "Error")]

    @property
    def internal_error(self) -> bool:
        """Every reason given is DCGM's own `internal error` (the test could not run, the GPU was not judged)."""
        reasons = self.warnings
        return bool(reasons) and all(_INTERNAL.search(message.text) for message in reasons)

    @property
    def cuda_not_ready(self) -> bool:
        """Every reason given is CUDA failing to start with error 802 (`system not yet initialized`): the test never
        ran on the GPU; on an NVSwitch system the fabric is not up."""
        reasons = self.warnings
        return bool(reasons) and all(_CUDA_NOT_READY.search(message.text) for message in reasons)


@dataclass
class DiagRun:
    """One `dcgmi diag` table."""
    metadata: dict[str, str] = field(default_factory=dict)
    tests: list[DiagTest] = field(default_factory=list)
    failed_to_run: str | None = None
    """dcgmi's own error where the diagnostic did not run at all."""


_RANK = {"Fail": 3, "Warn": 2, "Skip": 1, "Not Run": 1, "Pass": 0}


def _ids(text: str | None) -> list[int]:
    return [int(part) for part in re.findall(r"\d{1,4}", text or "")][:64]


def fold(lines: list[DiagLine]) -> DiagRun:
    """The tests of one run from its parsed lines in order (start, sections, rows); linear in the rows."""
    run = DiagRun()
    section: str | None = None
    test: DiagTest | None = None
    message: DiagMessage | None = None
    pieces: list[str] = []

    def close_message() -> None:
        nonlocal message, pieces
        if message is not None:
            # every piece but the last filled its 45 columns; right-stripping lost the spaces at its end
            joined = "".join(piece.ljust(INFO_WIDTH) for piece in pieces[:-1]) + (pieces[-1] if pieces else "")
            message.text = " ".join(joined.split())
            if message.gpu is None and (gpu := _GPU_IN_TEXT.search(message.text)):
                message.gpu = int(gpu.group("id"))
        message, pieces = None, []

    for index, line in enumerate(lines):
        if line.kind == "failed_to_run":
            close_message()
            run.failed_to_run = line.info
            continue
        if line.kind == "section":
            close_message()
            section, test = line.name, None
            continue
        if line.kind != "row":
            continue
        name, info = line.name, line.info
        if section == "Metadata" or name in METADATA_ROWS:
            close_message()
            run.metadata[name] = info.strip()
            continue
        kind = _MESSAGE_NAME.match(name)
        if kind:  # a reason or a note starts
            close_message()
            if test is None:  # a reason with no test row before it (a pasted fragment): the section failed
                test = DiagTest(name=section or "Diagnostic", section=section, result="Pass")
                run.tests.append(test)
                if kind.group("kind") != "Info":
                    _set_result(test, "Fail")
            group_id = kind.group("id")
            message = DiagMessage(kind=kind.group("kind"), text="", gpu=int(group_id) if group_id else None,
                                  rows=[index])
            pieces = [info]
            test.messages.append(message)
            if kind.group("kind") != "Info":
                test.rows.append(index)
            continue
        summary, entity = _SUMMARY.match(info.strip()), _ENTITY.match(info.strip())
        if name:  # a new test
            close_message()
            test = DiagTest(name=name, section=section, result="Pass", rows=[index])
            run.tests.append(test)
            if summary:
                _apply_summary(test, summary)
            continue
        if test is None:
            continue
        if summary or entity:  # a further result of the current test
            close_message()
            test.rows.append(index)
            if summary:
                _apply_summary(test, summary)
            else:
                result = entity.group("result")
                if entity.group("group") == "GPU" and result in ("Fail", "Warn"):
                    (test.failed_gpus if result == "Fail" else test.warned_gpus).append(int(entity.group("id")))
            continue
        if message is not None:  # the next piece of a reason or note
            pieces.append(info)
            message.rows.append(index)
            if message.kind != "Info":
                test.rows.append(index)
    close_message()
    return run


def _set_result(test: DiagTest, result: str) -> None:
    """The worst result printed for a test is its result (`Not Run` counts as `Skip`)."""
    if _RANK.get(result, 0) > _RANK.get(test.result, 0):
        test.result = "Skip" if result == "Not Run" else result


def _apply_summary(test: DiagTest, summary: re.Match[str]) -> None:
    result = summary.group("result")
    _set_result(test, result)
    if result not in ("Fail", "Warn"):
        return
    if summary.group("all"):
        test.all_gpus_failed = test.all_gpus_failed or result == "Fail"
    (test.failed_gpus if result == "Fail" else test.warned_gpus).extend(_ids(summary.group("ids")))
