"""JUnit XML (issue 22): one test suite per report document, one test case per finding, read back by junitparser (the
library CI glue uses) and held to the schema GitLab and Jenkins share; text from outside never breaks the XML.

Expected figures are worked out from the documents by hand (each test's docstring says how), not by the module's
counting."""

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml, Skipped

from conftest import FIXTURES, PUBLIC
from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions
from gpuready.report.junit import MESSAGE_ATTRIBUTE_CHARS, junit_xml
from gpuready.pipeline import check_files

SCHEMA = {
    "testsuites": {"name", "tests", "failures", "errors", "skipped", "time", "disabled"},
    "testsuite": {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname", "id", "package",
                  "disabled"},
    "properties": set(), "property": {"name", "value"},
    "testcase": {"name", "classname", "time", "assertions", "status"},
    "failure": {"message", "type"}, "error": {"message", "type"}, "skipped": {"message"},
    "system-out": set(), "system-err": set(),
}
"""The elements and attributes of the JUnit schema GitLab, Jenkins (xunit's junit-10.xsd) and junitparser share."""
CHILDREN = {"testsuites": {"testsuite"}, "testsuite": {"properties", "testcase", "system-out", "system-err"},
            "properties": {"property"}, "property": set(),
            "testcase": {"failure", "error", "skipped", "system-out", "system-err"},
            "failure": set(), "error": set(), "skipped": set(), "system-out": set(), "system-err": set()}
BRAKED = ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0", "0000:9b:00.0", "0000:bb:00.0",
          "0000:cb:00.0", "0000:db:00.0"]
"""The bus ids of the DGX's eight GPUs in the `-q` captured with driver 535.161.08 (machine 2 of the bundle)."""


@pytest.fixture(scope="module")
def checked() -> dict[str, dict]:
    """`gpuready check --bundle … --json` of the recorded H200 bundle and of the published DGX H100 files."""
    return {name: check_files(read_bundle(folder), CheckOptions())[0].to_dict()
            for name, folder in (("h200", FIXTURES / "h200-collect"), ("dgx", PUBLIC / "dgx-h100-nvswitch"))}


@pytest.fixture
def h200(checked):
    return checked["h200"]


@pytest.fixture
def dgx(checked):
    return checked["dgx"]


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def parsed(tmp_path: Path, data: bytes) -> JUnitXml:
    path = tmp_path / "report.xml"
    path.write_bytes(data)
    return JUnitXml.fromfile(str(path))


def cases(suite):
    return [(case.classname, case.name, [type(result).__name__ for result in case.result]) for case in suite]


def assert_common_schema(data: bytes) -> None:
    def walk(element, parent):
        assert element.tag in CHILDREN[parent], (parent, element.tag)
        assert set(element.attrib) <= SCHEMA[element.tag], (element.tag, element.attrib)
        for child in element:
            walk(child, element.tag)
    root = ET.fromstring(data)
    assert root.tag == "testsuites" and set(root.attrib) <= SCHEMA["testsuites"]
    for suite in root:
        walk(suite, "testsuites")


def test_the_h200_bundle_is_one_suite_of_49_cases(tmp_path, h200):
    """The recorded H200 bundle: 49 findings (45 pass, 1 warn, 3 skip; `gpuready check --bundle … -v` lists them);
    the warning (host.memory_ratio) is no failure, so failures 0, errors 0, skipped 3."""
    h200 = {**h200, "started_at": "2026-12-04T10:12:27+00:00"}
    data = junit_xml([h200])
    assert_common_schema(data)
    report = parsed(tmp_path, data)
    [suite] = list(report)
    assert (suite.name, suite.hostname, suite.timestamp) == ("check/vm", "vm", "2026-12-04T10:12:27")
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (60, 0, 0, 12)
    assert (report.tests, report.failures, report.errors, report.skipped) == (60, 0, 0, 12)
    listed = cases(suite)
    assert len({name for _class, name, _result in listed}) == 60  # no two cases share a name
    assert [name for _class, name, result in listed if result] == [
        "network.rdma @ vm", "network.nic_speed @ vm", "network.port @ vm", "network.rail_down @ vm",
        "network.rail_rate @ vm", "network.link_layer_mixed @ vm", "network.ib_counters @ vm", "network.hca_placement @ vm",
        "nvlink.fabric_clique @ vm", "nvlink.fabric_health @ vm", "nvlink.imex_domain @ vm",
        "nvlink.imex_channel @ vm"]
    assert listed[0] == ("gpu", "gpu.present @ vm", [])
    warned = next(case for case in suite if case.name == "host.memory_ratio @ vm")
    assert warned.result == [] and warned.system_out.startswith("System RAM is 0.90× the total GPU memory")
    assert "\n\nfix: Add system memory" in warned.system_out


