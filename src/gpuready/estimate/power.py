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
from gpuready.i18n import Said, Sentence, finding_text, said, said_json, sentence
from gpuready.knowledge import gpu_spec, load_table, platform_spec, thresholds
from gpuready.estimate.machine import Machine


def _entry(check_id: str, status: str, text: Said, refs: list[str] | None = None, **figures: Any) -> dict[str, Any]:
    """A power finding: its text by catalogue id (`message`, `fix` from `<id>.fix`, `message_id`, `message_values`),
    so that plan's console and its findings say it in the reader's language."""
    return {"id": check_id, "status": status, **finding_text(text), "refs": refs or [], **figures}


def full_load(machine: Machine, *, cpu_w: float | None = None, platform_w: float | None = None) -> dict[str, Any]:
    """Full load of one node in watts, with its basis: the published system maximum of a known platform (DGX
    H100/H200, DGX A100, DGX B200) unless CPU or platform watts are given, else GPUs x board power + CPUs + platform."""
    budget, scaling, table = thresholds("power_budget"), thresholds("power_budget_scaling"), load_table("prices")
    platform = platform_spec(machine.gpu_name, machine.gpus_per_node)
    gpu_w = float(machine.gpu_tdp_w or 0) * machine.gpus_per_node
    if platform is not None and cpu_w is None and platform_w is None:
        return {"full_load_w": float(platform["max_power_w"]),
                "basis": sentence("plan.power.basis.platform", platform=platform["name"]),
                "gpu_w": gpu_w, "cpu_w": None, "platform_w": None, "published_maximum": True,
                "psu_headroom": scaling["published_max_psu_headroom"],
                "refs": [platform["source"], scaling["source"]]}
    power = table["power"]
    sockets = power["cpu_sockets_up_to_4_gpus"] if machine.gpus_per_node <= 4 else power["cpu_sockets_above_4_gpus"]
    total = node_full_load_w(gpu_w, machine.gpus_per_node, sockets, cpu_watts=cpu_w, platform_watts=platform_w)
    cpu = float(cpu_w) if cpu_w is not None else sockets * budget["non_gpu_w_per_socket"]
    rest = total - gpu_w - cpu
    per_socket = budget["non_gpu_w_per_socket"]
    cpu_note = "" if cpu_w is not None else said("plan.power.basis.cpu_assumed", sockets=sockets, per_socket=per_socket)
    rest_note = "" if platform_w is not None else said("plan.power.basis.platform_assumed")
    basis = sentence("plan.power.basis.estimate", gpus=machine.gpus_per_node, gpu_w=float(machine.gpu_tdp_w or 0),
                     cpu_w=float(cpu), cpu_note=cpu_note, platform_w=float(rest), platform_note=rest_note)
    return {"full_load_w": total, "basis": basis, "gpu_w": gpu_w, "cpu_w": cpu, "platform_w": rest,
            "published_maximum": False, "psu_headroom": budget["psu_headroom"],
            "refs": [budget["source"], scaling["source"], power["source"]]}


def circuit_watts(circuit: str) -> tuple[str, float]:
    """(label, nominal watts) for `230V/16A`, `120v 20a`, `household`, `2200W` or `2.2kW`; ValueError otherwise.
    The label of a household circuit is a `Sentence` (words, said in the reader's language)."""
    power = load_table("prices")["power"]
    text = circuit.strip()
    if text.lower() in ("household", "home", "domestic"):
        return _household(), float(power["household_circuit_w"])
    match = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*v\s*[/x×*, ]?\s*(\d+(?:\.\d+)?)\s*a\s*", text)
    if match:
        volts, amps = float(match.group(1)), float(match.group(2))
        return _carrying(circuit, f"{volts:g} V / {amps:g} A", volts * amps)
    match = re.fullmatch(r"(?i)\s*(\d+(?:\.\d+)?)\s*(k?)w\s*", text)
    if match:
        return _carrying(circuit, f"{text}", float(match.group(1)) * (1000 if match.group(2) else 1))
    raise ValueError(sentence("plan.power.circuit.unreadable", circuit=repr(circuit)))


