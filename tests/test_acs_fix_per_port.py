"""pcie.acs_iommu's fix names one setpci per redirecting port (issue 32), one per line, each runnable as printed:
`setpci -s` takes one device, so a switch with two redirecting ports gets two commands, not the first port alone."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from gpuready.checks.registry import registered_in_order, run_checks
from gpuready.facts.lspci import parse_lspci
from gpuready.facts.types import Facts, GpuFacts
from gpuready.i18n import message

LSPCI_PLX = Path(__file__).parent / "fixtures" / "pcie-power" / "lspci-vv-8xl40s-plx.txt"
"""lspci -vv of 8x L40S behind four PLX switches (tests/fixtures/pcie-power/README.md): of the switch ports only af's
downstream ports b0:08.0 and b0:10.0 show ACSCtl ReqRedir+ CmpltRedir+, above GPUs b1:00.0 and b2:00.0."""
registered_in_order()  # imports every module of checks/: run_checks(only=…) does not
PORTS = ["0000:b0:08.0", "0000:b0:10.0"]
_SPAN = re.compile(r"`([^`\n]*)`")


def _finding():
    gpus = [GpuFacts(index=i, bus_id=f"0000:{bus}:00.0", name="NVIDIA L40S")
            for i, bus in enumerate(("19", "1a", "3d", "3e", "88", "89", "b1", "b2"))]
    [finding] = [f for f in run_checks(Facts(gpus=gpus, pci_devices=parse_lspci(LSPCI_PLX.read_text())),
                                       only=["pcie.acs_iommu"]) if f.status.value == "warn"]
    return finding


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_redirecting_port_gets_its_own_setpci_line(lang):
    finding = _finding()
    fix = message(f"{finding.message_id}.fix", lang, **finding.message_values)
    commands = [line for line in fix.splitlines() if "setpci" in line]
    assert len(commands) == len(PORTS)
    for line, port in zip(commands, PORTS):
        [command] = _SPAN.findall(line)  # one command a line, the whole line
        assert line.strip() == f"`{command}`"
        assert shlex.split(command) == ["sudo", "setpci", "-s", port, "ECAP_ACS+0x6.w=0000"]
        assert subprocess.run(["bash", "-n", "-c", command]).returncode == 0
