from pathlib import Path

from gpuready.checks.registry import CheckOptions
from gpuready.facts.build import build_facts
from gpuready.bundle.reader import read_bundle
from gpuready.verbs.check import check_report


def report_for(bundle: Path, **options):
    return check_report(build_facts(read_bundle(bundle)), CheckOptions(**options))


def statuses(report, check_id):
    return [finding.status.value for finding in report.findings if finding.check_id == check_id]


def messages(report, check_id):
    return " | ".join(finding.message for finding in report.findings if finding.check_id == check_id)
