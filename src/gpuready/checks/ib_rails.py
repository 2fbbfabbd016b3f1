"""The machine's InfiniBand/RoCE rails: ports down among them, a slow one, mixed link layers, error counters, and
NCCL device settings that name what the machine lacks. Judged for multi-node only (a `network.*` id).

A rail is an RDMA port of an HCA model that has at least one Active port on this machine: a model none of whose
ports is up (a front-end card left unplugged) is no rail. A machine with fewer than two rails (a laptop, a pod
without RDMA, one NIC) gets no finding from these checks."""

from __future__ import annotations

import re
from collections import defaultdict

from gpuready.checks.registry import CheckContext, check
from gpuready.facts.types import IbPort
from gpuready.i18n import said
from gpuready.model import Finding

_NCCL_ENV_REF = ("NCCL environment variables, NCCL_IB_HCA and NCCL_SOCKET_IFNAME (`^` excludes, `=` matches exactly, "
                 "`:port`): https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html")
_SYSFS_REF = ("Linux kernel ABI, sysfs-class-infiniband (ports/<n>/state, phys_state, rate, link_layer, counters/): "
              "https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband")
_COUNTERS_REF = ("NVIDIA, Understanding mlx5 Linux counters: port counters count since the last reset or boot: "
                 "https://enterprise-support.nvidia.com/s/article/understanding-mlx5-linux-counters-and-status-parameters")
_RAILS_MIN = 2
"""Below two rails there is nothing to compare a port with: a single NIC is judged by network.rdma alone."""


def is_active(port: IbPort) -> bool:
    return (port.state or "").upper() == "ACTIVE"


def _name(port: IbPort) -> str:
    return f"{port.device}/{port.port}"


def rails(ports: list[IbPort] | None) -> list[IbPort]:
    """The ports of every HCA model with at least one Active port; [] where fewer than two. Ports whose model is not
    shown (an old capture without `hca_type` / `CA type`) are no rails: two unknown adapters may be two models."""
    up_models = {port.hca_type for port in ports or [] if is_active(port) and port.hca_type}
    found = [port for port in ports or [] if port.hca_type in up_models]
    return found if len(found) >= _RAILS_MIN else []


def rails_down(ports: list[IbPort] | None) -> list[IbPort]:
    """The rails that are not Active on an HCA none of whose ports is: a whole adapter off the fabric. A second port
    Down beside an Active one on the same HCA is a dual-port card cabled once (common, and no lost rail)."""
    railed = rails(ports)
    up_devices = {port.device for port in railed if is_active(port)}
    return [port for port in railed if not is_active(port) and port.device not in up_devices]


def _by_model(ports: list[IbPort]) -> dict[str | None, list[IbPort]]:
    models: dict[str | None, list[IbPort]] = defaultdict(list)
    for port in ports:
        models[port.hca_type].append(port)
    return models


@check("network.rail_down", needs=("ib_ports",), needs_gpus=False)
def rail_down(context: CheckContext) -> list[Finding]:
    """Rails that are Down, Polling or Initializing while the same HCA model is Active elsewhere in the machine."""
    down = rails_down(context.facts.ib_ports)
    if not down:
        return []
    named = ", ".join(f"{_name(port)} {port.state or '?'} ({port.phys_state or '?'})" for port in down)
    return [context.fail(said("network.rail_down.ports", count=len(down), ports=named,
                              total=len(rails(context.facts.ib_ports))),
                         nic=down[0].device, observed=named, expected="State: Active, Physical state: LinkUp",
                         refs=[_SYSFS_REF, _NCCL_ENV_REF])]


@check("network.rail_rate", needs=("ib_ports",), needs_gpus=False)
def rail_rate(context: CheckContext) -> list[Finding]:
    """An Active rail slower than what the same HCA model negotiates elsewhere in the machine."""
    findings = []
    for model, ports in _by_model([port for port in rails(context.facts.ib_ports) if is_active(port)]).items():
        best = max((port.rate_gbit_per_s or 0 for port in ports), default=0)
        slow = [port for port in ports if port.rate_gbit_per_s and port.rate_gbit_per_s < best]
        if slow:
            named = ", ".join(f"{_name(port)} {port.rate_gbit_per_s:g} Gb/s" for port in slow)
            findings.append(context.warn(said("network.rail_rate.slow", ports=named, model=model or "?",
                                              best_gbit_per_s=best),
                                         nic=slow[0].device, observed=named, expected=f"{best:g} Gb/s",
                                         refs=[_SYSFS_REF]))
    return findings


