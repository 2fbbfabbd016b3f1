"""How `check --bundle` and `diagnose` judge real published cases (tests/fixtures/cases), against the verdict an
engineer gave each one: per set (`tune`, and `heldout`, which no rule was tuned on), the verdicts that match, the
problems found (recall) and the false alarms.

    python benchmarks/real_cases.py [--set heldout] [--verbose]

A problem is found when `diagnose` reports its id at warn or fail. A false alarm is a fail finding on a case the
engineer called ready (or unknown with no problem), or a `not_ready` verdict where the engineer saw none.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.model import Status
from gpuready.pipeline import check_files
from gpuready.verbs.diagnose.run import diagnose

CASES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases"
RANK = {"ready": 0, "ready_with_warnings": 1, "unknown": 1, "not_ready": 2}


@dataclass
class Tally:
    cases: int = 0
    verdicts_matched: int = 0
    problems: int = 0
    problems_found: int = 0
    false_alarm_cases: int = 0
    diagnose_better_than_check: int = 0
    misses: list[str] = field(default_factory=list)


def judge(case: Path) -> dict:
    spec = tomllib.loads((case / "case.toml").read_text())
    evidence = [path for path in sorted(case.iterdir()) if path.name not in ("case.toml", "README.md")]
    diagnosed = diagnose(evidence)
    found = {f.check_id for f in diagnosed.findings if f.status in (Status.WARN, Status.FAIL)}
    fails = {f.check_id for f in diagnosed.findings if f.status == Status.FAIL}
    checked = check_files(read_bundle(case), CheckOptions())[0]
    return {"spec": spec, "verdict": diagnosed.verdict().value, "found": found, "fails": fails,
            "check_verdict": checked.verdict().value}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("tune", "heldout", "all"), default="all")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    tallies: dict[str, Tally] = {}
    for case in sorted(path for path in CASES.iterdir() if (path / "case.toml").exists()):
        result = judge(case)
        spec = result["spec"]
        if args.set != "all" and spec["set"] != args.set:
            continue
        tally = tallies.setdefault(spec["set"], Tally())
        tally.cases += 1
        expected = set(spec.get("problems", []))
        hit = expected & result["found"]
        tally.problems += len(expected)
        tally.problems_found += len(hit)
        matched = result["verdict"] == spec["verdict"]
        tally.verdicts_matched += matched
        healthy = spec["verdict"] == "ready" or (spec["verdict"] == "unknown" and not expected)
        alarm = (healthy and bool(result["fails"])) or (result["verdict"] == "not_ready" and spec["verdict"] != "not_ready")
        tally.false_alarm_cases += alarm
        tally.diagnose_better_than_check += RANK[result["check_verdict"]] > RANK[result["verdict"]]
        if not matched or hit != expected or alarm:
            tally.misses.append(f"{case.name}: expected {spec['verdict']} {sorted(expected)}, got {result['verdict']} "
                                f"{sorted(result['found'])}{' (false alarm)' if alarm else ''}")
    for name, tally in sorted(tallies.items()):
        recall = tally.problems_found / tally.problems if tally.problems else 1.0
        print(f"{name}: {tally.cases} cases, verdict matched {tally.verdicts_matched}/{tally.cases}, problems found "
              f"{tally.problems_found}/{tally.problems} (recall {recall:.0%}), false-alarm cases "
              f"{tally.false_alarm_cases}, diagnose better than check {tally.diagnose_better_than_check}")
        if args.verbose:
            for line in tally.misses:
                print("   ", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