def test_the_faulty_dgx_fails_eight_cases_named_by_bus_id(tmp_path, dgx):
    """The published DGX H100 files name 4 machines: 211 findings, 62 pass, 8 fail (power.brake on machine 2's eight
    GPUs), 1 warn (bundle.mixed_machines), 140 skip. A case is named by the GPU's bus id and, the document being about
    several machines, by its machine."""
    data = junit_xml([dgx])
    assert_common_schema(data)
    [suite] = list(parsed(tmp_path, data))
    assert suite.name == "check/4 machines"
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (255, 8, 0, 184)
    failed = [case for case in suite if any(isinstance(result, Failure) for result in case.result)]
    assert [case.name for case in failed] == [f"power.brake @ {bus_id}, machine 2 (driver 535.161.08)"
                                              for bus_id in BRAKED]
    assert {case.classname for case in failed} == {"power"}
    failure = failed[3].result[0]
    assert failure.message == ("GPU3's clocks are cut by the HW power brake (HW Slowdown: power brake, not thermal): "
                               "the chassis is braking the GPU. Check PSU redundancy and the BMC power policy.")
    assert failure.type == "fail"
    assert failure.text.startswith(failure.message + "\n\nfix: Check that every PSU is present")
    assert "system-out" in data.decode() and "verdict: NOT READY (exit code 1)" in data.decode()


def test_warnings_fail_where_the_run_says_so(tmp_path, dgx):
    """--fail-on warn: the one warning (bundle.mixed_machines, about machine 1) is a ninth failure."""
    [suite] = list(parsed(tmp_path, junit_xml([dgx], warn_fails=True)))
    assert (suite.tests, suite.failures) == (255, 9)
    mixed = next(case for case in suite if case.name.startswith("bundle.mixed_machines"))
    assert mixed.name == "bundle.mixed_machines @ machine 1 (driver 550.90.07)"
    assert mixed.result[0].type == "warn"


def test_several_documents_make_several_suites_with_their_totals(tmp_path, h200, dgx):
    """Root totals: 49 + 211 + 8 (the recorded burn: 8 passes) tests, 0 + 8 + 0 failures, 3 + 140 + 0 skipped."""
    report = parsed(tmp_path, junit_xml([h200, dgx, recorded("h200-burn/burn-60s-report.json")]))
    assert [suite.name for suite in report] == ["check/vm", "check/4 machines", "burn/vm"]
    assert (report.tests, report.failures, report.errors, report.skipped) == (323, 8, 0, 196)


def test_measurements_are_the_suites_properties(tmp_path):
    """The recorded validate under a foreign process: 15 measurements, 8 with an expected figure (5 matmuls, the device
    copy, pinned host→device and device→host; the 5 latencies and 2 pageable copies have none): 23 properties. Five
    compute.low failures on one GPU (one per dtype) get numbered names: CI tools key a test's history by its name."""
    document = recorded("h200-shared-gpu/validate-foreign-loop.json")
    [suite] = list(parsed(tmp_path, junit_xml([document])))
    properties = {prop.name: prop.value for prop in suite.properties()}
    assert len(properties) == 23
    assert properties["matmul_tflops_bf16 @ 0000:00:06.0 rank 0"] == "315.527 tflops"
    assert properties["matmul_tflops_bf16.expected @ 0000:00:06.0 rank 0"] == "791.2 tflops"
    assert properties["all_reduce_latency_us @ vm"] == "35.872 us"
    assert "all_reduce_latency_us.expected @ vm" not in properties
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == ("validate/vm", 12, 6, 0, 1)
    assert [case.name for case in suite if case.classname == "compute"] == [
        "compute.low @ 0000:00:06.0 rank 0", "compute.low @ 0000:00:06.0 rank 0 #2",
        "compute.low @ 0000:00:06.0 rank 0 #3", "compute.low @ 0000:00:06.0 rank 0 #4",
        "compute.low @ 0000:00:06.0 rank 0 #5"]
    bench = parsed(tmp_path, junit_xml([recorded("h200-bench/bench-760M-bf16-mb4.json")]))
    assert dict((p.name, p.value) for p in next(iter(bench)).properties())["step_time_s @ vm single×1"] == \
        "0.117112 seconds"


