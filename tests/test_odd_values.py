"""Bad and hostile values in bundle files: bounded, explicit, nothing lost, nothing exposed.

One section per rule: (1) counts, ranges and sizes are bounded by what a real machine has, beyond it the file is
`bundle.unreadable`; (2) a value that does not parse (NaN, inf, 1e308, hex, negative, a version without a dot, a wrong
JSON type) is that field's None and no check raises on it; (3) the report is strict JSON, valid against its schema.
"""

import json
import math
import re
import subprocess
import sys
import time
from importlib import resources

import pytest

from conftest import FIXTURES
from helpers import messages, report_for, statuses

from gpuready.evidence.reader import read_bundle
from gpuready.checks.registry import CheckOptions, run_checks
from gpuready.facts import host_files, units
from gpuready.evidence.build import build_facts
from gpuready.facts.nvml_json import NvmlDocument
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_xml
from gpuready.facts.software_files import parse_torch_json
from gpuready.facts.topology import parse_nvlink_status, parse_topo_matrix
from gpuready.knowledge import driver_requirement, version_tuple
from gpuready.model import Finding, GpuRef, Measurement, Report, Series, Status, Subject, to_jsonable

jsonschema = pytest.importorskip("jsonschema")

H200 = FIXTURES / "h200-collect"
CRASHERS = FIXTURES / "fuzz-crashers"
SCHEMA = json.loads(resources.files("gpuready").joinpath("schema/report.schema.json").read_text())


def h200_with(make_bundle, name, text):
    """The recorded H200 bundle with one file replaced."""
    files = {path.name: path for path in H200.iterdir() if path.name != "README.md"}
    return make_bundle({**files, name: text})


def nvml_with(**fields):
    document = json.loads((H200 / "nvml.json").read_text())
    for name, value in fields.items():
        if name in ("driver_version", "device_count", "cuda_driver_version"):
            document[name] = value
        else:
            document["gpus"][0][name] = value
    return json.dumps(document)  # allow_nan: NaN / Infinity tokens, as a hostile file may hold them


def torch_with(**fields):
    return json.dumps({**json.loads((H200 / "torch.json").read_text()), **fields})


def strict_json(report) -> dict:
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")
    document = json.loads(json.dumps(report.to_dict(), allow_nan=False), parse_constant=refuse)
    jsonschema.validate(document, SCHEMA)
    return document


def input_errors(report) -> str:
    return messages(report, "bundle.unreadable")


# ---------------------------------------------------------------- 1. bounds: beyond them the file is unreadable


def test_topo_cpu_affinity_bomb_is_unreadable_fast_and_the_rest_stands(make_bundle):
    """The 2^31-CPU affinity once built a 24 GB set (OOM); now it is one sentence about that file."""
    bomb = (CRASHERS / "topo-cpu-affinity-bomb" / "nvidia-smi-topo.txt").read_text()
    assert "0-2147483649" in bomb and len(bomb) < 2048
    started = time.monotonic()
    report = report_for(h200_with(make_bundle, "nvidia-smi-topo.txt", bomb))
    document = strict_json(report)
    assert time.monotonic() - started < 1.0
    assert statuses(report, "bundle.unreadable") == ["error"]
    assert input_errors(report).startswith("nvidia-smi-topo.txt could not be parsed as nvidia-smi-topo.txt: the "
                                           "CPU list entry '0-2147483649' is 2,147,483,649, beyond 65,536 CPUs")
    assert document["exit_code"] == 2 and report.exit_code() == 2
    # The other files are still judged: the GPU from nvml.json, its memory against the host's.
    assert statuses(report, "host.memory_ratio") == ["warn"] and statuses(report, "gpu.lost") == ["pass"]
    assert not [f for f in report.findings if f.status == Status.ERROR and f.check_id != "bundle.unreadable"]