@check("network.link_layer_mixed", needs=("ib_ports",), needs_gpus=False)
def link_layer_mixed(context: CheckContext) -> list[Finding]:
    """InfiniBand and Ethernet (RoCE) among the Active rails of one HCA model (those NCCL_IB_HCA selects, if set)."""
    selected = _selected(context, [port for port in rails(context.facts.ib_ports) if is_active(port)])
    findings = []
    for model, ports in _by_model(selected).items():
        layers = defaultdict(list)
        for port in ports:
            layers[port.link_layer or "?"].append(_name(port))
        if {"InfiniBand", "Ethernet"} <= set(layers):
            described = "; ".join(f"{layer}: {', '.join(names)}" for layer, names in sorted(layers.items()))
            findings.append(context.warn(said("network.link_layer_mixed.ports", model=model or "?", layers=described),
                                         nic=ports[0].device, observed=described, expected="one link layer",
                                         refs=[_SYSFS_REF, _NCCL_ENV_REF]))
    return findings


def _selected(context: CheckContext, ports: list[IbPort]) -> list[IbPort]:
    spec = (context.facts.env or {}).get("NCCL_IB_HCA", "").strip()
    if not spec:
        return ports
    exclude, exact, entries = nccl_device_list(spec)
    chosen = [port for port in ports if _matches(port.device, port.port, entries, exact)]
    return [port for port in ports if port not in chosen] if exclude else chosen


@check("network.ib_counters", needs=("ib_ports",), needs_gpus=False)
def ib_counters(context: CheckContext) -> list[Finding]:
    """Error counters of the rails above zero: totals since boot or reset, so at most a warning to watch them."""
    counted = [(port, name, value) for port in rails(context.facts.ib_ports)
               for name, value in sorted(port.counters.items()) if value > 0]
    if not counted:
        return []
    named = ", ".join(f"{_name(port)} {name}={value}" for port, name, value in counted)
    return [context.warn(said("network.ib_counters.nonzero", counters=named), nic=counted[0][0].device,
                         observed=named, expected="0, or not increasing", refs=[_COUNTERS_REF, _SYSFS_REF])]


# ------------------------------------------------------------------------------------------- NCCL device settings
def nccl_device_list(spec: str) -> tuple[bool, bool, list[tuple[str, int | None]]]:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME → (exclude `^`, exact `=`, [(name or prefix, port or None)])."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    entries = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, port = item.partition(":")
        entries.append((name, int(port) if re.fullmatch(r"\d+", port) else None))
    return exclude, exact, entries


def _matches(device: str, port: int | None, entries: list[tuple[str, int | None]], exact: bool) -> bool:
    return any((device == name if exact else device.startswith(name)) and (wanted is None or wanted == port)
               for name, wanted in entries)


def _missing(spec: str, devices: list[tuple[str, int | None]]) -> list[str]:
    """The entries of an inclusion list that match none of the machine's devices; an exclusion list excludes nothing
    that is missing, so it names none."""
    exclude, exact, entries = nccl_device_list(spec)
    if exclude:
        return []
    return [f"{name}:{port}" if port is not None else name for name, port in entries
            if not any(_matches(device, number, [(name, port)], exact) for device, number in devices)]


@check("network.nccl_devices", needs=("env",), needs_gpus=False)
def nccl_devices(context: CheckContext) -> list[Finding]:
    """NCCL_IB_HCA / NCCL_SOCKET_IFNAME naming HCAs, ports or interfaces the machine does not have."""
    env, facts = context.facts.env or {}, context.facts
    judged = []
    if env.get("NCCL_IB_HCA", "").strip() and facts.ib_ports is not None:
        have = [(port.device, port.port) for port in facts.ib_ports]
        judged.append(("NCCL_IB_HCA", _missing(env["NCCL_IB_HCA"], have),
                       sorted({f"{device}:{number}" for device, number in have})))
    if env.get("NCCL_SOCKET_IFNAME", "").strip() and facts.net_interfaces is not None:
        have = [(nic.name, None) for nic in facts.net_interfaces]
        judged.append(("NCCL_SOCKET_IFNAME", _missing(env["NCCL_SOCKET_IFNAME"], have), [name for name, _ in have]))
    return [context.fail(said("network.nccl_devices.missing", variable=variable, value=env[variable],
                              missing=", ".join(missing), present=", ".join(present) or "-"),
                         observed=f"{variable}={env[variable]}", expected=", ".join(present) or "-",
                         refs=[_NCCL_ENV_REF])
            for variable, missing, present in judged if missing]
