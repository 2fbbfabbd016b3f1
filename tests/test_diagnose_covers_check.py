"""On the same files `diagnose` reports every problem `check --bundle` reports, with a verdict no better: every
fixture folder and file of this repository (recorded on the H200, published captures, hand-built board classes) and
every real published case under fixtures/cases."""

from pathlib import Path

import pytest

from gpuready.evidence.reader import BundleError, read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.model import Status
from gpuready.pipeline import check_files
from gpuready.verbs.diagnose.run import diagnose

FIXTURES = Path(__file__).parent / "fixtures"
GROUPS = ("public", "boards", "container", "pcie-power", "partial", "diagnose", "evidence-classes", "cases",
          "h200-collect", "h200-docker-collect", "h200-shared")
# How good a verdict is: `diagnose` may be worse than `check`, never better.
RANK = {"ready": 0, "ready_with_warnings": 1, "unknown": 1, "not_ready": 2}
NOT_EVIDENCE = ("README.md", "case.toml")


def _inputs() -> list[Path]:
    found = []
    for group in GROUPS:
        root = FIXTURES / group
        if not root.exists():
            continue
        found.append(root) if not any(child.is_dir() for child in root.iterdir()) else None
        found += sorted(path for path in root.rglob("*") if path.is_dir())
        found += sorted(path for path in root.rglob("*") if path.is_file() and path.name not in NOT_EVIDENCE
                        and path.suffix != ".py")
    return found


INPUTS = _inputs()


def _problems(report) -> set[str]:
    return {f.check_id for f in report.findings if f.status in (Status.WARN, Status.FAIL, Status.ERROR)}


def test_there_is_enough_to_compare():
    assert len(INPUTS) >= 130


@pytest.mark.parametrize("path", INPUTS, ids=lambda path: str(path.relative_to(FIXTURES)))
def test_diagnose_reports_what_check_reports(path):
    try:
        checked = check_files(read_bundle(path), CheckOptions())[0]
    except BundleError:
        pytest.skip("not a bundle check reads (several bundles in one folder)")
    diagnosed = diagnose([path])
    assert _problems(checked) <= _problems(diagnosed), sorted(_problems(checked) - _problems(diagnosed))
    assert RANK[diagnosed.verdict().value] >= RANK[checked.verdict().value]
    if checked.verdict().value == "not_ready":
        assert diagnosed.verdict().value == "not_ready"


def test_a_bundle_file_that_is_not_text_is_an_input_error_in_both(tmp_path):
    """Found by the fuzz run (seed 20260501, iteration 25): a flipped byte made uptime.txt binary; check said
    `bundle.unreadable` (not ready, exit 2), diagnose only noted it and said ready with warnings."""
    folder = tmp_path / "bundle"
    folder.mkdir()
    for source in (FIXTURES / "h200-docker-collect").iterdir():
        (folder / source.name).write_bytes(source.read_bytes())
    (folder / "uptime.txt").write_bytes(b"2!>70 \x145x*58\n")
    checked = check_files(read_bundle(folder), CheckOptions())[0]
    diagnosed = diagnose([folder])
    sentence = ("uptime.txt is not text: 1 of its first 13 characters are NUL, control characters or undecodable "
                "bytes, not what a tool prints")
    assert [f.message for f in checked.findings if f.status == Status.ERROR] == [sentence]
    assert [f.message for f in diagnosed.findings if f.status == Status.ERROR] == [f"bundle/{sentence}"]
    assert checked.verdict().value == diagnosed.verdict().value == "not_ready"
