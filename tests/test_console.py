"""The console renderer reads the report document: a saved report renders as the live one, in English or Chinese,
and a document with keys missing or values unknown to this version still renders, saying so."""

import copy
import io
import json

import pytest
from rich.console import Console

from conftest import FIXTURES
from gpuready.checks.registry import CheckOptions
from gpuready.cli.main import main
from gpuready.report.console import render_console
from gpuready.pipeline import check_report, gather_facts

DOCKER_H200 = FIXTURES / "h200-docker-collect"
BURN_REPORT = FIXTURES / "h200-burn" / "burn-60s-report.json"  # written by an older version: no `judged_for`


def render(document, verbose=False, lang="en", width=120):
    console = Console(record=True, width=width, file=io.StringIO())
    render_console(document, console, verbose=verbose, lang=lang)
    return console.export_text()


@pytest.fixture(scope="module")
def document():
    return check_report(gather_facts(DOCKER_H200, fast=True), CheckOptions()).to_dict()


def test_saved_report_renders_as_the_live_one(tmp_path, capsys, document):
    saved = tmp_path / "r.json"
    assert main(["check", "--bundle", str(DOCKER_H200), "--json", "--out", str(saved)]) == 0
    capsys.readouterr()
    for verbose in (False, True):
        live = render(document, verbose=verbose)
        assert render(json.loads(saved.read_text()), verbose=verbose) == live
        assert render(json.loads(json.dumps(document, allow_nan=False)), verbose=verbose) == live
    live = render(document)
    assert live.startswith("vm: READY WITH WARNINGS\n(single node: READY WITH WARNINGS; multi node: READY WITH WARNINGS; "
                           "verdict judged for: single node)\n0 fail, 1 warn, 47 pass, 12 skip\n")
    assert "\n1 × NVIDIA H200\n" in live and "0    0000:00:06.0  140 GiB  9.0  Gen5/5 x16/16   700 W        43 °C" in live
    assert "\nWARN host.memory_ratio\n  System RAM is 0.90× the total GPU memory" in live
    assert "\n  fix: Add system memory" in live
    assert "host.cpu_per_gpu" not in live and "\nhost: 5 passed\n" in live  # passes: one line per category
    assert live.endswith("12 check(s) skipped for lack of facts; --verbose lists them.\n")
    verbose = render(document, verbose=True)
    assert "\nSKIP " not in live and verbose.count("\nSKIP ") == 12
    assert verbose.index("WARN host.memory_ratio") < verbose.index("PASS host.cpu_per_gpu") < verbose.index("SKIP ")


def test_chinese_labels(document):
    text = render(document, lang="zh", width=300)
    assert text.startswith("vm: 就绪但有警告 READY WITH WARNINGS\n(单机 single node: 就绪但有警告 READY WITH WARNINGS; "
                           "多机 multi node: 就绪但有警告 READY WITH WARNINGS; 结论依据 verdict judged for: 单机 single node)\n")
    assert "失败 0，警告 1，通过 47，跳过 12" in text
    assert "\n警告 WARN host.memory_ratio\n" in text and "修复 fix: 增加系统内存" in text
    assert "\n主机 host：5 项通过\n" in text and "12 项检查因缺少信息而跳过" in text  # categories too (issue 32)
    assert "未就绪" not in text


def test_document_of_an_older_version_renders():
    text = render(json.loads(BURN_REPORT.read_text()), width=200)
    assert text.startswith("vm: READY\n(single node: READY; multi node: READY; verdict judged for: not in this report)\n")
    assert "\nburn: 8 passed\n" in text
    assert "\nburn_power_w      GPU0 rank 0    691.4 watts     700.0          99%" in text