def test_errors_and_statuses_this_version_does_not_know_are_errors(tmp_path):
    """An older or hand-edited document: an error, a status nobody knows, one without a status and an item that is not
    a finding at all (no id, no status) are 4 errors; no started_at, no timestamp."""
    document = {"verdict": "not_ready", "host": "old", "findings": [
        {"check_id": "a.raised", "status": "error", "message": "KeyError: 'x'"},
        {"check_id": "b.future", "status": "degraded", "message": "a status of a later version"},
        {"check_id": "c.none", "message": "no status"},
        "not a finding",
        {"check_id": "d.fine", "status": "pass", "subject": {"host": "old", "nic": "mlx5_0", "rank": 3}}]}
    data = junit_xml([document])
    assert_common_schema(data)
    [suite] = list(parsed(tmp_path, data))
    assert (suite.name, suite.timestamp, suite.tests, suite.failures, suite.errors) == ("report/old", None, 5, 0, 4)
    errors = [case for case in suite if any(isinstance(result, Error) for result in case.result)]
    assert [(case.name, case.result[0].type) for case in errors] == [
        ("a.raised @ old", "error"), ("b.future @ old", "degraded"), ("c.none @ old", "missing"),
        ("? @ old", "missing")]
    assert [case.name for case in suite][4] == "d.fine @ mlx5_0 rank 3"


def test_a_timestamp_is_said_in_utc_without_its_offset():
    """Jenkins' schema takes no zone: 18:12:27+08:00 is 10:12:27 UTC."""
    data = junit_xml([{"findings": [], "host": "h", "started_at": "2026-12-04T18:12:27+08:00"}])
    assert ET.fromstring(data)[0].get("timestamp") == "2026-12-04T10:12:27"


def test_a_hostile_finding_still_gives_valid_xml(tmp_path, h200):
    """Raw log bytes in a finding: C0 controls, an escape sequence, `]]>`, markup, a lone surrogate (JSON can carry
    one), U+FFFE, and a 1 MB message. The XML parses, the controls read as visible escapes, the markup as text, and
    the failure's one-line message stays short while its body keeps the whole text."""
    hostile = "\x00\x07\x1b]0;owned\x07 ]]> <b>&amp; \ud800 \ufffe\r" + "x" * 1_000_000 + "\nthe second line"
    document = copy.deepcopy(h200)
    document["findings"][0].update(status="fail", message=hostile, fix="</failure><injected/>",
                                   check_id="gpu.<present>", category="g&u")
    document["host"] = "vm\x1b[31m"
    data = junit_xml([document])
    ET.fromstring(data)
    assert_common_schema(data)
    [suite] = list(parsed(tmp_path, data))
    case = next(iter(suite))
    failure = case.result[0]
    assert case.name == "gpu.<present> @ vm" and case.classname == "g&u"
    assert suite.name == "check/vm\\x1b[31m"
    assert failure.message.startswith("\\x00\\x07\\x1b]0;owned\\x07 ]]> <b>&amp; \ufffd \ufffd\\x0d")
    assert len(failure.message) == MESSAGE_ATTRIBUTE_CHARS
    assert failure.message.endswith("x…")
    assert len(failure.text) > 1_000_000 and failure.text.endswith("x\nthe second line\n\nfix: </failure><injected/>")
    assert (suite.tests, suite.failures) == (60, 1)


def test_skipped_cases_say_why(tmp_path, h200):
    [suite] = list(parsed(tmp_path, junit_xml([h200])))
    skipped = next(case for case in suite if case.name == "network.port @ vm").result[0]
    assert isinstance(skipped, Skipped)
    assert skipped.message == ("Not judged: needs rendezvous_port_free (gpuready check), which this run does not "
                               "have.")
