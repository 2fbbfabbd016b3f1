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
from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.facts.types import Facts, GpuFacts
from gpuready.knowledge import thresholds
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not (see the issue-23 report)

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


# ----------------------------------------------------------------------------------------------------- pcie.bar1

MIB = 2**20
SMI_4090 = PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt"
"""nvidia-smi -q of 8x GeForce RTX 4090 (leptonai/gpud, tests/fixtures/public/README.md): BAR1 Total 256 MiB each."""


def _bar1(*gpus: GpuFacts):
    return [f for f in run_checks(Facts(gpus=list(gpus)), only=["pcie.bar1"])]


def test_bar1_below_what_the_h100_ships_with_warns_with_the_shipped_size_and_its_source():
    """An H100 80GB HBM3 (the H100 SXM row) ships with BAR1 131,072 MiB (thamada's 8x H100 SXM capture, gpus.toml);
    one showing 256 MiB has Above 4G Decoding / Resizable BAR off: warn, observed '256 MiB', expected '>= 131,072 MiB
    (as shipped)', citing the capture and the GPUDirect RDMA rule."""
    from gpuready.knowledge import gpu_spec
    gpu = GpuFacts(index=0, bus_id="0000:18:00.0", name="NVIDIA H100 80GB HBM3", memory_total_bytes=81559 * MIB,
                   bar1_total_bytes=256 * MIB)
    finding = _only(_bar1(gpu))
    assert finding.status == Status.WARN
    assert finding.message == ("GPU0 (0000:18:00.0)'s BAR1 is 256 MiB but the H100 SXM ships with 131,072 MiB: Above 4G "
                               "Decoding / Resizable BAR looks off in the BIOS, which limits GPUDirect RDMA and P2P "
                               "mappings.")
    assert (finding.observed, finding.expected) == ("256 MiB", ">= 131,072 MiB (as shipped)")
    source = gpu_spec("NVIDIA H100 80GB HBM3").get("bar1_source")
    assert source.startswith("thamada/nvidia-smi") and "BAR1 Total 131072 MiB" in source
    assert finding.refs == [source, thresholds("pcie_bar1")["source"]]


def test_a_gpu_without_a_bar1_figure_does_not_stop_the_others_being_judged():
    """GPU0 reports no BAR1, GPU1 (an H100 SXM) 256 MiB, GPU2 (a board gpuready has no shipped size for) reports no
    VRAM, GPU3 (same unknown board) 256 MiB of 16 GiB: GPU1 is judged against its shipped size, GPU3 against its VRAM
    (256 MiB < 0.5 × 16,384 MiB)."""
    gpus = [GpuFacts(index=0, bus_id="0000:17:00.0", name="NVIDIA H100 80GB HBM3", bar1_total_bytes=None),
            GpuFacts(index=1, bus_id="0000:18:00.0", name="NVIDIA H100 80GB HBM3", memory_total_bytes=81559 * MIB,
                     bar1_total_bytes=256 * MIB),
            GpuFacts(index=2, bus_id="0000:19:00.0", name="NVIDIA Unknown Board", memory_total_bytes=None,
                     bar1_total_bytes=256 * MIB),
            GpuFacts(index=3, bus_id="0000:1a:00.0", name="NVIDIA Unknown Board", memory_total_bytes=16384 * MIB,
                     bar1_total_bytes=256 * MIB)]
    found = _bar1(*gpus)
    assert [(f.status, f.subject.gpu.index) for f in found] == [(Status.WARN, 1), (Status.WARN, 3)]
    assert found[1].message == ("GPU3 (0000:1a:00.0)'s BAR1 is 256 MiB for 16 GiB of VRAM: Resizable BAR / Above 4G "
                                "Decoding looks off, which limits GPUDirect RDMA and P2P mappings.")
    assert (found[1].observed, found[1].expected) == ("256 MiB", ">= 50% of VRAM (model's shipped BAR1 unknown)")
    assert found[1].refs == [thresholds("pcie_bar1")["source"]]


def test_bar1_of_exactly_half_the_vram_is_not_small():
    """The rule warns below 0.5 × VRAM (thresholds.toml [pcie_bar1]); a card showing exactly half (32,768 MiB of
    65,536) is not below it: the plain pass, for an RTX 4090 (shipped 256 MiB) and for a board of unknown size."""
    for name in ("NVIDIA GeForce RTX 4090", "NVIDIA Unknown Board"):
        gpu = GpuFacts(index=0, bus_id="0000:01:00.0", name=name, memory_total_bytes=65536 * MIB,
                       bar1_total_bytes=32768 * MIB)
        finding = _only(_bar1(gpu))
        assert (finding.status, finding.message) == (Status.PASS, "BAR1 is as shipped or covers the VRAM on all 1 GPU(s).")


def test_the_recorded_4090_box_passes_as_shipped_citing_the_capture(make_bundle):
    """8x RTX 4090 at BAR1 256 MiB each, which is what the card ships with (gpus.toml, thamada's and gpud's
    captures): one pass naming the eight GPUs and the size, citing the capture."""
    from gpuready.knowledge import gpu_spec
    finding = _only(_findings(make_bundle, {"nvidia-smi-q.txt": SMI_4090}, "pcie.bar1"))
    assert finding.status == Status.PASS
    assert finding.refs == [gpu_spec("NVIDIA GeForce RTX 4090").get("bar1_source")]
    assert finding.message.startswith("BAR1 is what these GPUs ship with: GPU0 (0000:01:00.0) RTX 4090, ")
    assert "GPU7 (0000:e1:00.0) RTX 4090 (256 MiB). Such boards map only a small window" in finding.message
    assert finding.observed["GPU7 (0000:e1:00.0)"] == "256 MiB" and len(finding.observed) == 8
    assert finding.expected == "BAR1 as shipped"


def test_boards_as_shipped_with_different_bar1_sizes_are_named_without_a_size():
    """Two RTX 4090s (shipped BAR1 256 MiB, 24,564 MiB of VRAM) showing 256 and 512 MiB: both at least as shipped and
    below half the VRAM, so one pass naming both, with no single size to quote."""
    gpus = [GpuFacts(index=i, bus_id=f"0000:0{i + 1}:00.0", name="NVIDIA GeForce RTX 4090",
                     memory_total_bytes=24564 * MIB, bar1_total_bytes=size * MIB) for i, size in enumerate((256, 512))]
    finding = _only(_bar1(*gpus))
    assert finding.status == Status.PASS
    assert finding.message.startswith("BAR1 is what these GPUs ship with: GPU0 (0000:01:00.0) RTX 4090, GPU1 "
                                      "(0000:02:00.0) RTX 4090. Such boards map only a small window of VRAM by design")
    assert finding.observed == {"GPU0 (0000:01:00.0)": "256 MiB", "GPU1 (0000:02:00.0)": "512 MiB"}


# ------------------------------------------------------------------------------------------------ pcie.acs_iommu

LSPCI_PLX = Path(__file__).parent / "fixtures" / "pcie-power" / "lspci-vv-8xl40s-plx.txt"
"""lspci -vv of 8x L40S behind four PLX switches (tests/fixtures/pcie-power/README.md): root ports 16:00.0, 3a:00.0,
85:00.0, ae:00.0 show ACSCtl ReqRedir+ CmpltRedir+; of the switch ports only af's downstream ports b0:08.0 and
b0:10.0 do, above GPUs b1:00.0 and b2:00.0."""
H200_DMESG = Path(__file__).parent / "fixtures" / "h200-collect" / "dmesg.txt"
"""dmesg of the recorded H200: `iommu: Default domain type: Translated`."""
ROOT_NOTE = (" ACS redirection on CPU root port(s) 0000:16:00.0, 0000:3a:00.0, 0000:85:00.0, 0000:ae:00.0 is by design "
             "(the kernel sets it with the IOMMU on) and does not slow GPU peer traffic, which crosses the root complex "
             "between root ports anyway.")