def test_cpu_lists_share_one_bounded_parser():
    assert host_files.parse_cpu_count is units.parse_cpu_count
    assert units.parse_cpu_list("0-3,8") == {0, 1, 2, 3, 8} and units.parse_cpu_count("0-3,2-5") == 6
    assert units.parse_cpu_list("65535") == {65535}
    started = time.monotonic()
    for bomb in ("0-2147483649", "0-65536", "9" * 5000, ",".join(["1"] * 70000)):
        with pytest.raises(ValueError):
            units.parse_cpu_list(bomb)
    assert time.monotonic() - started < 0.5


def test_every_bound_lives_in_one_table():
    assert units.LIMITS == {
        "cpus": 2**16, "numa_nodes": 2**10, "gpus": 1024, "nvlinks": 64, "bytes": 2**50, "pcie_gen": 16,
        "pcie_width": 64}
    assert units.bounded("1023", "gpus", "x") == 1023
    with pytest.raises(ValueError, match=r"^the GPU label 'GPU1024' is 1,024, beyond 1,024 GPUs: no real machine"):
        units.bounded(1024, "gpus", "the GPU label 'GPU1024'")


@pytest.mark.parametrize("name, text, sentence", [
    ("nvidia-smi-topo.txt", "\tGPU0\tGPU1024\tCPU Affinity\nGPU0\t X \tSYS\t0-7\nGPU1024\tSYS\t X \t0-7\n",
     "the GPU label 'GPU1024' is 1,024, beyond 1,024 GPUs"),
    ("nvidia-smi-topo.txt", "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV99\t0-7\nGPU1\tNV99\t X \t0-7\n",
     "GPU0's link 'NV99' is 99, beyond 64 NVLink links"),
    ("nvidia-smi-nvlink-s.txt", "GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 64: 26.562 GB/s\n",
     "GPU 0's link number '64' is 64, beyond 64 NVLink links"),
    ("nvml.json", nvml_with(memory_total_bytes=2**50), "memory_total_bytes is 1,125,899,906,842,624, beyond "
                                                       "1,125,899,906,842,624 bytes"),
    ("nvml.json", nvml_with(device_count=5000), "device_count is 5,000, beyond 1,024 GPUs"),
    ("nvml.json", nvml_with(cpu_affinity="0-2147483649"), "the CPU list entry '0-2147483649' is 2,147,483,649"),
    ("nvml.json", nvml_with(nvlinks=[{"link": 70, "active": True}]), "GPU 0's NVLink number is 70, beyond 64"),
    ("torch.json", torch_with(device_count=4096), "`device_count` is 4,096, beyond 1,024 GPUs"),
])
def test_beyond_what_a_machine_has_is_an_unreadable_file(make_bundle, name, text, sentence):
    report = report_for(make_bundle({name: text}))
    assert statuses(report, "bundle.unreadable") == ["error"]
    assert input_errors(report).startswith(f"{name} could not be parsed as {name}: {sentence}")
    assert strict_json(report)["exit_code"] == 2


def test_a_size_beyond_a_pebibyte_makes_smi_xml_unreadable():
    xml = (FIXTURES / "h200-shared" / "nvidia-smi-q.xml").read_text()
    total = xml.index("<total>", xml.index("<fb_memory_usage>"))
    with pytest.raises(ValueError, match=r"^the size '2000000000 MiB' is 2,097,152,000,000,000, beyond "):
        parse_nvidia_smi_q_xml(xml[:total] + "<total>2000000000 MiB</total>" + xml[xml.index("</total>", total) + 8:])


# ---------------------------------------------------------------- 2. odd values: that field's None, no check raises


def test_converters_reject_nan_inf_absurd_and_negative():
    for odd in ("nan", "NaN W", "inf", "-inf", "Infinity", "1e308", "1e400 W", "99999999999999999999"):
        assert units.first_number(odd) is None, odd
        assert units.to_int(odd) is None, odd
    assert units.first_number("-5 C") == -5.0 and units.first_number("700.00 W") == 700.0
    assert units.to_int("0x7fffffff") == 2**31 - 1 and units.to_int("0xffffffffffffffff") is None
    assert units.to_int("-1") is None and units.to_int("2.5") == 2
    assert units.to_bytes("-1 MiB") is None and units.to_bytes("nan MiB") is None and units.to_bytes("1 GiB") == 2**30
    assert units.finite(float("nan")) is None and units.finite(True) is None and units.finite(-3) == -3.0
    assert units.whole(-1) is None and units.whole(2.5) is None and units.whole(7.0) == 7 and units.whole("7") is None


