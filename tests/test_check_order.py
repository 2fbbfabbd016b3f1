"""A report lists its findings in one order, whatever the process imported first (CI ran `plan`'s tests, which import
checks.power, before the JUnit test: power.* came first and the H200 bundle's cases were listed differently)."""

import json
import subprocess
import sys

from conftest import FIXTURES

_ORDER_OF_CHECK_IDS = """
import json, sys
{first}
from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.pipeline import check_files
report = check_files(read_bundle(sys.argv[1]), CheckOptions())[0]
print(json.dumps([finding.check_id for finding in report.findings]))
"""


def _check_ids(first_import: str) -> list[str]:
    code = _ORDER_OF_CHECK_IDS.format(first=first_import)
    out = subprocess.run([sys.executable, "-c", code, str(FIXTURES / "h200-collect")], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def test_the_order_of_findings_does_not_depend_on_what_was_imported_first():
    plain = _check_ids("")
    assert plain[0] == "gpu.present" and plain.index("power.limit") > plain.index("health.xid")
    assert _check_ids("import gpuready.checks.power") == plain
    assert _check_ids("import gpuready.checks.topology, gpuready.checks.host") == plain
