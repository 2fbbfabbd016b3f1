"""What an RDMA NIC driver (mlx5_core, mlx4_core, ib_core) says in the kernel log, as typed fields of a kernel event.

The driver prints `<driver> <PCI address>[ <netdev>]: <message>` (dev_err/netdev_info), behind whatever prefix the
log adds (dmesg's `[ 12.3]`, `dmesg -T`, journalctl's date and host, a `host: ` from pdsh). The messages, from the
driver source (drivers/net/ethernet/mellanox/mlx5/core):
- health.c `poll_health`: `device's health compromised - reached miss count` (the firmware stopped its heartbeat),
  `Fatal error %u detected`, and `print_health_info`'s syndrome (`synd 0x8: unrecoverable hardware error`,
  `Health issue observed, firmware internal error`); devlink's `mlx5_fw_fatal` reporter; mlx4's `Internal error
  detected`;
- cmd.c `wait_func`: `<COMMAND>(0x…) timeout. Will cause a leak of a command resource` and `No done completion` (the
  firmware never answered a command); a line that says `recovered after timeout` is a recovery, not a timeout;
- events.c `port_module`: `Port module event: module N, Cable plugged|unplugged` and `Port module event[error]:
  module N, Cable error, <reason>` (`High Temperature`, `Power budget exceeded`, …);
- en_main.c `mlx5e_update_carrier`: `<netdev>: Link up` / `Link down`;
- the PCI core's `pcie_print_link_status`, printed by the driver at probe: `… available PCIe bandwidth, limited by
  <speed> <width> link at <port> (capable of …)` (without `limited by` the HCA got its full link).
Parsing only: checks/nic_kernel.py judges.
"""

from __future__ import annotations

import re

from gpuready.facts.units import normalize_bus_id

MARKERS = ("mlx5_core", "mlx4_core", "ib_core")
"""The driver names every such line carries."""

LINE = re.compile(r"\b(?:mlx[45]_core|ib_core)\b\d{0,3}:? (?P<address>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
                  r"\.[0-7])(?: (?P<netdev>[^\s:]{1,40}))?: (?P<message>[^\n]{0,600})")

_FATAL = re.compile(r"health compromised|unrecoverable hardware error|firmware internal error|Fatal error \d{1,6} "
                    r"detected|mlx5_fw_fatal|Internal error detected", re.IGNORECASE)
_TIMEOUT = re.compile(r"\btimeout\. Will cause a leak of a command resource|No done completion")
_MODULE = re.compile(r"Port module event(?P<error>\[error\])?: module (?P<module>\d{1,3}), (?P<what>[^\n]{1,120})")
_LINK = re.compile(r"^Link (up|down)\b")
_PCIE = re.compile(r"(?P<text>[\d.]{1,12} Gb/s available PCIe bandwidth, limited by [^\n]{1,200})")


def nic_event(groups: tuple) -> tuple[str | None, dict]:
    """("nic", fields) for a line of LINE that says something about the NIC's health or links; (None, {}) for the
    rest (probe lines, capabilities, a recovered command)."""
    address, netdev, message = groups[1], groups[2], groups[3]
    fields: dict = {"bus_id": normalize_bus_id(address)}
    if _FATAL.search(message):
        return "nic", {**fields, "detail": "fatal"}
    if _TIMEOUT.search(message):
        return "nic", {**fields, "detail": "cmd_timeout"}
    if module := _MODULE.search(message):
        port = f"module {module['module']}"
        what = module["what"].strip().rstrip(".")
        if module["error"] or what.lower().startswith("cable error"):
            reason = what.split(",", 1)[1].strip() if "," in what else what
            return "nic", {**fields, "port": port, "detail": f"module_error {reason}"}
        if "unplugged" in what.lower():
            return "nic", {**fields, "port": port, "detail": "module_unplugged"}
        return None, {}
    if netdev and (link := _LINK.match(message)):
        return "nic", {**fields, "port": netdev, "detail": f"link_{link.group(1)}"}
    if pcie := _PCIE.search(message):
        return "nic", {**fields, "detail": f"pcie_limited {pcie['text'].strip()}"}
    return None, {}