def test_versions_without_a_dot_do_not_raise():
    assert version_tuple("580") == (580,) and version_tuple("2.11.0+cu130") == (2, 11, 0)
    assert version_tuple("abc") == () and version_tuple(None) == () and version_tuple("9" * 5000) == (999999999,)
    assert driver_requirement("13").minimum == driver_requirement("13.0").minimum
    assert driver_requirement("abc") is None and driver_requirement("") is None and driver_requirement("-1") is None


@pytest.mark.parametrize("cuda, status", [("13", "pass"), ("13.0", "pass"), ("abc", "warn"), ("0x7fffffff", "warn"),
                                          ("", "fail")])
def test_torch_cuda_without_a_dot_is_judged_not_an_error(make_bundle, cuda, status):
    """`""` is torch's own CPU-build answer (cuda is None or empty): a fail, as before."""
    report = report_for(h200_with(make_bundle, "torch.json", torch_with(cuda=cuda)))
    assert statuses(report, "software.driver_cuda") == [status]
    assert strict_json(report)["exit_code"] <= 1


def test_nvml_driver_version_without_a_dot(make_bundle):
    """`580` reaches CUDA 13's minor-version floor (580) but cannot be told against 13.0's GA driver (580.65.06);
    `525` cannot be told against CUDA 12's floor 525.60.13."""
    nvml = nvml_with(driver_version="580")
    report = report_for(make_bundle({"nvml.json": nvml, "torch.json": torch_with(cuda="13.0")}))
    assert statuses(report, "software.driver_cuda") == ["pass"]
    assert "through minor-version compatibility" in messages(report, "software.driver_cuda")
    report = report_for(make_bundle({"nvml.json": nvml_with(driver_version="525"),
                                     "torch.json": torch_with(cuda="12.8")}))
    assert statuses(report, "software.driver_cuda") == ["warn"]
    assert "525 stops short of the 525.60.13" in messages(report, "software.driver_cuda")
    report = report_for(h200_with(make_bundle, "nvml.json", nvml_with(driver_version="abc")))
    assert statuses(report, "software.driver_cuda") == ["warn"]
    assert "not a version" in messages(report, "software.driver_cuda")


@pytest.mark.parametrize("value", ["13", "abc", "1.2.3", "-1.0", 9.0, None])
def test_nvml_compute_capability_that_is_not_major_dot_minor(make_bundle, value):
    report = report_for(h200_with(make_bundle, "nvml.json", nvml_with(compute_capability=value)))
    assert statuses(report, "software.torch_arch") == ["skip"]
    if value is not None:
        assert f"compute_capability={json.dumps(value)}" in messages(report, "gpu.lost")
    strict_json(report)


@pytest.mark.parametrize("field, value", [
    ("power_limit_w", float("nan")), ("power_limit_w", float("inf")), ("power_limit_w", -700), ("power_limit_w", "700"),
    ("temperature_c", [43]), ("pcie_width_current", "abc"), ("pcie_gen_current", 2.5), ("pcie_replay_count", -1),
    ("memory_total_bytes", -1), ("retired_pages_sbe", "580"), ("ecc_enabled", "yes"), ("name", 7),
    ("clock_event_reasons", "gpu_idle"), ("processes", {"pid": 1}), ("nvlinks", 3), ("numa_node", -1),
])
def test_nvml_odd_value_is_that_fields_none_and_named(make_bundle, field, value):
    """nvml.json alone (with the H200 bundle, nvidia-smi -q would fill the field in)."""
    bundle = make_bundle({"nvml.json": nvml_with(**{field: value}), "torch.json": H200 / "torch.json"})
    gpu = build_facts(read_bundle(bundle)).gpus[0]
    assert getattr(gpu, field) is None
    assert f"{field}={json.dumps(value)}" in gpu.error_fields
    report = report_for(bundle)
    assert f"{field}={json.dumps(value)}" in messages(report, "gpu.lost")
    assert strict_json(report)["exit_code"] <= 1 and statuses(report, "bundle.unreadable") == []
    assert not [f for f in report.findings if f.status == Status.ERROR]


