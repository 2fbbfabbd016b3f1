"""PCIe and power checks judged right on every machine class: root-port vs switch ACS, BAR1 as shipped,
AER on the port above a GPU vs on a NIC/NVMe, the platform power brake, and the power budget of known
platforms. Inputs: tests/fixtures/pcie-power/ (sources in its README)."""

import re

import pytest

from conftest import FIXTURES, PUBLIC
from helpers import messages, report_for, statuses
from gpuready.checks.registry import CheckOptions, run_checks
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.lspci import parse_lspci
from gpuready.facts.types import Facts, GpuFacts
from gpuready.knowledge import gpu_spec, load_table, platform_spec

HERE = FIXTURES / "pcie-power"
LSPCI_4090 = HERE / "lspci-vv-8x4090-rootports.txt"
LSPCI_PLX = HERE / "lspci-vv-8xl40s-plx.txt"
SMI_4090 = PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-q-8x4090.txt"
MIB, GIB = 2**20, 2**30


def _found(facts: Facts, check_id: str, **options):
    return [f for f in run_checks(facts, CheckOptions(**options)) if f.check_id == check_id]


def _l40s_box() -> list[GpuFacts]:
    buses = ("19", "1a", "3d", "3e", "88", "89", "b1", "b2")
    return [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA L40S") for i, bus in enumerate(buses)]


def _4090_box() -> list[GpuFacts]:
    buses = ("01", "23", "41", "61", "81", "a1", "c1", "e1")
    return [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA GeForce RTX 4090") for i, bus in enumerate(buses)]


# ------------------------------------------------------------------------------------ lspci facts

def test_lspci_port_types_and_switch_structure():
    devices = {d.address: d for d in parse_lspci(LSPCI_PLX.read_text())}
    assert devices["0000:16:00.0"].port_type == "Root Port" and devices["0000:16:00.0"].is_root_port
    assert devices["0000:af:00.0"].port_type == "Upstream Port"
    assert devices["0000:b0:08.0"].port_type == "Downstream Port"
    assert devices["0000:b1:00.0"].port_type == "Legacy Endpoint" and devices["0000:b1:00.0"].is_nvidia_gpu
    assert devices["0000:b0:08.0"].acs_enabled == ["ReqRedir", "CmpltRedir"]
    assert devices["0000:18:08.0"].acs_enabled == []
    # the tree the bus ranges draw, read by the checks as facts
    assert devices["0000:b0:10.0"].switch_upstream == "0000:af:00.0"
    assert devices["0000:af:00.0"].switch_upstream is None  # only a downstream port has one
    assert devices["0000:af:00.0"].gpus_below == ["0000:b1:00.0", "0000:b2:00.0"]
    assert devices["0000:b0:10.0"].gpus_below == ["0000:b2:00.0"] and devices["0000:b1:00.0"].gpus_below == []
    assert devices["0000:b1:00.0"].device_class == "3D controller"
    assert devices["0000:af:00.0"].device_class == "PCI bridge"
    assert (devices["0000:af:00.0"].secondary_bus, devices["0000:af:00.0"].subordinate_bus) == (0xb0, 0xb2)
    # Newer lspci prints ", IntMsgNum 0" instead of ", MSI 00".
    newer = parse_lspci("00:01.1 PCI bridge: AMD GPP Bridge\n\tCapabilities: [58] Express (v2) Root Port (Slot+), IntMsgNum 0\n")
    assert newer[0].port_type == "Root Port"


# -------------------------------------------------------------------------------------------- ACS

def test_two_socket_server_with_acs_on_root_ports_only_passes(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": SMI_4090, "lspci-vv.txt": LSPCI_4090}))
    assert statuses(report, "pcie.acs_iommu") == ["pass"]
    text = messages(report, "pcie.acs_iommu")
    assert "CPU root port(s) 0000:00:01.1, 0000:20:03.1, 0000:40:01.1, 0000:60:01.1 …" in text and "by design" in text


def test_switch_downstream_ports_redirecting_above_two_gpus_warn_naming_them():
    facts = Facts(gpus=_l40s_box(), pci_devices=parse_lspci(LSPCI_PLX.read_text()))
    found = _found(facts, "pcie.acs_iommu")
    assert [f.status.value for f in found] == ["warn"]
    assert found[0].observed == {"switch": "0000:af:00.0",
                                 "ports": {"0000:b0:08.0": ["ReqRedir", "CmpltRedir"],
                                           "0000:b0:10.0": ["ReqRedir", "CmpltRedir"]},
                                 "gpus": ["GPU6 (0000:b1:00.0)", "GPU7 (0000:b2:00.0)"]}
    assert "GPU6 (0000:b1:00.0), GPU7 (0000:b2:00.0)" in found[0].message and "GPU0" not in found[0].message
    assert "root port" in found[0].message  # the root ports' redirection is noted as by design


def test_switch_with_acs_off_or_one_gpu_passes():
    devices = parse_lspci(LSPCI_PLX.read_text())
    for device in devices:
        if device.port_type == "Downstream Port":
            device.acs_enabled = []
    assert [f.status.value for f in _found(Facts(gpus=_l40s_box(), pci_devices=devices), "pcie.acs_iommu")] == ["pass"]
    one_gpu_below = [d for d in parse_lspci(LSPCI_PLX.read_text()) if d.address != "0000:b2:00.0"]
    gpus = _l40s_box()[:7]
    assert [f.status.value for f in _found(Facts(gpus=gpus, pci_devices=one_gpu_below), "pcie.acs_iommu")] == ["pass"]


def test_gpu_known_only_by_index_does_not_break_acs():
    gpus = _l40s_box()
    gpus[6].bus_id = None
    found = _found(Facts(gpus=gpus, pci_devices=parse_lspci(LSPCI_PLX.read_text())), "pcie.acs_iommu")
    assert [f.status.value for f in found] == ["warn"]
    assert found[0].observed["gpus"] == ["0000:b1:00.0", "GPU7 (0000:b2:00.0)"]


# ------------------------------------------------------------------------------------------- BAR1

@pytest.mark.parametrize("name, vram_mib, bar1_mib, expected, words", [
    ("Tesla T4", 15360, 256, "pass", "limited"),
    ("NVIDIA GeForce RTX 4090", 24564, 256, "pass", "ship with"),
    ("NVIDIA GeForce RTX 4090", 24564, 32768, "pass", "is as shipped or covers the VRAM"),  # Resizable BAR on
    ("NVIDIA H100 PCIe", 81559, 256, "warn", "Above 4G"),          # no sourced shipped size: VRAM rule
    ("NVIDIA H100 80GB HBM3", 81559, 256, "warn", "ships with 131,072 MiB"),
    ("NVIDIA H100 80GB HBM3", 81559, 131072, "pass", "is as shipped or covers the VRAM"),
    ("NVIDIA L40S", 46068, 32768, "warn", "ships with 65,536 MiB"),
    ("NVIDIA Unknown Board", 16384, 256, "warn", "shipped BAR1 unknown"),
])
def test_bar1_is_judged_by_what_the_gpu_ships_with(name, vram_mib, bar1_mib, expected, words):
    gpu = GpuFacts(index=0, bus_id="0000:01:00.0", name=name, memory_total_bytes=vram_mib * MIB,
                   bar1_total_bytes=bar1_mib * MIB)
    found = _found(Facts(gpus=[gpu]), "pcie.bar1")
    assert [f.status.value for f in found] == [expected]
    text = found[0].message + str(found[0].expected)
    assert words in text, text


def test_bar1_of_a_real_8x4090_box_is_one_pass_by_design(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": SMI_4090}))
    assert statuses(report, "pcie.bar1") == ["pass"]
    assert "GPU7 (0000:e1:00.0) RTX 4090" in messages(report, "pcie.bar1")


# -------------------------------------------------------------------------------------------- AER

def _aer(log: str, gpus, lspci: str | None = None):
    return _found(Facts(gpus=gpus, kernel_log=parse_kernel_log(log),
                        pci_devices=parse_lspci(lspci) if lspci is not None else None), "pcie.aer")


def test_corrected_aer_on_the_root_port_above_a_gpu_warns_for_that_gpu():
    found = _aer((HERE / "dmesg-aer-rootport-above-gpu.txt").read_text(), _4090_box(), LSPCI_4090.read_text())
    assert [f.status.value for f in found] == ["warn"]
    assert found[0].subject.gpu.bus_id == "0000:41:00.0" and found[0].subject.gpu.index == 2
    assert found[0].observed == {"port": "0000:40:01.1", "errors": 2}
    assert "Root Port 0000:40:01.1 above GPU2 (0000:41:00.0)" in found[0].message


def test_uncorrected_aer_on_an_nvme_is_not_a_gpu_fail():
    found = _aer((HERE / "dmesg-aer-nvme-uncorrected.txt").read_text(), _4090_box(), LSPCI_4090.read_text())
    assert [f.status.value for f in found] == ["warn"]
    assert found[0].subject.gpu is None
    assert found[0].observed == {"device": "0000:42:00.0", "class": "Non-Volatile memory controller", "errors": 1}
    assert "not a GPU fault" in found[0].message


def test_both_logs_together():
    log = (HERE / "dmesg-aer-rootport-above-gpu.txt").read_text() + (HERE / "dmesg-aer-nvme-uncorrected.txt").read_text()
    found = _aer(log, _4090_box(), LSPCI_4090.read_text())
    assert [(f.status.value, f.subject.gpu.index if f.subject.gpu else None) for f in found] == [("warn", 2), ("warn", None)]


def test_uncorrected_aer_on_a_nic_without_lspci_is_a_warn_about_the_nic():
    found = _aer((HERE / "dmesg-aer-igb-uncorrected.txt").read_text(), _4090_box())
    assert [f.status.value for f in found] == ["warn"]
    assert found[0].subject.gpu is None and found[0].observed["device"] == "0000:09:00.0"


def test_old_format_port_errors_name_the_port_without_lspci_and_fail_the_gpu_with_it():
    log = (HERE / "dmesg-aer-tesla-oldformat.txt").read_text()
    gpus = [GpuFacts(index=0, bus_id="0000:02:00.0", name="Tesla P100-PCIE-16GB")]
    found = _aer(log, gpus)
    assert [f.status.value for f in found] == ["warn"]
    assert "PCIe port 0000:00:02.0: a GPU may sit below it" in found[0].message
    assert found[0].observed == {"port": "0000:00:02.0", "errors": 2, "severity": "uncorrected"}
    lspci = ("00:02.0 PCI bridge: Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Root Port 2 (rev 01) (prog-if 00 [Normal decode])\n"
             "\tBus: primary=00, secondary=02, subordinate=02, sec-latency=0\n"
             "\tCapabilities: [90] Express (v2) Root Port (Slot+), MSI 00\n\n"
             "02:00.0 3D controller: NVIDIA Corporation GP100GL [Tesla P100 PCIe 16GB] (rev a1)\n"
             "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n")
    found = _aer(log, gpus, lspci)
    assert [f.status.value for f in found] == ["fail"] and found[0].subject.gpu.index == 0


def test_fatal_error_reported_by_the_port_itself():
    found = _aer((HERE / "dmesg-aer-returnn-fatal.txt").read_text(), [GpuFacts(index=0, bus_id="0000:03:00.0")])
    assert [f.status.value for f in found] == ["warn"]
    assert found[0].observed == {"port": "0000:00:03.0", "errors": 1, "severity": "uncorrected"}


def test_corrected_errors_under_a_port_without_gpus_pass_with_lspci():
    log = (HERE / "dmesg-aer-nvme-corrected-popos.txt").read_text()
    gpus = [GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA GeForce GTX 1060")]
    assert [f.status.value for f in _aer(log, gpus)] == ["warn"]  # no lspci: port 00:1d.0 may hold a GPU
    lspci = ("00:01.0 PCI bridge: Intel Corporation 6th-10th Gen Core Processor PCIe Controller (x16) (rev 0d) (prog-if 00 [Normal decode])\n"
             "\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\n"
             "\tCapabilities: [a0] Express (v2) Root Port (Slot+), MSI 00\n\n"
             "00:1d.0 PCI bridge: Intel Corporation Cannon Lake PCH PCI Express Root Port #9 (rev f0) (prog-if 00 [Normal decode])\n"
             "\tBus: primary=00, secondary=03, subordinate=03, sec-latency=0\n"
             "\tCapabilities: [40] Express (v2) Root Port (Slot+), MSI 00\n\n"
             "01:00.0 VGA compatible controller: NVIDIA Corporation GP106M [GeForce GTX 1060 Mobile] (rev a1) (prog-if 00 [VGA controller])\n\n"
             "03:00.0 Non-Volatile memory controller: Samsung Electronics Co Ltd NVMe SSD Controller SM981/PM981/PM983 (prog-if 02 [NVM Express])\n")
    assert [f.status.value for f in _aer(log, gpus, lspci)] == ["pass"]


def test_port_and_gpu_lines_of_one_error_count_once():
    log = ("[  10.1] pcieport 0000:00:01.1: AER: Corrected error received: 0000:01:00.0\n"
           "[  10.2] nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n"
           "[  10.3] nvidia 0000:01:00.0:   device [10de:2684] error status/mask=00000001/0000a000\n")
    found = _aer(log, [GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA GeForce RTX 4090")])
    assert [(f.status.value, f.observed) for f in found] == [("warn", 1)]
    uncorrected = log.replace("Corrected error received", "Uncorrected (Non-Fatal) error received")
    assert [f.status.value for f in _aer(uncorrected, [GpuFacts(index=0, bus_id="0000:01:00.0")])] == ["fail"]


# ------------------------------------------------------------------------------------ power brake

def test_power_brake_fails_power_brake_and_not_thermal(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": HERE / "nvidia-smi-q-perf-h200-brake.txt"}))
    assert statuses(report, "power.brake") == ["fail"]
    assert "the chassis is braking the GPU" in messages(report, "power.brake")
    assert "PSU redundancy" in messages(report, "power.brake")
    assert statuses(report, "thermal.current") == ["pass"]
    assert "judged by power.brake" in messages(report, "thermal.current")


def test_idle_capture_has_no_brake_and_hw_thermal_stays_thermal(make_bundle):
    report = report_for(make_bundle({"nvidia-smi-q.txt": HERE / "nvidia-smi-q-perf-h200.txt"}))
    assert statuses(report, "power.brake") == ["pass"] and statuses(report, "thermal.current") == ["pass"]
    report = report_for(make_bundle({"nvidia-smi-q.txt": HERE / "nvidia-smi-q-perf-h200-hwthermal.txt"}))
    assert statuses(report, "thermal.current") == ["fail"] and statuses(report, "power.brake") == ["pass"]
    assert "hw_thermal_slowdown" in messages(report, "thermal.current")


# ----------------------------------------------------------------------------------- power budget

def test_dgx_h100_budget_uses_the_published_10_2_kw(make_bundle):
    bundle = make_bundle({"nvidia-smi-q.txt": PUBLIC / "dgx-h100-nvswitch" / "nvidia-smi-q.txt"})
    report = report_for(bundle, psu_watts=12000)
    found = [f for f in report.findings if f.check_id == "power.budget"]
    assert [f.status.value for f in found] == ["pass"]
    assert found[0].observed["full_load_w"] == 10200
    assert found[0].observed["basis"] == "published maximum of the NVIDIA DGX H100 / H200 (8x H100 SXM)"
    assert "10,200 W" in found[0].message
    assert statuses(report_for(bundle, psu_watts=9000), "power.budget") == ["fail"]


def test_unknown_platform_allowance_scales_with_the_gpu_count():
    def total(count: int, name: str = "NVIDIA L40S") -> int:
        gpus = [GpuFacts(index=i, bus_id=f"0000:{i + 1:02x}:00.0", name=name, power_limit_w=350) for i in range(count)]
        found = _found(Facts(gpus=gpus), "power.budget")
        assert [f.status.value for f in found] == ["pass"] and "8 GPU(s)" not in found[0].observed["basis"]
        return found[0].observed["full_load_w"]
    assert total(8) - total(4) == 4 * (350 + 100)
    assert total(8) == 8 * 350 + 350 + 8 * 100 + 200
    assert total(7, "NVIDIA H100 80GB HBM3") == 7 * 350 + 350 + 7 * 100 + 200  # 7x H100 SXM is no known platform


def test_platform_table_rows_name_known_gpu_models():
    models = {row["model"] for row in load_table("gpus")["gpu"]}
    for row in load_table("platforms")["platform"]:
        assert set(row["gpu_models"]) <= models and row["source"] and row["max_power_w"] > 0
    assert platform_spec(gpu_spec("NVIDIA A100-SXM4-80GB").model, 8)["max_power_w"] == 6500
    assert platform_spec(gpu_spec("NVIDIA B200").model, 8)["max_power_w"] == 14300
    assert platform_spec(gpu_spec("NVIDIA H200").model, 4) is None


def test_every_fixture_is_listed_with_its_source():
    readme = (HERE / "README.md").read_text()
    for path in HERE.iterdir():
        if path.name != "README.md":
            assert f"`{path.name}`" in readme, path.name


def test_aer_above_a_gpu_outside_the_pod_is_a_note_not_a_fail():
    """The Tesla P100 capture's uncorrected port errors, seen from a pod that was given another GPU."""
    log = (HERE / "dmesg-aer-tesla-oldformat.txt").read_text()
    lspci = ("00:02.0 PCI bridge: Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Root Port 2 (rev 01) (prog-if 00 [Normal decode])\n"
             "\tBus: primary=00, secondary=02, subordinate=02, sec-latency=0\n"
             "\tCapabilities: [90] Express (v2) Root Port (Slot+), MSI 00\n\n"
             "02:00.0 3D controller: NVIDIA Corporation GP100GL [Tesla P100 PCIe 16GB] (rev a1)\n"
             "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n")
    pod_gpu = [GpuFacts(index=0, bus_id="0000:81:00.0", name="Tesla P100-PCIE-16GB", source="nvidia-smi.txt")]
    facts = Facts(gpus=pod_gpu, kernel_log=parse_kernel_log(log), pci_devices=parse_lspci(lspci),
                  env={"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    found = _found(facts, "pcie.aer")
    assert [f.status.value for f in found] == ["warn"]
    assert "not allocated to this container" in found[0].message and "0000:02:00.0" in found[0].message


# ------------------------------------------------------------------------------------ power cap from a plain table

def test_plain_table_cap_far_below_the_reference_board_power_warns(make_bundle):
    """A plain `nvidia-smi` table prints the enforced cap (`Pwr:Usage/Cap`), not the default: thamada/nvidia-smi's
    8x RTX 4090 table (tests/fixtures/public/pcie-8gpu-2socket) at its 450 W is no finding; the same table with one
    GPU capped at 300 W (the row as nvidia-smi formats it) is a power.limit warning for that GPU only."""
    table = (PUBLIC / "pcie-8gpu-2socket" / "nvidia-smi-8x4090.txt").read_text()
    report = report_for(make_bundle({"nvidia-smi.txt": table}))
    assert "warn" not in statuses(report, "power.limit")
    capped = table.replace("20W /  450W", "20W /  300W", 1)
    found = [f for f in report_for(make_bundle({"nvidia-smi.txt": capped})).findings if f.check_id == "power.limit"]
    warned = [f for f in found if f.status.value == "warn"]
    assert len(warned) == 1 and warned[0].subject.gpu.index == 0 and "450 W" in warned[0].message
    assert warned[0].message_id == "power.limit.below_reference"


def test_a_clocks_event_reasons_block_pasted_alone_is_judged(make_bundle):
    """The `Clocks Event Reasons` block of the power-brake capture (tests/fixtures/pcie-power, lines 11-20, as `-q`
    indents it under a GPU) pasted without its GPU header: a GPU's brake is still a power.brake failure, and thermal
    stays out of it; the same block with the brake Not Active is no failure."""
    lines = (HERE / "nvidia-smi-q-perf-h200-brake.txt").read_text().splitlines()
    block = "\n".join(lines[10:20]) + "\n"
    assert block.lstrip().startswith("Clocks Event Reasons")
    report = report_for(make_bundle({"nvidia-smi-q.txt": block}))
    assert statuses(report, "power.brake") == ["fail"]
    assert "header is not in this input" in messages(report, "power.brake")
    assert "fail" not in statuses(report, "thermal.current")
    calm = re.sub(r"(HW Power Brake Slowdown\s+: )Active", r"\1Not Active", block)
    assert calm != block
    assert "fail" not in statuses(report_for(make_bundle({"nvidia-smi-q.txt": calm})), "power.brake")


def test_a_thermal_clocks_event_reasons_block_pasted_alone_is_thermal(make_bundle):
    """The `Clocks Event Reasons` block of the HW-thermal capture (tests/fixtures/pcie-power) without its GPU header:
    thermal.current fails for 'a GPU', power.brake does not."""
    lines = (HERE / "nvidia-smi-q-perf-h200-hwthermal.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "Clocks Event Reasons")
    block = "\n".join(lines[start:start + 10]) + "\n"
    report = report_for(make_bundle({"nvidia-smi-q.txt": block}))
    assert statuses(report, "thermal.current") == ["fail"]
    assert "hw_thermal_slowdown" in messages(report, "thermal.current")
    assert "fail" not in statuses(report, "power.brake")


def test_a_clocks_event_reasons_block_moved_to_the_margin_is_still_a_gpu_section(make_bundle):
    """People paste a `-q` section with its indentation removed (the power-brake block of tests/fixtures/pcie-power,
    dedented by the 4 columns `-q` puts under `GPU …`): still a GPU's section, judged; a GPU header after it opens a
    GPU of its own; text at the margin that is no GPU section stays unread."""
    lines = (HERE / "nvidia-smi-q-perf-h200-brake.txt").read_text().splitlines()
    block = "\n".join(line[4:] for line in lines[10:20]) + "\n"
    assert block.startswith("Clocks Event Reasons")
    report = report_for(make_bundle({"nvidia-smi-q.txt": block}))
    assert statuses(report, "power.brake") == ["fail"]
    with_header = block + "\nGPU 00000000:1E:00.0\n    Product Name                    : Tesla V100-SXM2-32GB\n"
    report = report_for(make_bundle({"nvidia-smi-q.txt": with_header}))
    assert statuses(report, "power.brake") == ["fail"] and statuses(report, "gpu.present") == ["pass"]
    from gpuready.facts.smi_tree import SmiParseError, parse_text
    with pytest.raises(SmiParseError):
        parse_text("Some notes about the node\n    Idle : Not Active\n")


def test_diagnose_knows_a_clocks_event_reasons_section_by_its_content(tmp_path):
    """`diagnose` recognises a `-q -d PERFORMANCE` section pasted alone (its header, then `Idle : …`; the
    power-brake block of tests/fixtures/pcie-power, at the margin) as nvidia-smi -q, and judges it."""
    from helpers import findings
    lines = (HERE / "nvidia-smi-q-perf-h200-brake.txt").read_text().splitlines()
    paste = tmp_path / "throttle.txt"
    paste.write_text("\n".join(line[4:] for line in lines[10:20]) + "\n")
    braked = [f for f in findings(paste) if f.check_id == "power.brake"]
    assert [f.status.value for f in braked] == ["fail"]


def test_a_margin_section_after_a_whole_gpu_is_a_gpu_of_its_own(make_bundle):
    """A full `-q` of one L4 (tests/fixtures/public/pcie-x8) with, pasted below it at the margin, the power-brake
    block of the H200 capture (tests/fixtures/pcie-power) and a `Clocks` section: the block is not the L4's (its
    sections are indented under its header), so it is judged as a GPU whose header was cut; the two margin
    sections are one such GPU; the L4 is still read in full."""
    from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_text
    whole = (FIXTURES / "public" / "pcie-x8" / "nvidia-smi-q.txt").read_text()
    lines = (HERE / "nvidia-smi-q-perf-h200-brake.txt").read_text().splitlines()
    block = "\n".join(line[4:] for line in lines[10:20]) + "\n"
    clocks = "Clocks\n    Graphics                          : 382 MHz\n    SM                                : 382 MHz\n"
    query = parse_nvidia_smi_q_text(whole + "\n" + block + "\n" + clocks)
    assert [gpu.name for gpu in query.gpus] == ["NVIDIA L4"]
    assert len(query.headless) == 1 and query.headless[0].sm_clock_mhz == 382
    assert not query.gpus[0].clock_event_reasons or "hw_power_brake_slowdown" not in query.gpus[0].clock_event_reasons
    report = report_for(make_bundle({"nvidia-smi-q.txt": whole + "\n" + block}))
    assert statuses(report, "power.brake") == ["fail"]
    assert "header is not in this input" in messages(report, "power.brake")
    # a foreign line at the margin between the GPU and the block does not hide the block
    report = report_for(make_bundle({"nvidia-smi-q.txt": whole + "\n...\n" + block}))
    assert statuses(report, "power.brake") == ["fail"]
