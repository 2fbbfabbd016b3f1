"""Power and cooling budget of a planned machine: full load, PSU, circuit, cooling, monthly energy and its cost.

The rules are checks/power.py's (power.budget): the same thresholds ([power_budget], [power_budget_scaling]) and the
same published platform maxima (platforms.toml); circuits, cooling and room limits are in knowledge/prices.toml
`[power]`, electricity in `[site]`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from gpuready.checks.power import node_full_load_w
from gpuready.knowledge import gpu_spec, load_table, platform_spec, thresholds
from gpuready.verbs.plan.machine import Machine


def _entry(check_id: str, status: str, message: str, fix: str | None = None, refs: list[str] | None = None,
           **figures: Any) -> dict[str, Any]:
    return {"id": check_id, "status": status, "message": message, "fix": fix, "refs": refs or [], **figures}


def full_load(machine: Machine, *, cpu_w: float | None = None, platform_w: float | None = None) -> dict[str, Any]:
    """Full load of one node in watts, with its basis: the published system maximum of a known platform (DGX
    H100/H200, DGX A100, DGX B200) unless CPU or platform watts are given, else GPUs x board power + CPUs + platform."""
    budget, scaling, table = thresholds("power_budget"), thresholds("power_budget_scaling"), load_table("prices")
    platform = platform_spec(machine.gpu_name, machine.gpus_per_node)
    gpu_w = float(machine.gpu_tdp_w or 0) * machine.gpus_per_node
    if platform is not None and cpu_w is None and platform_w is None:
        return {"full_load_w": float(platform["max_power_w"]), "basis": f"published maximum of the {platform['name']}",
                "gpu_w": gpu_w, "cpu_w": None, "platform_w": None, "published_maximum": True,
                "psu_headroom": scaling["published_max_psu_headroom"],
                "refs": [platform["source"], scaling["source"]]}
    power = table["power"]
    sockets = power["cpu_sockets_up_to_4_gpus"] if machine.gpus_per_node <= 4 else power["cpu_sockets_above_4_gpus"]
    total = node_full_load_w(gpu_w, machine.gpus_per_node, sockets, cpu_watts=cpu_w, platform_watts=platform_w)
    cpu = float(cpu_w) if cpu_w is not None else sockets * budget["non_gpu_w_per_socket"]
    rest = total - gpu_w - cpu
    per_socket = budget["non_gpu_w_per_socket"]
    cpu_note = "" if cpu_w is not None else f" ({sockets} socket(s) x {per_socket} W, assumed)"
    rest_note = "" if platform_w is not None else " (base + per-GPU allowance for fans, switches, NICs; assumed)"
    basis = (f"{machine.gpus_per_node} x {machine.gpu_tdp_w or 0:g} W GPUs + {cpu:g} W CPUs{cpu_note}"
             f" + {rest:g} W platform{rest_note}")
    return {"full_load_w": total, "basis": basis, "gpu_w": gpu_w, "cpu_w": cpu, "platform_w": rest,
            "published_maximum": False, "psu_headroom": budget["psu_headroom"],
            "refs": [budget["source"], scaling["source"], power["source"]]}


def circuit_watts(circuit: str) -> tuple[str, float]:
    """(label, nominal watts) for `230V/16A`, `120v 20a`, `household`, `2200W` or `2.2kW`; ValueError otherwise."""
    power = load_table("prices")["power"]
    text = circuit.strip()
    if text.lower() in ("household", "home", "domestic"):
        return "household circuit", float(power["household_circuit_w"])
    match = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*v\s*[/x×*, ]?\s*(\d+(?:\.\d+)?)\s*a\s*", text)
    if match:
        volts, amps = float(match.group(1)), float(match.group(2))
        return f"{volts:g} V / {amps:g} A", volts * amps
    match = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*(k?)w\s*", text)
    if match:
        return f"{text}", float(match.group(1)) * (1000 if match.group(2) else 1)
    raise ValueError(f"circuit {circuit!r}: give VOLTSV/AMPSA (230V/16A, 120V/20A), WATTS (2200W) or 'household'")


def power_plan(machine: Machine, *, cpu_w: float | None = None, platform_w: float | None = None,
               psu_w: float | None = None, circuit: str | None = None, room_c: float | None = None,
               price_per_kwh: float | None = None, utilisation: float = 1.0) -> dict[str, Any]:
    """Full load per node, PSU and circuit judgement, cooling advice, and monthly energy and cost per node.

    Entries (`findings`) carry `id` (plan.power_psu, plan.power_circuit, plan.cooling), `status` (pass, warn,
    fail), `message`, `fix` and `refs`. ValueError for a utilisation outside 0..1 or a circuit it cannot read.
    """
    if not 0 <= utilisation <= 1 or math.isnan(utilisation):
        raise ValueError(f"utilisation must be between 0 and 1, not {utilisation!r}")
    budget, thermal, table = thresholds("power_budget"), thresholds("thermal"), load_table("prices")
    power, site, meta = table["power"], table["site"], table["meta"]
    load = full_load(machine, cpu_w=cpu_w, platform_w=platform_w)
    total, headroom = load["full_load_w"], load["psu_headroom"]
    findings = []

    # PSU
    needed = total * headroom
    if psu_w is None:
        findings.append(_entry("plan.power_psu", "pass", f"Full load ≈ {total:,.0f} W ({load['basis']}): size the "
                               f"PSU(s) at >= {needed:,.0f} W ({headroom:g}x full load, without redundancy).",
                               refs=load["refs"], psu_needed_w=needed))
    else:
        status = "fail" if psu_w < total else "warn" if psu_w < needed else "pass"
        verdict = {"fail": "cannot carry it", "warn": f"has less than the {headroom:g}x headroom",
                   "pass": "covers it with headroom"}[status]
        findings.append(_entry("plan.power_psu", status, f"Full load ≈ {total:,.0f} W ({load['basis']}); the "
                               f"{psu_w:,.0f} W PSU {verdict} (>= {needed:,.0f} W advised).",
                               None if status == "pass" else f"Use PSU(s) of at least {needed:,.0f} W combined (not "
                               "counting redundant units), or lower GPU power limits (`nvidia-smi -pl`).",
                               load["refs"], psu_needed_w=needed))

    # Circuit: 80 % continuous
    fraction = budget["circuit_continuous_fraction"]
    standard = [(name.replace("/", " / ").replace("V", " V").replace("A", " A"), v * a)
                for name, (v, a) in power["circuits"].items()]
    standard.append(("household circuit", float(power["household_circuit_w"])))
    circuits = [{"circuit": name, "nominal_w": watts, "continuous_w": watts * fraction,
                 "carries": total <= watts * fraction} for name, watts in sorted(standard, key=lambda c: c[1])]
    refs = [budget["source"], power["source"]]
    if circuit is not None:
        label, watts = circuit_watts(circuit)
        allowed = watts * fraction
        ok = total <= allowed
        findings.append(_entry("plan.power_circuit", "pass" if ok else "fail",
                               f"Full load ≈ {total:,.0f} W against {allowed:,.0f} W continuous on a {label} circuit "
                               f"({watts:,.0f} W nominal, {fraction:.0%} rule).",
                               None if ok else f"Needs {math.ceil(total / allowed)} such circuits (PSUs split across "
                               "them) or a higher-rated feed (e.g. 230 V/32 A or three-phase); lower GPU power limits "
                               "in the meantime.", refs, circuit_continuous_w=allowed))
    else:
        fits = [c for c in circuits if c["carries"]]
        if fits:
            findings.append(_entry("plan.power_circuit", "pass", f"Full load ≈ {total:,.0f} W fits on one "
                                   f"{fits[0]['circuit']} circuit ({fits[0]['continuous_w']:,.0f} W continuous) or "
                                   "larger; give --circuit to judge yours.", refs=refs))
        else:
            findings.append(_entry("plan.power_circuit", "warn", f"Full load ≈ {total:,.0f} W is beyond any single "
                                   f"standard branch circuit (largest: {circuits[-1]['circuit']}, "
                                   f"{circuits[-1]['continuous_w']:,.0f} W continuous).",
                                   "Plan several circuits (one per PSU), a 230 V/32 A or three-phase feed, or a data "
                                   "centre rack.", refs))

    # Cooling: card count, room temperature
    spec = gpu_spec(machine.gpu_name)
    consumer = spec is not None and spec.get("datacenter") is False
    problems, fixes = [], []
    status = "pass"
    warn_at = power["air_cooled_consumer_cards_warn_at"]
    if consumer and machine.gpus_per_node >= warn_at:
        status = "warn"
        problems.append(f"{machine.gpus_per_node} open-air {machine.gpu_name} cards in one case "
                        f"({load['gpu_w']:,.0f} W of heat) are hard to air-cool (>= {warn_at} cards)")
        fixes.append("use blower-style or water-cooled cards, leave a slot between cards or use risers, a server "
                     "chassis with front-to-back airflow, or lower the power limit (`nvidia-smi -pl`)")
    if room_c is not None:
        if room_c > power["room_allowable_max_c"]:
            status = "fail"
            problems.append(f"the room at {room_c:g} °C is above ASHRAE A1's allowable "
                            f"{power['room_allowable_max_c']} °C")
        elif room_c > power["room_advised_max_c"]:
            status = "warn" if status != "fail" else status
            problems.append(f"the room at {room_c:g} °C is above the advised {power['room_advised_max_c']} °C "
                            f"(ASHRAE recommended inlet 18-{power['room_recommended_max_c']} °C)")
        if room_c > power["room_advised_max_c"]:
            fixes.append(f"cool the room to <= {power['room_advised_max_c']} °C")
    heat_note = (f"GPUs slow down near {thermal['rule_of_thumb_c']} °C (their own slowdown threshold); "
                 f"keep the inlet <= {power['room_advised_max_c']} °C. The room must remove ≈ {total:,.0f} W "
                 f"(≈ {total * 3.412:,.0f} BTU/h) per node.")
    if problems:
        message = "Cooling: " + "; ".join(problems) + f": risk of thermal slowdown. {heat_note}"
    else:
        message = f"Cooling: no problem seen{'' if room_c is not None else ' (give --room-c to judge the room)'}. " \
                  f"{heat_note}"
    findings.append(_entry("plan.cooling", status, message, ("; ".join(fixes).capitalize() + ".") if fixes else None,
                           [power["source"], thermal["source"]]))

    # Energy
    hours = meta["hours_per_month"]
    kwh = total * utilisation * hours / 1000
    price = site["electricity_usd_per_kwh"]
    price_value, price_origin = ((float(price_per_kwh), "user") if price_per_kwh is not None
                                 else (float(price["value"]), f"default ({price['source']}, as of {price['as_of']})"))
    return {
        "machine": machine.gpu_name, "gpus_per_node": machine.gpus_per_node, "nodes": machine.nodes,
        "full_load_w": total, "basis": load["basis"], "published_maximum": load["published_maximum"],
        "gpu_w": load["gpu_w"], "cpu_w": load["cpu_w"], "platform_w": load["platform_w"],
        "psu_needed_w": needed, "psu_headroom": headroom,
        "circuits": circuits,
        "utilisation": utilisation,
        "kwh_per_month_per_node": kwh, "kwh_per_month": kwh * machine.nodes,
        "price_per_kwh": price_value, "price_per_kwh_origin": price_origin,
        "cost_per_month": kwh * machine.nodes * price_value,
        "findings": findings,
        "refs": load["refs"],
    }
