"""ACS/IOMMU and AER. No public capture shows them, so these inputs are written by hand in the
exact layout `lspci -vv` and the kernel print (said so in tests/fixtures/public/README.md)."""

from gpuready.checks.registry import run_checks
from gpuready.facts.kernel_log import parse_kernel_log
from gpuready.facts.lspci import bridges_above, parse_lspci
from gpuready.facts.types import Facts, GpuFacts, HostFacts

LSPCI = """\
17:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
\tBus: primary=16, secondary=17, subordinate=1a, sec-latency=0
\tCapabilities: [f24 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+
\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
18:00.0 3D controller: NVIDIA Corporation GA100 [A100 PCIe 40GB] (rev a1)
\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\tLnkSta:\tSpeed 16GT/s (ok), Width x8 (downgraded)
19:00.0 3D controller: NVIDIA Corporation GA100 [A100 PCIe 40GB] (rev a1)
\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported
\tLnkSta:\tSpeed 16GT/s (ok), Width x16 (ok)
"""


def _gpus():
    return [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA A100-PCIE-40GB") for i, bus in enumerate(("18", "19"))]


def test_lspci_fields():
    devices = parse_lspci(LSPCI)
    gpu = next(d for d in devices if d.address == "0000:18:00.0")
    assert gpu.is_nvidia_gpu and gpu.link_cap == (16.0, 16) and gpu.link_status == (16.0, 8)
    assert [bridge.address for bridge in bridges_above(gpu, devices)] == ["0000:17:00.0"]
    assert bridges_above(gpu, devices)[0].acs_enabled == ["ReqRedir", "CmpltRedir"]


def test_acs_redirect_warns_and_clean_bridges_pass():
    findings = [f for f in run_checks(Facts(gpus=_gpus(), pci_devices=parse_lspci(LSPCI))) if f.check_id == "pcie.acs_iommu"]
    assert [f.status.value for f in findings] == ["warn"] and "0000:17:00.0" in findings[0].message
    clean = LSPCI.replace("ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
                          "ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-")
    findings = [f for f in run_checks(Facts(gpus=_gpus(), pci_devices=parse_lspci(clean))) if f.check_id == "pcie.acs_iommu"]
    assert [f.status.value for f in findings] == ["pass"]


def test_translating_iommu_warns_with_two_gpus():
    facts = Facts(gpus=_gpus(), host=HostFacts(kernel_cmdline="BOOT_IMAGE=/vmlinuz intel_iommu=on quiet"))
    assert [f.status.value for f in run_checks(facts) if f.check_id == "pcie.acs_iommu"] == ["warn"]
    facts.host.kernel_cmdline = "BOOT_IMAGE=/vmlinuz intel_iommu=on iommu=pt"
    assert [f.status.value for f in run_checks(facts) if f.check_id == "pcie.acs_iommu"] == ["pass"]


def test_aer_for_a_gpu():
    log = ("[  712.113542] nvidia 0000:18:00.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
           "(Receiver ID)\n")
    events = parse_kernel_log(log)
    assert [(e.kind, e.bus_id) for e in events] == [("aer", "0000:18:00.0")]
    findings = [f for f in run_checks(Facts(gpus=_gpus(), kernel_log=events)) if f.check_id == "pcie.aer"]
    assert [f.status.value for f in findings] == ["warn"]
    uncorrected = parse_kernel_log(log.replace("severity=Corrected", "severity=Uncorrected (Non-Fatal)"))
    findings = [f for f in run_checks(Facts(gpus=_gpus(), kernel_log=uncorrected)) if f.check_id == "pcie.aer"]
    assert [f.status.value for f in findings] == ["fail"]
    assert [f.status.value for f in run_checks(Facts(gpus=_gpus(), kernel_log=[])) if f.check_id == "pcie.aer"] == ["pass"]