def test_nvml_negative_temperature_is_kept():
    document = NvmlDocument(nvml_with(temperature_c=-5))
    assert document.gpus[0].temperature_c == -5.0 and document.gpus[0].error_fields == []


@pytest.mark.parametrize("document, sentence", [
    ({"format": "gpuready-nvml", "version": 1, "gpus": {}}, "`gpus` is not a list of GPU objects"),
    ({"format": "gpuready-nvml", "version": 1, "gpus": [{"index": float("nan")}]},
     "GPU entry 0 has no valid index (NaN)"),
    ({"format": "gpuready-nvml", "version": 1, "gpus": [{"index": -1}]}, "GPU entry 0 has no valid index (-1)"),
])
def test_nvml_document_of_the_wrong_shape_is_unreadable(document, sentence):
    with pytest.raises(ValueError, match="^" + re.escape(sentence)):
        NvmlDocument(json.dumps(document))


@pytest.mark.parametrize("fields, sentence", [
    ({"cuda": 13}, "`cuda` is 13, where a string or null belongs"),
    ({"device_count": {}}, "`device_count` is {}, where an integer or null belongs"),
    ({"device_count": float("nan")}, "`device_count` is NaN, where an integer or null belongs"),
    ({"device_count": True}, "`device_count` is true, where an integer or null belongs"),
    ({"arch_list": "sm_90"}, "`arch_list` is \"sm_90\", where a list or null belongs"),
    ({"arch_list": [90]}, "`arch_list` holds something other than strings"),
])
def test_torch_json_field_of_the_wrong_type_makes_it_unreadable(make_bundle, fields, sentence):
    """torch.json's nulls mean something (no torch, a CPU build), so a wrong type is not read as null."""
    with pytest.raises(ValueError, match="^" + re.escape(sentence)):
        parse_torch_json(torch_with(**fields))
    report = report_for(h200_with(make_bundle, "torch.json", torch_with(**fields)))
    assert statuses(report, "bundle.unreadable") == ["error"] and statuses(report, "software.driver_cuda") == ["skip"]
    assert strict_json(report)["exit_code"] == 2


def test_smi_values_that_are_not_numbers(make_bundle):
    xml = (FIXTURES / "h200-shared" / "nvidia-smi-q.xml").read_text()
    fields = {"average_power_draw": "power_draw_w", "gpu_temp": "temperature_c", "replay_counter": "pcie_replay_count"}
    for tag, odd in (("average_power_draw", "nan W"), ("average_power_draw", "inf W"),
                     ("average_power_draw", "1e308 W"), ("gpu_temp", "-2147483648 C"), ("replay_counter", "-1"),
                     ("replay_counter", "0xffffffffffffffff")):
        start = xml.index(f"<{tag}>")
        mutated = xml[:start] + f"<{tag}>{odd}</{tag}>" + xml[xml.index(f"</{tag}>", start) + len(tag) + 3:]
        gpu = parse_nvidia_smi_q_xml(mutated).gpus[0]
        assert getattr(gpu, fields[tag]) == (-2147483648.0 if odd.startswith("-2147") else None), (tag, odd)
        strict_json(report_for(make_bundle({"nvidia-smi-q.xml": mutated})))


def test_plain_smi_huge_power_and_odd_ecc_cell(make_bundle):
    text = (FIXTURES / "h200-shared" / "nvidia-smi.txt").read_text()
    huge = text.replace("700W", "9" * 400 + "W", 1)
    assert huge != text
    report = report_for(make_bundle({"nvidia-smi.txt": huge}))
    assert strict_json(report)["facts"]["gpus"][0]["power_limit_w"] is None


def test_topology_and_nvlink_odd_tokens():
    topology = parse_topo_matrix("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tN/A\tN/A\n")
    assert topology.cpu_affinity == {0: "N/A"}
    links = parse_nvlink_status("GPU 0: NVIDIA H100 (UUID: GPU-1)\n\t Link 0: 1.2.3 GB/s\n\t Link 1: nan GB/s\n")
    assert [link.speed_gb_per_s for link in links[0]] == [None, None]