def test_missing_keys_and_unknown_values_are_said_plainly():
    assert render({}, width=200) == (
        "unknown host: UNKNOWN (not in this report)\n(single node: UNKNOWN (not in this report); multi node: UNKNOWN "
        "(not in this report); verdict judged for: not in this report)\n0 fail, 0 warn, 0 pass, 0 skip\n")
    text = render({
        "host": "node7", "verdict": "maybe", "verdicts": {"single_node": "ready"}, "judged_for": "cluster",
        "findings": [{"check_id": "gpu.odd", "status": "bogus", "message": "Something new.", "fix": "Look at it."},
                     {"check_id": "gpu.plain", "status": "pass", "message": "Fine.", "fix": "Not shown."},
                     {"check_id": "gpu.bare"}, "not a finding"],
        "measurements": [{"name": "h2d_gb_per_s", "unit": "gb_per_s", "value": "fast"},
                         {"name": "d2h_gb_per_s", "unit": "gb_per_s", "value": {"value": None, "raw": "nan"},
                          "expected": 50.0, "subject": {"host": "node7", "gpu": {"index": 2, "cuda_index": 0}}}],
        "facts": {"gpus": [{"index": 0, "memory_total_bytes": "lots"}, "not a gpu"]},
    }, width=200)
    assert text.startswith("node7: UNKNOWN ('maybe' is not a verdict this version knows)\n(single node: READY; multi node: "
                           "UNKNOWN (not in this report); verdict judged for: 'cluster' (not known to this version))\n"
                           "0 fail, 0 warn, 1 pass, 0 skip\n"
                           "3 finding(s) with no status or one this version does not know\n")
    assert "\nBOGUS? gpu.odd\n  Something new.\n  fix: Look at it.\n" in text and "Not shown." not in text
    assert "\nNO STATUS gpu.bare\n  ?\nNO STATUS ?\n  ?\n" in text  # "not a finding": nothing known of it
    assert "\ngpu: 1 passed\n" in text and "gpu.plain" not in text  # a pass is counted, not listed
    assert "\n0    ?       ?      ?       ?   ?               ?            ?   \n" in text
    assert "\nh2d_gb_per_s  ?                ? GB/s         -             \n" in text
    assert "\nd2h_gb_per_s  GPU2 (cuda:0)  nan GB/s      50.0         nan%\n" in text
    listed = render({"findings": [{"check_id": "gpu.plain", "status": "pass"}, {"check_id": "gpu.odd", "status": "x"}]},
                    verbose=True)
    assert listed.index("X? gpu.odd") < listed.index("PASS gpu.plain")  # an unknown status sorts before warn and pass
    zh = render({"verdict": "maybe", "findings": [{"status": "bogus"}]}, lang="zh", width=300)
    assert zh.startswith("未知主机 unknown host: 无法判断 UNKNOWN ('maybe' is not a verdict this version knows)\n"
                         "(单机 single node: 无法判断 UNKNOWN (not in this report);")
    assert "结论依据 verdict judged for: 未记录 not in this report)" in zh and "状态未知 1 finding(s)" in zh


def test_any_key_removed_or_nulled_still_renders(document):
    """Every key of the document, of a finding, of a subject and of an inventory row: removed, null or of a wrong type."""
    def variants(doc):
        paths = [[key] for key in doc]
        paths += [["findings", 0, key] for key in doc["findings"][0]]
        paths += [["findings", 0, "subject", key] for key in doc["findings"][0]["subject"]]
        paths += [["facts", "gpus", 0, key] for key in doc["facts"]["gpus"][0]]
        for path in paths:
            for change in ("remove", None, [], "text", 7):
                changed = copy.deepcopy(doc)
                parent = changed
                for step in path[:-1]:
                    parent = parent[step]
                if change == "remove":
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = change
                yield path, changed

    for path, changed in variants(document):
        for lang in ("en", "zh"):
            assert render(changed, verbose=True, lang=lang), path


def test_a_report_object_is_refused():
    with pytest.raises(TypeError, match="report document"):
        render_console(object(), Console(file=io.StringIO()))


def test_a_recorded_bench_report_renders_its_figures_in_readers_units():
    document = json.loads((FIXTURES / "h200-bench" / "bench-1.3B-amp-bf16-mb4.json").read_text())
    text = render(document, width=160)
    assert "\nsingle_tokens_per_s " in text and " vm single×1  42,681 tokens/s " in text
    assert "\nstep_time_s " in text and "191.9 ms" in text  # the median step of the recording, 0.191937 s
    assert "39.2%" in text  # MFU, a fraction
    assert "38.0 GiB" in text  # reserved memory, 40,793,997,312 bytes