NCCL_IOMMU_REF = "NCCL troubleshooting, IOMMU: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"


def _l40s_box() -> list[GpuFacts]:
    buses = ("19", "1a", "3d", "3e", "88", "89", "b1", "b2")
    return [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA L40S") for i, bus in enumerate(buses)]


def _acs(gpus, devices=None, cmdline=None, log=None):
    from gpuready.facts.kernel_log import parse_kernel_log
    from gpuready.facts.types import HostFacts
    facts = Facts(gpus=gpus, pci_devices=devices, host=HostFacts(kernel_cmdline=cmdline),
                  kernel_log=parse_kernel_log(log) if log is not None else None)
    return run_checks(facts, only=["pcie.acs_iommu"])


def _plx():
    from gpuready.facts.lspci import parse_lspci
    return parse_lspci(LSPCI_PLX.read_text())


def test_acs_on_a_switch_above_two_gpus_warns_naming_ports_gpus_and_the_root_ports_by_design():
    """af's downstream ports b0:08.0 and b0:10.0 redirect (ReqRedir+ CmpltRedir+) with GPU6 (b1) and GPU7 (b2) below
    the same switch: one warning for the switch; the four root ports' ACS is noted as by design; the fix's setpci
    names the first port."""
    finding = _only(_acs(_l40s_box(), _plx()))
    assert finding.status == Status.WARN
    assert finding.message == (
        "ACS redirection is on at PCIe switch port(s) 0000:b0:08.0 (ReqRedir+ CmpltRedir+), 0000:b0:10.0 (ReqRedir+ "
        "CmpltRedir+) with 2 GPUs below the same switch: GPU6 (0000:b1:00.0), GPU7 (0000:b2:00.0). Their peer "
        "traffic, which should turn inside the switch, detours through the CPU root complex: P2P is slow and NCCL can "
        "hang." + ROOT_NOTE)
    assert "`sudo setpci -s 0000:b0:08.0 ECAP_ACS+0x6.w=0000`" in finding.fix
    assert finding.expected == "ACSCtl ReqRedir- CmpltRedir- on switch ports between GPUs"
    assert finding.refs == [thresholds("pcie_acs")["source"]]


def test_a_switch_with_one_gpu_below_does_not_hide_a_later_switch_with_two():
    """The same box with ACS also on 18:08.0, whose switch (17:00.0) has GPUs 19 and 1a below but 18:08.0 only 19:
    the 17 switch then holds 2 GPUs too — both switches warn, in lspci order; with ACS on 18:08.0 and its upstream
    left out of the list, 18:08.0 is judged alone (one GPU below it): only af's switch warns."""
    devices = _plx()
    for device in devices:
        if device.address == "0000:18:08.0":
            device.acs_enabled = ["ReqRedir", "CmpltRedir"]
    found = _acs(_l40s_box(), devices)
    assert [f.observed["switch"] for f in found] == ["0000:17:00.0", "0000:af:00.0"]
    assert found[0].observed["gpus"] == ["GPU0 (0000:19:00.0)", "GPU1 (0000:1a:00.0)"]
    alone = [device for device in devices if device.address != "0000:17:00.0"]
    assert [f.observed["switch"] for f in _acs(_l40s_box(), alone)] == ["0000:af:00.0"]


def test_a_bridge_without_an_express_capability_is_named_a_bridge():
    """tests/test_pcie_acs_aer.py's hand-written lspci: a PLX bridge (no Express capability, so its port type is
    unknown) at 17:00.0 with ACSCtl ReqRedir+ CmpltRedir+ above two A100s."""
    from test_pcie_acs_aer import LSPCI
    from gpuready.facts.lspci import parse_lspci
    gpus = [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA A100-PCIE-40GB") for i, bus in enumerate(("18", "19"))]
    finding = _only(_acs(gpus, parse_lspci(LSPCI)))
    assert finding.status == Status.WARN
    assert finding.message == (
        "ACS redirection is on at PCIe bridge (port type unknown: lspci showed no Express capability) port(s) "
        "0000:17:00.0 (ReqRedir+ CmpltRedir+) with 2 GPUs below the same switch: GPU0 (0000:18:00.0), GPU1 "
        "(0000:19:00.0). Their peer traffic, which should turn inside the switch, detours through the CPU root "
        "complex: P2P is slow and NCCL can hang.")


@pytest.mark.parametrize("cmdline, option", [("BOOT_IMAGE=/vmlinuz intel_iommu=on quiet", "intel_iommu=on"),
                                             ("BOOT_IMAGE=/vmlinuz amd_iommu=on", "amd_iommu=on")])
def test_a_translating_iommu_on_the_command_line_warns(cmdline, option):
    finding = _only(_acs(_l40s_box()[:2], cmdline=cmdline))
    assert finding.status == Status.WARN
    assert finding.message == (f"The IOMMU translates DMA (kernel command line has {option}): PCIe P2P between GPUs "
                               "may be slow, fail, or be silently dropped.")
    assert finding.fix == "Add `iommu=pt` to the kernel command line (GRUB_CMDLINE_LINUX), update-grub, reboot."
    assert (finding.observed, finding.expected) == (f"kernel command line has {option}",
                                                    "iommu=pt (passthrough) or off on bare metal")
    assert finding.refs == [NCCL_IOMMU_REF]


@pytest.mark.parametrize("cmdline, said", [
    ("BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt", "kernel command line has iommu=pt"),
    ("BOOT_IMAGE=/vmlinuz iommu.passthrough=1", "kernel command line has iommu=pt"),
    ("BOOT_IMAGE=/vmlinuz intel_iommu=off", "kernel command line turns the IOMMU off"),
    ("BOOT_IMAGE=/vmlinuz amd_iommu=off", "kernel command line turns the IOMMU off"),
])
def test_passthrough_or_off_on_the_command_line_passes(cmdline, said):
    """iommu=pt (or iommu.passthrough=1) and intel_iommu/amd_iommu=off do not translate GPU DMA: a pass saying which,
    and that ACS was not judged without lspci."""
    finding = _only(_acs(_l40s_box()[:2], cmdline=cmdline))
    assert (finding.status, finding.refs, finding.observed) == (Status.PASS, [], None)
    assert finding.message == f"ACS not judged (no lspci -vv as root in this run); IOMMU: {said}."


def test_the_recorded_kernel_logs_translated_domain_warns_and_passthrough_passes():
    """The recorded H200 dmesg says `iommu: Default domain type: Translated` (Linux drivers/iommu/iommu.c prints
    Translated, or Passthrough under iommu=pt): with two GPUs that is the translating IOMMU's warning, quoting the
    log; the same line saying Passthrough passes with lspci's ACS verdict."""
    log = H200_DMESG.read_text()
    finding = _only(_acs(_l40s_box()[:2], log=log))
    assert finding.status == Status.WARN
    assert finding.message == ("The IOMMU translates DMA (kernel log: iommu: Default domain type: Translated): PCIe P2P "
                               "between GPUs may be slow, fail, or be silently dropped.")
    assert finding.observed == "kernel log: iommu: Default domain type: Translated"
    passthrough = log.replace("iommu: Default domain type: Translated", "iommu: Default domain type: Passthrough")
    finding = _only(_acs(_l40s_box(), _plx(), log=passthrough, cmdline="BOOT_IMAGE=/vmlinuz quiet"))
    assert finding.status == Status.WARN  # af's switch still redirects
    devices = _plx()
    for device in devices:
        if device.port_type == "Downstream Port":
            device.acs_enabled = []
    finding = _only(_acs(_l40s_box(), devices, log=passthrough))
    assert finding.status == Status.PASS
    assert finding.message == ("lspci shows no ACS redirection on PCIe switch ports between GPUs; IOMMU: kernel log: "
                               "iommu: Default domain type: Passthrough." + ROOT_NOTE)
    assert finding.observed == {"root_ports_redirecting": ["0000:16:00.0", "0000:3a:00.0", "0000:85:00.0",
                                                           "0000:ae:00.0"]}
    assert finding.refs == [thresholds("pcie_acs")["source"]]


def test_no_iommu_evidence_with_lspci_passes_saying_so_and_without_anything_is_not_judged():
    devices = _plx()
    for device in devices:
        if device.port_type == "Downstream Port":
            device.acs_enabled = []
    finding = _only(_acs(_l40s_box(), devices))
    assert finding.message == ("lspci shows no ACS redirection on PCIe switch ports between GPUs; IOMMU: no IOMMU "
                               "setting on the kernel command line or in the kernel log." + ROOT_NOTE)
    nothing = _only(_acs(_l40s_box()[:2]))
    assert (nothing.status, nothing.message) == (Status.SKIP, "Not judged: neither lspci -vv (ACS) nor the kernel "
                                                               "command line or log (IOMMU) is in this run.")


# ------------------------------------------------------------------------------------------------------ pcie.aer

PCIE_POWER = Path(__file__).parent / "fixtures" / "pcie-power"
"""Recorded (public) and hand-built AER logs and lspci listings, each with its source in the folder's README.md."""
LSPCI_4090 = PCIE_POWER / "lspci-vv-8x4090-rootports.txt"
AER_REF = ("Linux PCIe AER howto: the root port logs 'AER: <severity> error received: <source BDF>' and the source "
           "device prints 'PCIe Bus Error: severity=…', https://docs.kernel.org/PCI/pcieaer-howto.html")


def _box_4090() -> list[GpuFacts]:
    buses = ("01", "23", "41", "61", "81", "a1", "c1", "e1")
    return [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA GeForce RTX 4090") for i, bus in enumerate(buses)]


def _aer(log: str, gpus, lspci: str | None = None):
    from gpuready.facts.kernel_log import parse_kernel_log
    from gpuready.facts.lspci import parse_lspci
    facts = Facts(gpus=gpus, kernel_log=parse_kernel_log(log), pci_devices=parse_lspci(lspci) if lspci else None)
    found = run_checks(facts, only=["pcie.aer"])
    for finding in found:
        assert finding.refs[0].startswith(AER_REF), finding.refs
    return found


def test_aer_on_the_root_port_above_a_gpu_counts_for_that_gpu():
    """dmesg-aer-rootport-above-gpu.txt: root port 0000:40:01.1 (above GPU2, 0000:41:00.0, in the 4090 lspci) reports
    two corrected errors of its own: a warning for GPU2 quoting the last line."""
    finding = _only(_aer((PCIE_POWER / "dmesg-aer-rootport-above-gpu.txt").read_text(), _box_4090(),
                         LSPCI_4090.read_text()))
    assert (finding.status, finding.subject.gpu.index) == (Status.WARN, 2)
    assert finding.message == (
        "2 corrected PCIe AER error(s) on Root Port 0000:40:01.1 above GPU2 (0000:41:00.0): errors on the link to this "
        "GPU count for it; last: [ 8124.377428] pcieport 0000:40:01.1: AER: PCIe Bus Error: severity=Corrected, "
        "type=Physical Layer, (Receiver ID)")
    assert (finding.observed, finding.expected) == ({"port": "0000:40:01.1", "errors": 2}, 0)
    assert finding.fix.startswith("Reseat the GPU and its riser/cable, check the slot and the port's link "
                                  "(`sudo lspci -vv -s 0000:40:01.1`: LnkSta, AER status)")


def test_uncorrected_aer_on_an_nvme_drive_names_the_drive_and_its_product():
    """dmesg-aer-nvme-uncorrected.txt: 0000:42:00.0 is `Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe
    SSD Controller PM173X (prog-if 02 [NVM Express])` in the lspci: one uncorrected error, the product named without
    the prog-if."""
    finding = _only(_aer((PCIE_POWER / "dmesg-aer-nvme-uncorrected.txt").read_text(), _box_4090(),
                         LSPCI_4090.read_text()))
    assert (finding.status, finding.subject.gpu) == (Status.WARN, None)
    assert finding.message == (
        "1 uncorrected PCIe AER error(s) on Non-Volatile memory controller 0000:42:00.0 (Samsung Electronics Co Ltd "
        "NVMe SSD Controller PM173X): a NIC or NVMe drive, not a GPU fault, but it can stall I/O or RDMA; last: "
        "[ 9001.554210] pcieport 0000:40:03.1: AER: Uncorrected (Non-Fatal) error received: 0000:42:00.0")
    assert finding.fix == ("Check device 0000:42:00.0: reseat it, update its firmware, read "
                           "`sudo lspci -vv -s 0000:42:00.0`.")
    assert (finding.observed, finding.expected) == (
        {"device": "0000:42:00.0", "class": "Non-Volatile memory controller", "errors": 1}, 0)


def test_uncorrected_aer_on_a_device_that_is_no_nic_or_drive_is_not_called_one():
    """The same log with the drive's lspci class changed to `Mass storage controller` (a class gpuready does not call
    a NIC or NVMe drive) and a revision instead of a prog-if: the device is named by its class, the product without
    the revision."""
    lspci = LSPCI_4090.read_text().replace(
        "42:00.0 Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe SSD Controller PM173X (prog-if 02 "
        "[NVM Express])", "42:00.0 Mass storage controller: Broadcom / LSI SAS3008 PCI-Express Fusion-MPT SAS-3 (rev 02)")
    finding = _only(_aer((PCIE_POWER / "dmesg-aer-nvme-uncorrected.txt").read_text(), _box_4090(), lspci))
    assert finding.message.startswith(
        "1 uncorrected PCIe AER error(s) on Mass storage controller 0000:42:00.0 (Broadcom / LSI SAS3008 PCI-Express "
        "Fusion-MPT SAS-3): ")
    assert "a NIC or NVMe drive" not in finding.message


def test_uncorrected_aer_on_a_device_without_lspci():
    """dmesg-aer-igb-uncorrected.txt (intel-wired-lan patch, 2024): igb 0000:09:00.0 behind root port 00:1c.5, one
    uncorrected non-fatal error; no lspci: the device is unknown to the run."""
    finding = _only(_aer((PCIE_POWER / "dmesg-aer-igb-uncorrected.txt").read_text(), _box_4090()))
    assert finding.message == (
        "1 uncorrected PCIe AER error(s) on device 0000:09:00.0, which is not a GPU this run knows; last: [  T292] "
        "pcieport 0000:00:1c.5: AER: Uncorrected (Non-Fatal) error received: 0000:09:00.0")
    assert (finding.observed, finding.expected) == ({"device": "0000:09:00.0", "errors": 1, "severity": "uncorrected"},
                                                    0)
    assert finding.fix == "Identify it with `lspci -s 0000:09:00.0`."


def test_old_kernel_requester_ids_name_the_port_that_reported():
    """dmesg-aer-tesla-oldformat.txt (wilicc/gpu-burn#1): `error received: id=0010` — requester id 0x0010 is bus 0x00,
    device 0x10 >> 3 = 2, function 0: the port 0000:00:02.0 itself, one corrected and one uncorrected (fatal) error;
    no lspci, so a GPU may sit below it."""
    log = (PCIE_POWER / "dmesg-aer-tesla-oldformat.txt").read_text()
    finding = _only(_aer(log, [GpuFacts(index=0, bus_id="0000:02:00.0", name="Tesla P100-PCIE-16GB")]))
    assert finding.message == (
        "2 PCIe AER error(s) (1 uncorrected, 1 corrected) on PCIe port 0000:00:02.0: a GPU may sit below it (this run "
        "has no lspci -vv to tell); last: [74889.542044] pcieport 0000:00:02.0: PCIe Bus Error: severity=Uncorrected "
        "(Fatal), type=Transaction Layer, id=0010(Receiver ID)")
    assert (finding.observed, finding.expected) == ({"port": "0000:00:02.0", "errors": 2, "severity": "uncorrected"}, 0)
    assert finding.fix == ("Add lspci-vv.txt (`sudo lspci -vv`) to see what sits below 0000:00:02.0; if a GPU does, "
                           "reseat it and its riser.")


def test_a_requester_id_with_a_function_number():
    """Requester id 0x0219: bus 0x02, devfn 0x19 = device 0x19 >> 3 = 3, function 0x19 & 7 = 1: 0000:02:03.1 (the
    old kernel format of the Tesla log, written for another source): one corrected error on an unknown device is a
    note only where a GPU has no bus id."""
    line = "[74785.660366] pcieport 0000:00:02.0: AER: Uncorrected (Non-Fatal) error received: id=0219\n"
    finding = _only(_aer(line, [GpuFacts(index=0, bus_id="0000:01:00.0")]))
    assert finding.observed == {"device": "0000:02:03.1", "errors": 1, "severity": "uncorrected"}
    corrected = line.replace("Uncorrected (Non-Fatal)", "Corrected")
    assert _only(_aer(corrected, [GpuFacts(index=0, bus_id="0000:01:00.0")])).status == Status.PASS
    unnamed = _only(_aer(corrected, [GpuFacts(index=0, bus_id=None)]))
    assert unnamed.status == Status.WARN
    assert unnamed.message.startswith("1 corrected PCIe AER error(s) on device 0000:02:03.1")
    assert unnamed.observed == {"device": "0000:02:03.1", "errors": 1, "severity": "corrected"}


def test_errors_on_a_gpu_itself():
    """A 4090 at 0000:01:00.0 logs one corrected error (root port headline and its own line count once) and, later,
    one uncorrected: both kinds are named, and an uncorrected error fails the GPU."""
    log = ("[  10.1] pcieport 0000:00:01.1: AER: Corrected error received: 0000:01:00.0\n"
           "[  10.2] nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
           "[  20.1] pcieport 0000:00:01.1: AER: Uncorrected (Non-Fatal) error received: 0000:01:00.0\n")
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA GeForce RTX 4090")
    corrected = _only(_aer(log.split("[  20.1]")[0], [gpu]))
    assert (corrected.status, corrected.observed) == (Status.WARN, 1)
    assert corrected.message == ("1 corrected PCIe AER error(s) on GPU0 (0000:01:00.0); last: [  10.2] nvidia "
                                 "0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)")
    both = _only(_aer(log, [gpu]))
    assert (both.status, both.observed, both.expected) == (Status.FAIL, 2, 0)
    assert both.message.startswith("2 PCIe AER error(s) (1 uncorrected, 1 corrected) on GPU0 (0000:01:00.0); last: "
                                   "[  20.1] pcieport")


def test_errors_on_a_gpu_lspci_shows_but_the_run_does_not_list():
    """The 4090 box with GPU7 (0000:e1:00.0) missing from the GPU list: lspci still shows an NVIDIA GPU there."""
    log = "[  10.1] pcieport 0000:e0:01.1: AER: Corrected error received: 0000:e1:00.0\n"
    finding = _only(_aer(log, _box_4090()[:7], LSPCI_4090.read_text()))
    assert (finding.status, finding.subject.gpu) == (Status.WARN, None)
    assert finding.message.startswith("1 corrected PCIe AER error(s) on NVIDIA GPU 0000:e1:00.0 (lspci; not in the GPU "
                                      "list); last: ")


def test_errors_on_a_switch_port_count_for_every_gpu_below_it():
    """The PLX box: upstream port 0000:af:00.0 reports a corrected error of its own; GPU6 (b1) and GPU7 (b2) sit below
    it: one warning for each, saying the port is shared; a bridge of unknown type (the hand-written PLX bridge of
    tests/test_pcie_acs_aer.py) is called a PCIe bridge."""
    log = "[  10.1] pcieport 0000:af:00.0: AER: Corrected error received: 0000:af:00.0\n"
    found = _aer(log, _l40s_box(), LSPCI_PLX.read_text())
    assert [(f.status, f.subject.gpu.index) for f in found] == [(Status.WARN, 6), (Status.WARN, 7)]
    assert found[0].message.startswith("1 corrected PCIe AER error(s) on Upstream Port 0000:af:00.0 above GPU6 "
                                       "(0000:b1:00.0)")
    assert "shared" in found[0].message and found[0].observed == {"port": "0000:af:00.0", "errors": 1}
    from test_pcie_acs_aer import LSPCI
    gpus = [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0") for i, bus in enumerate(("18", "19"))]
    bridge = _aer("[  10.1] pcieport 0000:17:00.0: AER: Corrected error received: 0000:17:00.0\n", gpus[:1], LSPCI)
    assert [f.subject.gpu.index if f.subject.gpu else None for f in bridge] == [0, None]
    assert bridge[0].message.startswith("1 corrected PCIe AER error(s) on PCIe bridge 0000:17:00.0 above GPU0 "
                                        "(0000:18:00.0)")
    assert bridge[1].message.startswith("1 corrected PCIe AER error(s) on PCIe bridge 0000:17:00.0 above NVIDIA GPU "
                                        "0000:19:00.0")


def test_a_long_last_line_is_cut_at_160_characters():
    """A journalctl-style line of 167 characters: the finding quotes its first 160."""
    line = ("Jan 21 10:11:12 gpu-node-017.example.internal kernel: pcieport 0000:00:02.0: PCIe Bus Error: "
            "severity=Uncorrected (Fatal), type=Transaction Layer, id=0010(Receiver ID)")
    assert len(line) == 167
    finding = _only(_aer(line + "\n", [GpuFacts(index=0, bus_id="0000:02:00.0")]))
    assert finding.message.endswith("; last: " + line[:160])


# ---------------------------------------------------------------------------------------------------- health.xid

XID_LOGS = PUBLIC / "xid"
"""Recorded kernel logs with Xids (tests/fixtures/public/README.md names each source)."""


def _health(log: str, *check_ids: str, gpus=None, uptime_s: float | None = None):
    from gpuready.facts.kernel_log import parse_kernel_log
    from gpuready.facts.types import HostFacts
    facts = Facts(gpus=gpus if gpus is not None else [GpuFacts(index=0, bus_id="0000:19:00.0")],
                  kernel_log=parse_kernel_log(log), host=HostFacts(uptime_s=uptime_s))
    return run_checks(facts, only=list(check_ids))


def test_the_recorded_dbe_chain_is_three_findings_with_their_cause():
    """xid48-63-94-dmesg.txt (leptonai/gpud, `dmesg --time-format iso`) on GPU0 0000:19:00.0: one Xid 48 (DBE,
    critical: fail), one Xid 63 (row remap, info: warn) and nine Xid 94 (contained, error: fail) lines; the 63 and
    94 follow from the 48; the wall clock of each last line says when."""
    found = _health((XID_LOGS / "xid48-63-94-dmesg.txt").read_text(), "health.xid")
    assert [(f.status, f.observed["xid"], f.observed["count"]) for f in found] == [
        (Status.FAIL, 48, 1), (Status.WARN, 63, 1), (Status.FAIL, 94, 9)]
    assert found[0].message.startswith(
        "Xid 48 ROBUST_CHANNEL_GPU_ECC_DBE on GPU0 (0000:19:00.0), 1×: Uncorrectable double-bit ECC error in GPU "
        "memory (last at 2024-11-15T12:02:03,470068+00:00; blame: GPU). Last: 2024-11-15T12:02:03,470068+00:00 NVRM: "
        "Xid (PCI:0000:19:00): 48, ")
    assert found[1].observed == {
        "xid": 63, "count": 1, "severity": "info", "blame": "GPU", "history": False, "outside_allocation": False,
        "why": "catalog severity info", "follows_from": "Xid 48", "last": "at 2024-11-15T12:02:03,498753+00:00",
        "last_age_s": None}
    assert "(last at 2024-11-15T12:02:03,638794+00:00; blame: GPU; it follows from Xid 48: the uncorrectable memory " \
           "error (Xid 48, DBE) causes the row remap, the containment and the recovery action). Last: " in found[2].message
    assert found[2].message.endswith("Last: 2024-11-15T12:02:03,638794+00:00 NVRM: Xid (PCI:0000:19:00): 94, "
                                     "pid=1248209, name=python3.10, Ch 0000000f")
    assert all((f.expected, f.refs[0][:18]) == ("no Xid", "NVIDIA Xid catalog") for f in found)


def test_an_application_xid_on_a_gpu_the_run_does_not_list_is_named_by_its_bus():
    """xid13-109-dmesg-ctime.txt (`dmesg --ctime`): three Xid 13 lines then one Xid 109 on 0000:cb:00.0, which is not
    the run's GPU: named by its bus id; 13 is the application's (warn, with the catalog's note), 109 (context-switch
    timeout, critical) fails."""
    found = _health((XID_LOGS / "xid13-109-dmesg-ctime.txt").read_text(), "health.xid")
    assert [(f.status, f.observed["xid"], f.observed["count"], f.subject.gpu) for f in found] == [
        (Status.WARN, 13, 3, None), (Status.FAIL, 109, 1, None)]
    assert found[0].message.startswith(
        "Xid 13 ROBUST_CHANNEL_GR_EXCEPTION on 0000:cb:00.0, 3×: Graphics/compute engine exception, usually an illegal "
        "memory access or other fault raised by the application's kernel (last at Fri Aug 30 11:43:09 2024; blame: "
        "application; the catalog blames the application: check the application first). Last: [Fri Aug 30 11:43:09 "
        "2024] NVRM: Xid (PCI:0000:cb:00): 13, ")
    assert found[0].observed["why"] == "the catalog blames the application: check the application first"
    assert found[1].observed["why"] == "catalog severity critical"


def test_findings_are_ordered_by_bus_then_xid_whatever_the_log_order():
    """The recorded 109 line before the recorded 13 line (cb:00), then the Xid 119 log of 9b:00 (xid119-dmesg.txt):
    sorted by bus id, then Xid number."""
    lines = (XID_LOGS / "xid13-109-dmesg-ctime.txt").read_text().splitlines()
    xid109 = next(line for line in lines if "): 109," in line)
    xid13 = next(line for line in lines if "): 13," in line)
    log = "\n".join([xid109, xid13]) + "\n" + (XID_LOGS / "xid119-dmesg.txt").read_text()
    found = _health(log, "health.xid")
    assert [(f.observed["xid"], f.message.split(" on ")[1].split(",")[0]) for f in found] == [
        (119, "0000:9b:00.0"), (13, "0000:cb:00.0"), (109, "0000:cb:00.0")]


@pytest.mark.parametrize("age_s, said", [(0.0, "0 s"), (59.4, "59 s"), (60.0, "1.0 min"), (3599.0, "60.0 min"),
                                         (3600.0, "1.0 h"), (86399.0, "24.0 h"), (86400.0, "1.0 d"),
                                         (172800.0, "2.0 d")])
def test_how_long_ago_the_last_line_was(age_s, said):
    """xid79-sxid-dmesg.txt's fallen-off-the-bus lines end at kernel time 6,781,741.548783 s: with an uptime that
    much later the finding says how long ago, in seconds below a minute, minutes below an hour, hours below a day."""
    uptime = 6781741.548783 + age_s
    finding = _health((XID_LOGS / "xid79-sxid-dmesg.txt").read_text(), "health.xid", uptime_s=uptime)[0]
    assert finding.observed["last"] == f"{said} ago (kernel time 6,781,742 s, uptime {uptime:,.0f} s)"
    assert finding.observed["last_age_s"] == round(age_s, 1)


def test_the_recorded_fallen_off_gpu_58_seconds_ago():
    """The same log read 6,781,800 s after boot: 6,781,800 − 6,781,741.548783 = 58.451217 s, 58.5 to a tenth; the
    Xid 79 line and the driver's 'GPU has fallen off the bus' line on 0000:91:00.0 are one GPU's Xid 79 (2 lines);
    a line stamped after the uptime (an older boot's) has no age."""
    finding = _health((XID_LOGS / "xid79-sxid-dmesg.txt").read_text(), "health.xid", uptime_s=6781800.0)[0]
    assert (finding.status, finding.observed["count"], finding.observed["last_age_s"]) == (Status.FAIL, 2, 58.5)
    assert finding.message == (
        "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS on 0000:91:00.0, 2×: The GPU has fallen off the PCIe bus: the "
        "driver can no longer talk to it (last 58 s ago (kernel time 6,781,742 s, uptime 6,781,800 s); blame: GPU). "
        "Last: [6781741.548783] NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.")
    for uptime in (6781741.0, None):  # an uptime below the stamp (the log of an older boot) gives no age either
        early = _health((XID_LOGS / "xid79-sxid-dmesg.txt").read_text(), "health.xid", uptime_s=uptime)[0]
        assert early.observed["last_age_s"] is None
        assert early.observed["last"] == "78.5 d after boot (uptime not in this run)"  # 6,781,741.5 s / 86,400


def test_a_clean_log_names_the_driver_load_it_covers(make_bundle):
    """The recorded H200 (tests/fixtures/h200-collect): `NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64
    580.159.04` at kernel time 0.6114 s, uptime 35.90 s (uptime.txt): loaded 35.90 − 0.61 = 35.29 s, '35 s', ago."""
    from conftest import FIXTURES
    finding = _only([f for f in report_for(FIXTURES / "h200-collect").findings if f.check_id == "health.xid"])
    assert finding.message == (
        "No Xid or fallen-off-the-bus messages in the kernel log (the kernel log since boot; NVIDIA driver 580.159.04 "
        "loaded 35 s ago (kernel time 1 s, uptime 36 s)); NVLink Xids are nvlink.errors'.")
    bare = _only(_health("[    1.0] Linux version 6.8.0\n", "health.xid"))
    assert bare.message == ("No Xid or fallen-off-the-bus messages in the kernel log (the kernel log since boot); NVLink "
                            "Xids are nvlink.errors'.")


# --------------------------------------------------------------------------------------------------- health.sxid

SXID_12028 = (Path(__file__).parent / "fixtures" / "boards" / "sxid12028-nonfatal-dmesg.txt").read_text()
"""`nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)`
(leptonai/gpud's SXid tests, tests/fixtures/boards/README.md)."""


def test_the_recorded_fatal_sxids_are_one_finding_per_switch_in_switch_order():
    """xid79-sxid-dmesg.txt: SXid 20034 on nvswitch1 (1 line, Fatal, link 48), nvswitch0 (4 lines, two Fatal, links
    63 and 62), nvswitch2 (3 lines, links 37); the 12028 line of nvswitch3 logged first: sorted 0, 1, 2, 3. A switch
    whose lines say Fatal fails; the non-fatal one warns; each observed holds count, fatal, status and links."""
    log = SXID_12028 + (XID_LOGS / "xid79-sxid-dmesg.txt").read_text()
    found = _health(log, "health.sxid")
    assert [(f.status, f.observed["switch"], f.observed["bus_id"]) for f in found] == [
        (Status.FAIL, 0, "0000:05:00.0"), (Status.FAIL, 1, "0000:06:00.0"), (Status.FAIL, 2, "0000:07:00.0"),
        (Status.WARN, 3, "0000:05:00.0")]
    assert found[0].observed == {"switch": 0, "bus_id": "0000:05:00.0", "history": False, "sxids": {
        "20034": {"count": 4, "fatal": True, "status": "fail", "links": [62, 63]}}}
    assert found[1].message == ("NVSwitch errors on NVSwitch 1 (0000:06:00.0): SXid 20034, 1 line(s) (fatal) on link(s) "
                                "48. Last: [6781753.400584] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, "
                                "Link 48 LTSSM Fault Up")
    assert found[3].observed["sxids"] == {"12028": {"count": 1, "fatal": False, "status": "warn", "links": [32]}}
    assert found[3].message.startswith("NVSwitch errors on NVSwitch 3 (0000:05:00.0): SXid 12028, 1 line(s) "
                                       "(non-fatal) on link(s) 32. Last: ")
    assert all(f.expected == "no SXid" for f in found)
    assert found[3].fix.startswith("Non-fatal: no immediate action")
    assert found[0].fix.startswith("Drain the node and reboot it (a fatal SXid needs the NVSwitch and its GPUs reset)")


def test_two_sxid_codes_on_one_switch_in_code_order_and_a_line_without_severity():
    """nvswitch0 with the recorded 20034 Fatal line and an 11004 line that names no severity and no link (written in the
    recorded lines' layout), the 11004 logged last: one finding, the parts in code order, the worst status."""
    log = ("[6781753.404587] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 63 LTSSM Fault Up\n"
           "[6781760.000001] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 11004, Ingress invalid ACL\n")
    finding = _only(_health(log, "health.sxid"))
    assert finding.status == Status.FAIL
    assert finding.message.startswith(
        "NVSwitch errors on NVSwitch 0 (0000:05:00.0): SXid 11004, 1 line(s) (severity not stated); SXid 20034, 1 "
        "line(s) (fatal) on link(s) 63. Last: [6781760.000001]")
    assert finding.observed["sxids"]["11004"] == {"count": 1, "fatal": False, "status": "warn", "links": []}


# --------------------------------------------------------------------------- health: ECC, retired pages, row remapping

ECC_XML = PUBLIC / "ecc-errors" / "nvidia-smi-q.xml"
"""Tesla V100-SXM3-32GB (microsoft/pai): volatile DBE 1, aggregate DBE 7627, 2 double-bit retired pages, pending
retirement Yes."""
A10_SMI = PUBLIC / "ecc-errors" / "nvidia-smi-q.txt"
"""NVIDIA A10 (leptonai/gpud): ECC counters 0, Remapped Rows Uncorrectable Error 4, Pending: Yes."""
REMAP_REF = ("NVIDIA GPU memory error management, row remapping: "
             "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html")


def test_the_recorded_v100_with_a_volatile_dbe_and_a_pending_retirement(make_bundle):
    """The V100 recording: 1 uncorrectable (double-bit) error since the driver loaded fails, with the lifetime 7,627
    as observed; 2 retired pages with a retirement pending warns (it applies at the next reset)."""
    files = {"nvidia-smi-q.xml": ECC_XML}
    ecc = _only(_findings(make_bundle, files, "health.ecc_uncorrected"))
    assert (ecc.status, ecc.observed, ecc.expected, ecc.refs) == (
        Status.FAIL, {"volatile": 1, "aggregate": 7627}, 0, ["Xid 48 / 94 / 95 / 140", "NVML ECC"])
    assert ecc.message == ("GPU0 has 1 uncorrectable ECC error(s) since the last driver load: results may be wrong and "
                           "jobs on it die.")
    retired = _only(_findings(make_bundle, files, "health.retired_pages"))
    assert (retired.status, retired.observed, retired.expected) == (
        Status.WARN, {"retired": 2, "pending": True}, "no pending retirement")
    assert retired.refs == [thresholds("retired_pages")["source"]]


def test_the_recorded_a10_with_a_pending_row_remap(make_bundle):
    """The A10 recording: Remapped Rows Pending: Yes fails (the faulty row stays in use until a reset); its 4 rows
    remapped after uncorrectable errors pass: remapping works."""
    files = {"nvidia-smi-q.txt": A10_SMI}
    pending = _only(_findings(make_bundle, files, "health.row_remap_pending"))
    assert (pending.status, pending.observed, pending.expected, pending.refs) == (
        Status.FAIL, "Pending: Yes", "No", [REMAP_REF])
    assert pending.fix == "Reset the GPU when idle (`sudo nvidia-smi -r -i 0`) or reboot."
    failure = _only(_findings(make_bundle, files, "health.row_remap_failure"))
    assert (failure.status, failure.observed) == (Status.PASS, {"uncorrectable_rows": 4})
    assert failure.message == "GPU0 has remapped 4 row(s) after uncorrectable errors; remapping works as designed."


@pytest.mark.parametrize("sbe, dbe, status, message", [
    (10, 4, Status.PASS, "Retired pages within limits on all 1 GPU(s)."),
    (10, 5, Status.WARN, "GPU0 has retired 15 pages (DCGM's soft limit is 15)."),
    (60, 2, Status.WARN, "GPU0 has retired 62 pages (DCGM's soft limit is 15)."),
    (60, 3, Status.FAIL, "GPU0 has retired 63 pages, at DCGM's limit of 63."),
])
def test_retired_pages_against_dcgms_limits(sbe, dbe, status, message):
    """NVIDIA DCGM (dcgm_gpu_hardware_limits.h): DCGM_LIMIT_MAX_RETIRED_PAGES 63, soft limit 15; single- and
    double-bit retirements count together: 14 passes, 15 and 62 warn, 63 fails."""
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", retired_pages_sbe=sbe, retired_pages_dbe=dbe,
                   retired_pages_pending=False)
    finding = _only(run_checks(Facts(gpus=[gpu]), only=["health.retired_pages"]))
    assert (finding.status, finding.message) == (status, message)
    if status != Status.PASS:
        limit = 63 if status == Status.FAIL else 15
        assert (finding.observed, finding.expected) == (sbe + dbe, f"< {limit}")


@pytest.mark.parametrize("volatile, aggregate, corrected, status, message", [
    (0, 3, None, Status.WARN, "GPU0 has 3 uncorrectable ECC error(s) in its lifetime (none since the last driver "
                              "load)."),
    (0, 0, 177, Status.PASS, "GPU0: 177 corrected ECC error(s) since boot, no uncorrectable ones (corrected errors are "
                             "handled by ECC; not a fault)."),
    (0, 0, 0, Status.PASS, "No uncorrectable ECC errors on any of 1 GPU(s)."),
])
def test_ecc_counters_lifetime_and_corrected(volatile, aggregate, corrected, status, message):
    """An uncorrectable error only in the lifetime count warns; corrected errors alone (177, as stas00's A100
    excerpt, tests/fixtures/public/ecc-errors/nvidia-smi-q-a100-excerpt.txt) are a noted pass."""
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", ecc_uncorrected_volatile=volatile,
                   ecc_uncorrected_aggregate=aggregate, ecc_corrected_volatile=corrected)
    finding = _only(run_checks(Facts(gpus=[gpu]), only=["health.ecc_uncorrected"]))
    assert (finding.status, finding.message) == (status, message)


def test_the_dbe_chain_in_the_kernel_log_stands_for_missing_counters():
    """xid48-63-94-dmesg.txt on GPU0 0000:19:00.0 with no ECC or row-remap counters in the run: Xid 48 ×1 and
    94 ×9 are uncorrectable errors since the driver load (fail); the Xid 63 marks a row remap with no reset after it
    (pending: fail); no Xid 64, so no remap failure."""
    found = _health((XID_LOGS / "xid48-63-94-dmesg.txt").read_text(), "health.ecc_uncorrected",
                    "health.row_remap_pending", "health.row_remap_failure")
    assert [(f.check_id, f.status) for f in found] == [
        ("health.ecc_uncorrected", Status.FAIL), ("health.row_remap_pending", Status.FAIL),
        ("health.row_remap_failure", Status.SKIP)]
    assert found[0].message == (
        "GPU0: the kernel log shows uncorrectable ECC errors (Xid 48 ×1, Xid 94 ×9, last at "
        "2024-11-15T12:02:03,638794+00:00) since the last driver load; the ECC counters are not in this run, so the "
        "evidence is the kernel log.")
    assert found[0].observed == {"kernel_log": "Xid 48 ×1, Xid 94 ×9, last at 2024-11-15T12:02:03,638794+00:00",
                                 "counters": None}
    assert found[0].refs[0].startswith("NVIDIA Xid catalog (48 DBE, 94/95 contained/uncontained ECC, 63 row remap, "
                                       "64 remap failure, 140 unrecovered ECC), https://docs.nvidia.com/deploy/xid-errors/")
    assert found[1].refs == [REMAP_REF, found[0].refs[0]]
    assert found[1].observed == {"kernel_log": "Xid 63 ×1, last at 2024-11-15T12:02:03,498753+00:00", "pending": None}


def test_a_driver_load_after_the_dbe_chain_makes_it_history():
    """The same log, then the module's banner (`NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15 …`, the
    layout kernel_log.py documents) a minute later: the ECC errors are history (warn), the row remap applied (pass),
    and health.xid's Xid 48 drops from fail to warn with the history note."""
    log = (XID_LOGS / "xid48-63-94-dmesg.txt").read_text() + (  # the recording ends without a newline
        "\n2024-11-15T12:03:10,000000+00:00 NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
        "22:23:56 UTC 2024\n")
    ecc, pending = _health(log, "health.ecc_uncorrected", "health.row_remap_pending")
    assert (ecc.status, pending.status) == (Status.WARN, Status.PASS)
    assert ecc.message.startswith("GPU0: the kernel log shows uncorrectable ECC errors (Xid 48 ×1, Xid 94 ×9, last at "
                                  "2024-11-15T12:02:03,638794+00:00) before the driver (re)load (NVIDIA 550.54.15) at "
                                  "2024-11-15T12:03:10,000000+00:00: history.")
    assert ecc.observed["history"] is True and pending.observed["history"] is True
    assert pending.message == ("GPU0: the row remap the kernel log marked (Xid 63 ×1, last at "
                               "2024-11-15T12:02:03,498753+00:00) was followed by the driver (re)load (NVIDIA 550.54.15) "
                               "at 2024-11-15T12:03:10,000000+00:00, which applies it.")
    xid48 = _health(log, "health.xid")[0]
    assert (xid48.status, xid48.observed["history"], xid48.observed["why"]) == (
        Status.WARN, True, "catalog severity critical; history: a later driver load or reset of this GPU came after it")


@pytest.mark.parametrize("replays, status, message", [
    (480, Status.PASS, "GPU0: 480 PCIe replays since boot (8.00/min), below 8/min: not a fault."),
    (481, Status.WARN, "GPU0 has 481 PCIe replays since boot (8.0/min on average): the link is retrying transfers."),
])
def test_pcie_replays_against_dcgms_rate(replays, status, message):
    """DCGM: '8 replays per minute is the maximum recommended by RM' (DCGM_LIMIT_MAX_PCIREPLAY_RATE). An hour of
    uptime (60 min): 480 replays = 8.0/min passes, 481 = 8.02/min warns."""
    from gpuready.facts.types import HostFacts
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", pcie_replay_count=replays)
    finding = _only(run_checks(Facts(gpus=[gpu], host=HostFacts(uptime_s=3600.0)), only=["health.pcie_replay"]))
    assert (finding.status, finding.message) == (status, message)
    if status == Status.WARN:
        assert (finding.observed, finding.expected) == ("8.0/min", "<= 8/min")
        assert finding.refs == [thresholds("pcie_replay")["source"]]


def test_a_corrupted_inforom_in_the_kernel_log_or_from_the_driver():
    """NVML's nvmlDeviceValidateInforom failing for GPU1 fails it; a kernel line 'infoROM is corrupted' with the
    GPUs' own validity unknown fails the run."""
    gpus = [GpuFacts(index=0, bus_id="0000:01:00.0", inforom_valid=True),
            GpuFacts(index=1, bus_id="0000:02:00.0", inforom_valid=False)]
    finding = _only(run_checks(Facts(gpus=gpus), only=["health.inforom"]))
    assert (finding.status, finding.subject.gpu.index, finding.observed, finding.expected, finding.refs) == (
        Status.FAIL, 1, "corrupted", "valid", ["NVML nvmlDeviceValidateInforom"])
    from gpuready.facts.kernel_log import parse_kernel_log
    log = parse_kernel_log("[   12.5] NVRM: GPU 0000:01:00.0: RmInitAdapter: infoROM is corrupted\n")
    unknown = [GpuFacts(index=0, bus_id="0000:01:00.0")]
    finding = _only(run_checks(Facts(gpus=unknown, kernel_log=log), only=["health.inforom"]))
    assert (finding.status, finding.message) == (Status.FAIL, "The kernel log reports a corrupted infoROM.")
    assert _only(run_checks(Facts(gpus=unknown, kernel_log=[]), only=["health.inforom"])).status == Status.SKIP


def test_more_than_four_root_ports_are_cut_after_four():
    """The hand-built 8x 4090 lspci (each GPU on its own CPU root port, all redirecting by design) with the GPUs at
    a1, c1 and e1 left out: five root ports above GPUs; the note names four and an ellipsis, observed lists all five."""
    from gpuready.facts.lspci import parse_lspci
    devices = [device for device in parse_lspci(LSPCI_4090.read_text())
               if device.address not in ("0000:a1:00.0", "0000:c1:00.0", "0000:e1:00.0")]
    finding = _only(_acs(_box_4090()[:5], devices, cmdline="BOOT_IMAGE=/vmlinuz iommu=pt"))
    assert finding.message == (
        "lspci shows no ACS redirection on PCIe switch ports between GPUs; IOMMU: kernel command line has iommu=pt. ACS "
        "redirection on CPU root port(s) 0000:00:01.1, 0000:20:03.1, 0000:40:01.1, 0000:60:01.1 … is by design (the "
        "kernel sets it with the IOMMU on) and does not slow GPU peer traffic, which crosses the root complex between "
        "root ports anyway.")
    assert finding.observed == {"root_ports_redirecting": ["0000:00:01.1", "0000:20:03.1", "0000:40:01.1",
                                                           "0000:60:01.1", "0000:80:01.1"]}


def test_a_port_that_names_itself_as_the_source_is_a_port():
    """The first line of dmesg-aer-returnn-fatal.txt alone: root port 0000:00:03.0 says `Multiple Uncorrected (Fatal)
    error received: 0000:00:03.0`, itself: with no lspci it is a port a GPU may sit below."""
    line = next(line for line in (PCIE_POWER / "dmesg-aer-returnn-fatal.txt").read_text().splitlines()
                if "error received" in line)
    finding = _only(_aer(line + "\n", [GpuFacts(index=0, bus_id="0000:03:00.0")]))
    assert finding.observed == {"port": "0000:00:03.0", "errors": 1, "severity": "uncorrected"}


def test_a_device_printing_its_own_bus_error_is_not_a_port():
    """dmesg-aer-nvme-uncorrected.txt without lspci: the drive's own `nvme 0000:42:00.0: … PCIe Bus Error` line is the
    device's, not a port's (only `pcieport` prints a port's): an unknown device, not a port a GPU may sit below."""
    finding = _only(_aer((PCIE_POWER / "dmesg-aer-nvme-uncorrected.txt").read_text(), _box_4090()))
    assert finding.message.startswith("1 uncorrected PCIe AER error(s) on device 0000:42:00.0, which is not a GPU "
                                      "this run knows; last: ")


def test_every_source_of_errors_is_reported():
    """The NVMe drive's uncorrected error (42:00.0, in the lspci) and, in the same log, one corrected error on GPU4
    (0000:81:00.0) and one on GPU0 (0000:01:00.0): three findings, by address."""
    log = ("[  10.1] pcieport 0000:00:01.1: AER: Corrected error received: 0000:01:00.0\n"
           + (PCIE_POWER / "dmesg-aer-nvme-uncorrected.txt").read_text()
           + "\n[ 9100.1] pcieport 0000:80:01.1: AER: Corrected error received: 0000:81:00.0\n")
    found = _aer(log, _box_4090(), LSPCI_4090.read_text())
    assert [(f.status, f.subject.gpu.index if f.subject.gpu else f.observed["device"]) for f in found] == [
        (Status.WARN, 0), (Status.WARN, "0000:42:00.0"), (Status.WARN, 4)]


def test_a_long_product_name_is_cut_at_80_characters():
    """The drive of the 4090 lspci renamed to an 84-character product: its first 80 characters are quoted."""
    product = "Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Storage Port 2"
    assert len(product) == 84
    lspci = LSPCI_4090.read_text().replace(
        "Samsung Electronics Co Ltd NVMe SSD Controller PM173X (prog-if 02 [NVM Express])", product)
    finding = _only(_aer((PCIE_POWER / "dmesg-aer-nvme-uncorrected.txt").read_text(), _box_4090(), lspci))
    assert f"0000:42:00.0 ({product[:80]}): a NIC or NVMe drive" in finding.message


def test_cuda_stopping_a_job_on_an_uncorrectable_ecc_error_fails_whatever_the_counters():
    """kohya-ss/sd-scripts#1434 (tests/fixtures/cases/uncorrectable-ecc-2xh100-kohya-1434/train.log): two lines say
    `CUDA error: uncorrectable ECC error encountered` (the rank and its NCCL watchdog): a fail quoting the last one,
    even with clean counters."""
    log = (Path(__file__).parent / "fixtures" / "cases" / "uncorrectable-ecc-2xh100-kohya-1434" / "train.log").read_text()
    lines = [line for line in log.splitlines() if "uncorrectable ECC error encountered" in line]
    assert len(lines) == 2
    clean = GpuFacts(index=0, bus_id="0000:19:00.0", ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0)
    finding = _only(_health(log, "health.ecc_uncorrected", gpus=[clean]))
    assert (finding.status, finding.observed, finding.expected) == (Status.FAIL, lines[1][:200],
                                                                    "no uncorrectable ECC error")
    assert finding.message.startswith("CUDA stopped a job with 'uncorrectable ECC error encountered' (2 line(s)): ")
    assert finding.refs[0].startswith("NVIDIA Xid catalog (48 DBE, 94/95")


def test_an_uncontained_memory_error_alone_stands_for_missing_counters():
    """One Xid 95 line (uncontained ECC; no public log has one, so it is written in the layout of the recorded Xid 94
    line of xid48-63-94-dmesg.txt) on GPU0 without counters: an uncorrectable error since the driver load."""
    log = ("2024-11-15T12:02:03,638794+00:00 NVRM: Xid (PCI:0000:19:00): 95, pid=1248209, name=python3.10, "
           "Uncontained: FBHUB. RST: Yes, D-RST: No\n")
    finding = _only(_health(log, "health.ecc_uncorrected"))
    assert (finding.status, finding.observed) == (Status.FAIL, {
        "kernel_log": "Xid 95 ×1, last at 2024-11-15T12:02:03,638794+00:00", "counters": None})
    assert finding.expected == "no uncorrectable error"


XID63_LINE = ("NVRM: Xid (PCI:0000:19:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x00000012bac1c3e0) "
              "marked for remapping, reset gpu to activate.")
"""The Xid 63 line of xid48-63-94-dmesg.txt without its wall clock (given a kernel stamp where a test needs one)."""
XID64_LINE = ("NVRM: Xid (PCI:0000:19:00): 64, pid='<unknown>', name=<unknown>, Row Remapper Error: failed to remap row "
              "0x00000012bac1c3e0")
"""An Xid 64 (remap failure) in the recorded Xid lines' layout: no public log has one (tests/fixtures/public/README.md)."""


def test_row_remap_evidence_in_the_kernel_log_says_when():
    """The Xid 63 line stamped 6,781,741.5 s after boot, read at an uptime of 6,781,800 s: pending, last 58 s ago
    (58.5 s); an Xid 64 likewise: a failed remap, which no later reset undoes."""
    pending = _only(_health(f"[6781741.500000] {XID63_LINE}\n", "health.row_remap_pending", uptime_s=6781800.0))
    assert (pending.status, pending.expected) == (Status.FAIL, "No")
    assert pending.observed == {"kernel_log": "Xid 63 ×1, last 58 s ago (kernel time 6,781,742 s, uptime 6,781,800 s)",
                                "pending": None}
    log = f"[6781741.500000] {XID64_LINE}\n"
    failed = _only(_health(log, "health.row_remap_failure", uptime_s=6781800.0))
    assert (failed.status, failed.expected) == (Status.FAIL, "no Xid 64")
    assert failed.observed == {"kernel_log": "Xid 64 ×1, last 58 s ago (kernel time 6,781,742 s, uptime 6,781,800 s)",
                               "failure": None}
    assert failed.refs == [REMAP_REF, pending.refs[1]]
    reloaded = log + "[6781790.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n"
    assert _only(_health(reloaded, "health.row_remap_failure", uptime_s=6781800.0)).status == Status.FAIL


def test_remap_counters_outrank_the_kernel_log():
    """A GPU whose row remapper reports no failure is not failed by an Xid 64 line; one that reports a failure fails
    whatever the log says."""
    log = f"[6781741.500000] {XID64_LINE}\n"
    fine = GpuFacts(index=0, bus_id="0000:19:00.0", remap_failure=False, remap_pending=False)
    assert _only(_health(log, "health.row_remap_failure", gpus=[fine])).status == Status.PASS
    broken = GpuFacts(index=0, bus_id="0000:19:00.0", remap_failure=True, remap_pending=False)
    finding = _only(_health("", "health.row_remap_failure", gpus=[broken]))
    assert (finding.status, finding.observed, finding.expected, finding.refs) == (
        Status.FAIL, "Remapping Failure Occurred: Yes", "No", [REMAP_REF])
    assert finding.message == "GPU0 failed to remap a memory row: it has run out of spare rows."


def test_a_gpu_reporting_only_double_bit_retirements_is_judged():
    """A pre-Ampere GPU that reports 20 double-bit retired pages and no single-bit figure, beside an Ampere GPU that
    remaps rows: the 20 are above DCGM's soft limit of 15: a warning, not 'page retirement not used'."""
    gpus = [GpuFacts(index=0, bus_id="0000:01:00.0", retired_pages_dbe=20),
            GpuFacts(index=1, bus_id="0000:02:00.0", remap_pending=False)]
    finding = _only(run_checks(Facts(gpus=gpus), only=["health.retired_pages"]))
    assert (finding.status, finding.message) == (Status.WARN, "GPU0 has retired 20 pages (DCGM's soft limit is 15).")


def test_a_gpu_fallen_off_the_bus_without_an_address_is_an_unnamed_gpu():
    """A driver line that says the GPU 'has fallen off the bus' without naming it (the generic form the kernel-log
    reader accepts): Xid 79 on an unnamed GPU, not lowered as another container's (nothing names it)."""
    finding = _only(_health("[   49.261458] NVRM: RmInitAdapter failed: the GPU has fallen off the bus.\n", "health.xid"))
    assert (finding.status, finding.observed["outside_allocation"]) == (Status.FAIL, False)
    assert finding.message.startswith("Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS on an unnamed GPU, 1×: ")


def test_the_quoted_line_is_cut_at_200_characters_and_a_wall_clock_line_has_no_age():
    """xid13-43-dmesg.txt (`dmesg -x --time-format iso`) ends with a 13 line longer than 200 characters: the finding
    quotes its first 200. The log's times are wall clocks, so an uptime gives no age."""
    log = (XID_LOGS / "xid13-43-dmesg.txt").read_text()
    last = [line for line in log.splitlines() if "): 13," in line][-1]
    assert len(last) > 200
    finding = _health(log, "health.xid", uptime_s=1000.0)[0]
    assert finding.message.endswith(f"Last: {last[:200]}")
    assert finding.observed["last_age_s"] is None
    dbe = _health((XID_LOGS / "xid48-63-94-dmesg.txt").read_text(), "health.xid", uptime_s=1000.0)[0]
    assert (dbe.observed["last"], dbe.observed["last_age_s"]) == ("at 2024-11-15T12:02:03,470068+00:00", None)
