"""Tests that kill the mutants of checks/ that survived the suite (issue 23, mutation testing: the survivors, the run
and how to reproduce it are in benchmarks/mutation_score.sh).

Every expectation comes from a recording (tests/fixtures, its README names the source) or is worked out by hand in
the test's docstring; a recording edited for a case says which line changed and why.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PUBLIC
from helpers import report_for
from gpuready.checks.registry import run_checks
from gpuready.facts.types import Facts, GpuFacts
from gpuready.knowledge import thresholds
from gpuready.model import Status

L4_SMI = PUBLIC / "pcie-x8" / "nvidia-smi-q.txt"
"""nvidia-smi -a of one NVIDIA L4 (thamada/nvidia-smi, see tests/fixtures/public/README.md): GPU Link Info →
PCIe Generation Max 4, Current 1, Device Max 4, Host Max 4; Link Width Max 16x, Current 8x; Utilization Gpu 0 %;
Bus Id 00000000:01:00.0."""
H200_XML = Path(__file__).parent / "fixtures" / "h200-collect" / "nvidia-smi-q.xml"
"""nvidia-smi -q -x of one H200 (recorded 2026-12-02): max_link_gen 5, current 5, max_device_link_gen 5, host N/A."""

NVML_PCIE_REF_START = "NVML nvmlDeviceGetCurrPcieLinkWidth/MaxPcieLinkWidth"
NVIDIA_SMI_PCIE_QUOTE = "'may be reduced when the GPU is not in use'"
"""nvidia-smi --help-query-gpu on pcie.link.gen.current / width.current: 'The current link generation and width.
These may be reduced when the GPU is not in use.'"""


def _edited(path: Path, *edits: tuple[str, str]) -> str:
    """The recording with each (old, new) replaced; each `old` must occur exactly once."""
    text = path.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def _findings(make_bundle, files: dict, check_id: str):
    return [f for f in report_for(make_bundle(files)).findings if f.check_id == check_id]


def _only(found):
    assert len(found) == 1, [(f.check_id, f.status.value, f.message) for f in found]
    return found[0]


def _assert_pcie_ref(ref: str):
    assert ref.startswith(NVML_PCIE_REF_START) and ref.endswith(NVIDIA_SMI_PCIE_QUOTE), ref


# ------------------------------------------------------------------------------------------ pcie.link_degraded

def test_link_degraded_on_the_l4_recording_names_width_share_and_the_lspci_command(make_bundle):
    """The L4 recording: Link Width Max 16x, Current 8x at Bus Id 00000000:01:00.0. Half the lanes: 8/16 = 50 % of
    the host↔GPU bandwidth; the fix's lspci command selects the GPU's bus id."""
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.txt": L4_SMI}, "pcie.link_degraded"))
    assert finding.status == Status.FAIL
    assert finding.message == "GPU0's PCIe link runs at x8 of x16: host↔GPU bandwidth is cut to 50%."
    assert finding.fix == ("Reseat GPU0 (0000:01:00.0) or its riser/cable, check the slot's wiring in the board manual "
                           "and the BIOS bifurcation setting; confirm with `sudo lspci -vv -s 0000:01:00.0` (LnkSta).")
    assert (finding.observed, finding.expected) == ("x8", "x16")
    assert len(finding.refs) == 1
    _assert_pcie_ref(finding.refs[0])


def test_link_degraded_without_a_bus_id_names_the_gpu_and_lspci_without_a_selector():
    """A GPU known only by its index (no bus id): x4 of x16 is 4/16 = 25 %; `lspci -vv` with no `-s`."""
    gpu = GpuFacts(index=2, bus_id=None, name="NVIDIA L4", pcie_width_current=4, pcie_width_max=16)
    finding = _only(run_checks(Facts(gpus=[gpu]), only=["pcie.link_degraded"]))
    assert finding.status == Status.FAIL
    assert finding.message == "GPU2's PCIe link runs at x4 of x16: host↔GPU bandwidth is cut to 25%."
    assert finding.fix == ("Reseat GPU2 or its riser/cable, check the slot's wiring in the board manual and the BIOS "
                           "bifurcation setting; confirm with `sudo lspci -vv` (LnkSta).")


def test_link_degraded_judges_only_gpus_that_report_both_widths():
    """GPU0 reports a current width but no maximum: it cannot be judged, so the one judged GPU (x16 of x16) passes and
    the pass says one GPU was left unjudged."""
    gpus = [GpuFacts(index=0, bus_id="0000:01:00.0", pcie_width_current=8, pcie_width_max=None),
            GpuFacts(index=1, bus_id="0000:02:00.0", pcie_width_current=16, pcie_width_max=16)]
    finding = _only(run_checks(Facts(gpus=gpus), only=["pcie.link_degraded"]))
    assert finding.status == Status.PASS


# ------------------------------------------------------------------------------------------ pcie.gen_degraded

