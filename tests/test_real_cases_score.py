"""The real cases in ../shared/realcases (issue 31): `../shared/realcases/score` on the installed gpuready, held at the
figures reached so far so that they cannot slip back. The issue's targets are check recall >= 0.95 with <= 1 false
alarm and diagnose recall >= 0.90 with <= 2, 0 disagreements, no crash; raise the floors below as they are reached.

Skipped, saying why, where ../shared (the cases are not part of this repository) or the gpuready command is absent."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCORE = ROOT.parent / "shared" / "realcases" / "score"

# the figures reached (hits, false alarms) on the shared set; a change may raise them, never lower them
CHECK_HITS, CHECK_FALSE_ALARMS = 63, 1
DIAGNOSE_HITS, DIAGNOSE_FALSE_ALARMS = 101, 1
MAX_DISAGREE = 0

_RECALL = re.compile(r"^(?P<tool>holdout|diagnose) recall (?P<hits>\d+)/(?P<total>\d+) = [\d.]+, false alarms "
                     r"(?P<false>\d+), crashes (?P<crashes>\d+)", re.M)
_AGREE = re.compile(r"^check vs diagnose: (?P<disagree>\d+) of \d+ cases disagree", re.M)


def test_real_cases_hold_the_figures_reached():
    if not SCORE.exists():
        pytest.skip(f"{SCORE} is absent: the shared real cases are not on this machine")
    if shutil.which("gpuready") is None:
        pytest.skip("the gpuready command is not on PATH (pip install -e .)")
    run = subprocess.run([str(SCORE)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    scores = {match["tool"]: match for match in _RECALL.finditer(run.stdout)}
    assert set(scores) == {"holdout", "diagnose"}, run.stdout[-2000:] + run.stderr[-2000:]
    check, diagnose = scores["holdout"], scores["diagnose"]
    assert (int(check["crashes"]), int(diagnose["crashes"])) == (0, 0), run.stdout[-3000:]
    assert int(check["hits"]) >= CHECK_HITS and int(check["false"]) <= CHECK_FALSE_ALARMS, check.group(0)
    assert int(diagnose["hits"]) >= DIAGNOSE_HITS and int(diagnose["false"]) <= DIAGNOSE_FALSE_ALARMS, \
        diagnose.group(0)
    agree = _AGREE.search(run.stdout)
    assert agree is not None and int(agree["disagree"]) <= MAX_DISAGREE, run.stdout[-1000:]