def test_a_check_never_raises_on_an_unparsed_affinity(make_bundle):
    facts = build_facts(read_bundle(make_bundle({name: H200 / name for name in ("nvml.json", "meminfo.txt")})))
    facts.gpus[0].cpu_affinity = "0-2147483649"  # as if a parser had let it through
    findings = [f for f in run_checks(facts, CheckOptions()) if f.check_id == "host.numa_affinity"]
    assert [f.status for f in findings] == [Status.PASS]


# ---------------------------------------------------------------- 3. strict JSON, valid against the schema


def test_non_finite_floats_become_null_with_the_raw_text():
    assert to_jsonable({"a": float("nan"), "b": [float("inf"), -math.inf, 1.5], "c": {2.0, float("nan")}}) == {
        "a": {"value": None, "raw": "nan"}, "b": [{"value": None, "raw": "inf"}, {"value": None, "raw": "-inf"}, 1.5],
        "c": [2.0, {"value": None, "raw": "nan"}]}
    subject = Subject(host="h", gpu=GpuRef(index=0, bus_id="00000000:3B:00.0"),
                      peer=GpuRef(index=1, bus_id="unknown:1"))
    report = Report(tool_version="t", host="h", findings=[
        Finding(check_id="power.limit", status=Status.WARN, subject=subject, message="m", observed=float("nan"),
                expected={"power_w": float("inf")})],
        measurements=[Measurement(name="m", subject=subject, value=float("nan"), unit="tflops",
                                  expected=float("inf"), samples=[1.0, float("-inf")])],
        series=[Series(subject=subject, metric="power_w", unit="w", t_s=[0.0, 1.0], values=[float("nan"), 3.0])])
    document = strict_json(report)
    finding = document["findings"][0]
    assert finding["observed"] == {"value": None, "raw": "nan"}
    assert finding["expected"] == {"power_w": {"value": None, "raw": "inf"}}
    assert finding["subject"]["gpu"]["bus_id"] == "0000:3b:00.0" and finding["subject"]["peer"]["bus_id"] is None
    assert document["measurements"][0]["value"] == {"value": None, "raw": "nan"}
    assert "non_finite" in SCHEMA["$defs"] and "raw" in SCHEMA["$defs"]["non_finite"]["description"]


def test_nvml_power_limit_nan_gives_strict_valid_json(make_bundle):
    bundle = h200_with(make_bundle, "nvml.json", nvml_with(power_limit_w=float("nan")))
    assert "NaN" in (bundle / "nvml.json").read_text()
    result = subprocess.run([sys.executable, "-m", "gpuready", "check", "--bundle", str(bundle), "--json"],
                            capture_output=True, text=True, timeout=120)
    document = json.loads(result.stdout, parse_constant=lambda token: pytest.fail(f"{token} in --json output"))
    jsonschema.validate(document, SCHEMA)
    assert document["exit_code"] == result.returncode <= 1
    # nvml.json's value is unreadable and named; nvidia-smi -q in the same bundle still gives the limit.
    assert document["facts"]["gpus"][0]["power_limit_w"] == 700.0
    assert [f["observed"] for f in document["findings"] if f["check_id"] == "gpu.lost"] == [["power_limit_w=NaN"]]


@pytest.mark.parametrize("bus_id", [None, "0000:00:0", "zz:00.0", 7, "0000:00:-1.0", "PCI:0000:3B:00"])
def test_every_bus_id_in_the_report_is_normalised_or_null(make_bundle, bus_id):
    report = report_for(h200_with(make_bundle, "nvml.json", nvml_with(bus_id=bus_id)))
    document = strict_json(report)
    bus_ids = {side["bus_id"] for finding in document["findings"] for side in
               (finding["subject"]["gpu"], finding["subject"]["peer"]) if side}
    assert bus_ids and all(value is None or units.normalize_bus_id(value) == value for value in bus_ids)