def test_idle_gpu_with_a_lowered_generation_passes(make_bundle):
    """The L4 recording idles (Utilization Gpu 0 %) at PCIe Gen1 of Gen4: nvidia-smi's help says the generation 'may
    be reduced when the GPU is not in use', so an idle GPU at Gen1 is a pass that defers to a test under load."""
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.txt": L4_SMI}, "pcie.gen_degraded"))
    assert finding.status == Status.PASS
    assert finding.message == ("GPU0 idles at Gen1 (max Gen4): idle GPUs lower the link generation to save power, so "
                               "it is judged under load by `gpuready validate` (transfer).")
    assert (finding.observed, finding.expected, finding.refs) == ("Gen1", "Gen4 under load", [])


@pytest.mark.parametrize("utilization", [99, thresholds("pcie_gen_busy")["busy_utilization_pct"]])
def test_busy_gpu_with_a_lowered_generation_warns(make_bundle, utilization):
    """The same L4 recording with its `Gpu : 0 %` utilisation line set busy (99 %, and exactly the busy threshold:
    'judges a lower current generation only on a GPU at least this busy', thresholds.toml [pcie_gen_busy]): a busy
    GPU at Gen1 of Gen4 is a warning citing NVML/nvidia-smi and the busy rule."""
    text = _edited(L4_SMI, ("        Gpu                               : 0 %",
                            f"        Gpu                               : {utilization} %"))
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.txt": text}, "pcie.gen_degraded"))
    assert finding.status == Status.WARN
    assert finding.message == f"GPU0 is busy ({utilization}%) yet its link runs at Gen1 of Gen4."
    assert (finding.observed, finding.expected) == ("Gen1", "Gen4")
    assert len(finding.refs) == 2 and finding.refs[1] == thresholds("pcie_gen_busy")["source"]
    _assert_pcie_ref(finding.refs[0])


def test_just_below_the_busy_threshold_is_idle(make_bundle):
    """One percent below the busy threshold the GPU counts as idle: Gen1 of Gen4 passes."""
    below = thresholds("pcie_gen_busy")["busy_utilization_pct"] - 1
    text = _edited(L4_SMI, ("        Gpu                               : 0 %",
                            f"        Gpu                               : {below} %"))
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.txt": text}, "pcie.gen_degraded"))
    assert finding.status == Status.PASS and finding.message.startswith("GPU0 idles at Gen1 (max Gen4)")


def test_unknown_utilisation_counts_as_idle():
    """No utilisation figure: nothing says the GPU is busy, so Gen2 of Gen4 is the idle pass."""
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", pcie_gen_current=2, pcie_gen_max=4, pcie_gen_device_max=4,
                   utilization_gpu_pct=None)
    finding = _only(run_checks(Facts(gpus=[gpu]), only=["pcie.gen_degraded"]))
    assert finding.status == Status.PASS and finding.message.startswith("GPU0 idles at Gen2 (max Gen4)")


def test_slot_below_the_gpus_generation_warns(make_bundle):
    """The L4 recording with `Host Max : 4` set to 3 (a Gen3 slot): the L4 supports Gen4 (Device Max 4). Each PCIe
    generation doubles the per-lane rate (Gen3 8 GT/s, Gen4 16 GT/s), so the slot gives 2^(3-4) = 50 % of the GPU's
    host bandwidth."""
    text = _edited(L4_SMI, ("                Host Max                  : 4", "                Host Max                  : 3"))
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.txt": text}, "pcie.gen_degraded"))
    assert finding.status == Status.WARN
    assert finding.message == ("GPU0 supports PCIe Gen4 but its slot/host allows only Gen3: host↔GPU bandwidth is about "
                               "50% of what the GPU can do.")
    assert (finding.observed, finding.expected) == ("Gen3", "Gen4")
    assert len(finding.refs) == 1
    _assert_pcie_ref(finding.refs[0])


def test_slot_judged_against_the_datasheet_generation_when_the_device_maximum_is_not_reported(make_bundle):
    """The H200 recording with <max_device_link_gen> removed and <max_link_gen> 5 → 3: the GPU's own generation then
    comes from the datasheet (H200 SXM: PCIe Gen5, gpus.toml), the host maximum is N/A so the link maximum is Gen3:
    2^(3-5) = 25 % of the bandwidth."""
    text = _edited(H200_XML, ("<max_link_gen>5</max_link_gen>", "<max_link_gen>3</max_link_gen>"),
                   ("<max_device_link_gen>5</max_device_link_gen>", ""))
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.xml": text}, "pcie.gen_degraded"))
    assert finding.status == Status.WARN
    assert finding.message == ("GPU0 supports PCIe Gen5 but its slot/host allows only Gen3: host↔GPU bandwidth is about "
                               "25% of what the GPU can do.")
    assert (finding.observed, finding.expected) == ("Gen3", "Gen5")