def _carrying(circuit: str, label: str, watts: float) -> tuple[str, float]:
    """A circuit of 0 W (0V/16A, 0W) is refused as the command line's option type refuses it: it would fail any load
    and need '0 such circuits'."""
    if watts <= 0:
        raise ValueError(sentence("plan.power.circuit.zero", circuit=repr(circuit)))
    return label, watts


def _household() -> Sentence:
    """A household circuit's label, in words."""
    return sentence("plan.power.circuit.household")


def _psu_entry(load: dict[str, Any], psu_w: float | None) -> dict[str, Any]:
    """The PSU a node needs (full load × headroom), judged against the one given."""
    total, headroom = load["full_load_w"], load["psu_headroom"]
    needed = total * headroom
    loaded = {"total_w": total, "basis": load["basis"]}
    if psu_w is None:
        return _entry("plan.power_psu", "pass", said("plan.power.psu.size", needed_w=needed, headroom=headroom,
                                                     **loaded), refs=load["refs"], psu_needed_w=needed)
    status = "fail" if psu_w < total else "warn" if psu_w < needed else "pass"
    return _entry("plan.power_psu", status, said(f"plan.power.psu.{status}", psu_w=psu_w, needed_w=needed,
                                                 headroom=headroom, **loaded), load["refs"], psu_needed_w=needed)


def _circuits(total: float, power: dict[str, Any], fraction: float) -> list[dict[str, Any]]:
    """The standard circuits, smallest first, and whether each carries the node continuously (80 % rule)."""
    standard = [(name.replace("/", " / ").replace("V", " V").replace("A", " A"), v * a)
                for name, (v, a) in power["circuits"].items()]
    standard.append((_household(), float(power["household_circuit_w"])))
    return [{"circuit": name, "nominal_w": watts, "continuous_w": watts * fraction,
             "carries": total <= watts * fraction} for name, watts in sorted(standard, key=lambda c: c[1])]


def _circuit_entry(total: float, circuit: str | None, circuits: list[dict[str, Any]], fraction: float,
                   refs: list[str]) -> dict[str, Any]:
    """The circuit given (80 % continuous), or the smallest standard one that carries the node."""
    if circuit is not None:
        label, watts = circuit_watts(circuit)
        allowed = watts * fraction
        ok = total <= allowed
        return _entry("plan.power_circuit", "pass" if ok else "fail",
                      said("plan.power.circuit." + ("pass" if ok else "fail"), total_w=total, continuous_w=allowed,
                           label=label, nominal_w=watts, fraction=fraction,
                           circuits=math.ceil(total / allowed) if allowed else 0),
                      refs, circuit_continuous_w=allowed)
    fits = [c for c in circuits if c["carries"]]
    if fits:
        return _entry("plan.power_circuit", "pass", said("plan.power.circuit.fits", total_w=total,
                                                         circuit=fits[0]["circuit"],
                                                         continuous_w=fits[0]["continuous_w"]), refs=refs)
    return _entry("plan.power_circuit", "warn", said("plan.power.circuit.beyond", total_w=total,
                                                     circuit=circuits[-1]["circuit"],
                                                     continuous_w=circuits[-1]["continuous_w"]), refs)


def _cooling_entry(machine: Machine, load: dict[str, Any], room_c: float | None, power: dict[str, Any],
                   thermal: dict[str, Any]) -> dict[str, Any]:
    """Cooling: air-cooled consumer cards in numbers, and the room's temperature."""
    spec = gpu_spec(machine.gpu_name)
    consumer = spec is not None and spec.get("datacenter") is False
    problems: list[Said] = []
    fixes: list[str] = []
    status = "pass"
    warn_at = power["air_cooled_consumer_cards_warn_at"]
    advised = power["room_advised_max_c"]
    if consumer and machine.gpus_per_node >= warn_at:
        status = "warn"
        problems.append(said("plan.cooling.problem.cards", cards=machine.gpus_per_node, gpu=machine.gpu_name,
                             heat_w=load["gpu_w"], warn_at=warn_at))
        fixes.append("cards")
    if room_c is not None:
        if room_c > power["room_allowable_max_c"]:
            status = "fail"
            problems.append(said("plan.cooling.problem.room_allowable", room_c=room_c,
                                 allowable_c=power["room_allowable_max_c"]))
        elif room_c > advised:
            status = "warn" if status != "fail" else status
            problems.append(said("plan.cooling.problem.room_advised", room_c=room_c, advised_c=advised,
                                 recommended_c=power["room_recommended_max_c"]))
        if room_c > advised:
            fixes.append("room")
    total = load["full_load_w"]
    heat = said("plan.cooling.heat", slowdown_c=thermal["rule_of_thumb_c"], advised_c=advised, total_w=total,
                btu_per_h=total * 3.412)
    if problems:  # each kind of problem has its remedy: the cards', the room's or both (`<id>.fix`)
        text = said("plan.cooling.risk." + "_".join(fixes), problems=problems, heat=heat, advised_c=advised)
    else:
        text = said("plan.cooling.ok" if room_c is not None else "plan.cooling.ok.no_room", heat=heat)
    return _entry("plan.cooling", status, text, [power["source"], thermal["source"]])


def _electricity_price(price_per_kwh: float | None, site: dict[str, Any]) -> tuple[float, Sentence]:
    """The price per kWh and where it comes from: the user's, or the dated default of knowledge/prices.toml."""
    if price_per_kwh is not None:
        return float(price_per_kwh), sentence("plan.power.price.user")
    price = site["electricity_usd_per_kwh"]
    source = said("plan.power.price.assumption") if price["source"] == "assumption" else str(price["source"])
    return float(price["value"]), sentence("plan.power.price.default", as_of=str(price["as_of"]), source=source)


def power_plan(machine: Machine, *, cpu_w: float | None = None, platform_w: float | None = None,
               psu_w: float | None = None, circuit: str | None = None, room_c: float | None = None,
               price_per_kwh: float | None = None, utilisation: float = 1.0) -> dict[str, Any]:
    """Full load per node, PSU and circuit judgement, cooling advice, and monthly energy and cost per node.

    Entries (`findings`) carry `id` (plan.power_psu, plan.power_circuit, plan.cooling), `status` (pass, warn,
    fail), `message`, `fix` and `refs`. ValueError for a utilisation outside 0..1 or a circuit it cannot read.
    """
    if not 0 <= utilisation <= 1 or math.isnan(utilisation):
        raise ValueError(sentence("plan.power.utilisation", utilisation=repr(utilisation)))
    budget, thermal, table = thresholds("power_budget"), thresholds("thermal"), load_table("prices")
    power, site, meta = table["power"], table["site"], table["meta"]
    load = full_load(machine, cpu_w=cpu_w, platform_w=platform_w)
    total, headroom = load["full_load_w"], load["psu_headroom"]
    fraction = budget["circuit_continuous_fraction"]
    circuits = _circuits(total, power, fraction)
    findings = [_psu_entry(load, psu_w),
                _circuit_entry(total, circuit, circuits, fraction, [budget["source"], power["source"]]),
                _cooling_entry(machine, load, room_c, power, thermal)]
    kwh = total * utilisation * meta["hours_per_month"] / 1000
    price_value, price_origin = _electricity_price(price_per_kwh, site)
    return {
        "machine": machine.gpu_name, "gpus_per_node": machine.gpus_per_node, "nodes": machine.nodes,
        "full_load_w": total, "basis": load["basis"], "published_maximum": load["published_maximum"],
        "gpu_w": load["gpu_w"], "cpu_w": load["cpu_w"], "platform_w": load["platform_w"],
        "psu_needed_w": total * headroom, "psu_headroom": headroom,
        "circuits": circuits,
        "utilisation": utilisation,
        "kwh_per_month_per_node": kwh, "kwh_per_month": kwh * machine.nodes,
        "price_per_kwh": price_value, "price_per_kwh_origin": price_origin,
        "price_per_kwh_origin_text": said_json(price_origin),
        "cost_per_month": kwh * machine.nodes * price_value,
        "findings": findings,
        "refs": load["refs"],
    }
