"""Power limits, the power budget against PSU and circuit, and current temperatures."""

from __future__ import annotations

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.types import GpuFacts
from gpuready.knowledge import clock_reasons, gpu_spec, platform_spec, thresholds
from gpuready.model import Finding


def node_full_load_w(gpu_watts: float, gpu_count: int, sockets: int, *, cpu_watts: float | None = None,
                     platform_watts: float | None = None) -> float:
    """A node at full load: its GPUs + CPU sockets (or `cpu_watts`) + the platform base and a per-GPU allowance for
    fans, PCIe switches and NICs (or `platform_watts`); the figures are knowledge/thresholds.toml's, with sources.
    `check`'s power budget and `plan`'s power plan both use it."""
    budget, scaling = thresholds("power_budget"), thresholds("power_budget_scaling")
    cpu = sockets * budget["non_gpu_w_per_socket"] if cpu_watts is None else cpu_watts
    rest = budget["platform_w"] + gpu_count * scaling["per_gpu_system_w"] if platform_watts is None else platform_watts
    return gpu_watts + cpu + rest


@check("power.limit", "Enforced power limit at the default")
def power_limit(context: CheckContext) -> list[Finding]:
    tolerance = thresholds("power_limit")

    def judge(gpu: GpuFacts) -> Finding | None:
        limit, default = gpu.power_limit_w, gpu.power_default_limit_w
        if limit is None or default is None:
            return None
        if limit < default - tolerance["tolerance_w"]:
            return context.warn(
                f"GPU{gpu.index}'s power limit is {limit:.0f} W, below its default {default:.0f} W: it will run "
                f"slower under load (about {1 - limit / default:.0%} less power).", gpu=gpu,
                observed=f"{limit:.0f} W", expected=f"{default:.0f} W",
                fix=f"If not intended: `sudo nvidia-smi -i {gpu.index} -pl {default:.0f}` (check that PSU and cooling "
                    "allow it; see power.budget).", refs=["NVML nvmlDeviceGetEnforcedPowerLimit / DefaultLimit",
                                                          tolerance["source"]])
        return None
    return per_gpu(context, judge, "All {count} GPU(s) run at their default power limit.",
                   reported=lambda gpu: gpu.power_limit_w is not None,
                   unreported="No power limits reported.")


def _platform(context: CheckContext) -> dict | None:
    """The published platform these GPUs make up (8x H100 SXM → DGX H100/H200), or None."""
    models = {spec.model if (spec := gpu_spec(gpu.name)) else None for gpu in context.gpus}
    if len(models) != 1 or None in models:
        return None
    return platform_spec(models.pop(), len(context.gpus))


@check("power.budget", "Power budget against PSU and circuit")
def power_budget(context: CheckContext) -> list[Finding]:
    budget = thresholds("power_budget")
    scaling = thresholds("power_budget_scaling")
    gpus = context.gpus
    unknown = []
    platform = _platform(context)
    if platform is not None:
        total = float(platform["max_power_w"])
        headroom = scaling["published_max_psu_headroom"]
        basis = f"published maximum of the {platform['name']} ({len(gpus)}x {gpu_spec(gpus[0].name).model})"
        assumptions = f"{basis}: {total:,.0f} W"
        refs = [platform["source"], scaling["source"], budget["source"]]
    else:
        gpu_watts = 0.0
        for gpu in gpus:
            spec = gpu_spec(gpu.name)
            watts = gpu.power_limit_w or (spec.get("tdp_w") if spec else None)
            if watts is None:
                unknown.append(f"GPU{gpu.index}")
            gpu_watts += watts or 0
        sockets = context.facts.host.sockets or 1
        if len(unknown) == len(gpus):
            return [context.skip("Power not judged: no GPU's power limit or model is known (nvml.json, nvidia-smi or "
                                 "nvidia-smi -q holds the limits).")]
        total = node_full_load_w(gpu_watts, len(gpus), sockets)
        headroom = budget["psu_headroom"]
        basis = "estimate: GPU limits + CPU sockets + per-GPU system allowance + platform base"
        assumptions = (f"GPUs {gpu_watts:,.0f} W (their enforced limits) + {sockets} CPU socket(s) x "
                       f"{budget['non_gpu_w_per_socket']} W + {len(gpus)} GPU(s) x {scaling['per_gpu_system_w']} W "
                       f"system allowance (fans, PCIe switches, NICs) + {budget['platform_w']} W platform (assumed)")
        refs = [budget["source"], scaling["source"]]
    observed = {"full_load_w": round(total), "basis": basis, "assumptions": assumptions}
    findings = []
    psu, circuit = context.options.psu_watts, context.options.circuit_watts
    if psu:
        needed = total * headroom
        status = context.fail if psu < total else context.warn if psu < needed else context.passed
        verdict = ("cannot carry it" if psu < total else f"has less than {headroom - 1:.0%} headroom" if psu < needed
                   else "has enough headroom" if headroom > 1 else "covers it")
        findings.append(status(f"Full load ≈ {total:,.0f} W ({assumptions}); PSU {psu:,.0f} W {verdict}.",
                               observed=observed, expected=f"PSU >= {needed:,.0f} W ({headroom}x full load)",
                               fix=None if psu >= needed else "Use a larger PSU (or redundant PSUs), or lower GPU "
                               "power limits with `nvidia-smi -pl`.", refs=refs))
    if circuit:
        allowed = circuit * budget["circuit_continuous_fraction"]
        status = context.fail if total > allowed else context.passed
        findings.append(status(f"Full load ≈ {total:,.0f} W ({assumptions}) against {allowed:,.0f} W continuous on a "
                               f"{circuit:,.0f} W circuit (80% rule).", observed=observed, expected=f"<= {allowed:,.0f} W",
                               fix=None if total <= allowed else "Move the machine to a higher-rated circuit or split "
                               "the load; lower power limits in the meantime.", refs=refs))
    if not findings:
        findings.append(context.passed(f"Full load ≈ {total:,.0f} W ({assumptions}); give --psu-watts / "
                                       "--circuit to judge it.", observed=observed, refs=refs))
    if unknown:
        findings[-1].message += f" Power of {', '.join(unknown)} unknown (not counted)."
    return findings


def _power_braked(reasons: frozenset[str]) -> bool:
    """The platform is braking the GPU: HW Power Brake Slowdown active while HW Thermal Slowdown is not (nvidia-smi
    prints both under HW Slowdown; with the thermal one, heat is the cause)."""
    return bool(reasons & clock_reasons("power_brake")) and "hw_thermal_slowdown" not in reasons


@check("power.brake", "No platform power brake on the GPUs")
def power_brake(context: CheckContext) -> list[Finding]:
    ref = thresholds("power_brake")["source"]

    def judge(gpu: GpuFacts) -> Finding | None:
        reasons = gpu.clock_event_reasons or frozenset()
        if _power_braked(reasons):
            return context.fail(
                f"GPU{gpu.index}'s clocks are cut by the HW power brake (HW Slowdown: power brake, not thermal): the "
                "chassis is braking the GPU. Check PSU redundancy and the BMC power policy.", gpu=gpu,
                observed=sorted(reasons & (clock_reasons("hardware") | clock_reasons("thermal"))),
                expected="no HW power brake slowdown",
                fix="Check that every PSU is present, powered and healthy (`ipmitool sdr type 'Power Supply'`, the "
                    "BMC event log), the BMC/chassis power-capping policy, and the GPU power cables; then confirm "
                    "with `nvidia-smi -q -d PERFORMANCE` (HW Power Brake Slowdown: Not Active).", refs=[ref])
        if reasons & clock_reasons("power_brake"):
            return context.passed(f"GPU{gpu.index} shows the power brake together with HW thermal slowdown: judged "
                                  "as thermal by thermal.current.", gpu=gpu, observed=sorted(reasons), refs=[ref])
        return None
    return per_gpu(context, judge, "No power brake on any of the {count} GPU(s).",
                   reported=lambda gpu: gpu.clock_event_reasons is not None,
                   unreported="No clock-event reasons reported.")


@check("thermal.current", "Temperatures and thermal/hardware slowdown")
def thermal_current(context: CheckContext) -> list[Finding]:
    limits = thresholds("thermal")

    def judge(gpu: GpuFacts) -> Finding | None:
        reasons = gpu.clock_event_reasons or frozenset()
        braked = _power_braked(reasons)
        # A power brake (HW Slowdown whose sub-reason is the power brake, not heat) is power.brake's finding.
        thermal, hardware = clock_reasons("thermal"), clock_reasons("hardware")
        active_bad = sorted(reasons & (thermal if braked else thermal | hardware))
        if active_bad:
            return context.fail(
                f"GPU{gpu.index} is being slowed right now by {', '.join(active_bad)}"
                f"{f' at {gpu.temperature_c:.0f} °C' if gpu.temperature_c is not None else ''}.", gpu=gpu,
                observed=active_bad, expected="no thermal or hardware slowdown",
                fix="Thermal: check fans, airflow, inlet temperature and heatsink seating. HW slowdown without a "
                    "thermal sub-reason: check PSU capacity and power cables (`nvidia-smi -q -d PERFORMANCE`).",
                refs=["nvidia-smi --help-query-gpu clocks_event_reasons", thresholds("power_brake")["source"]])
        at = f" ({gpu.temperature_c:.0f} °C)" if gpu.temperature_c is not None else ""
        brake_note = context.passed(
            f"GPU{gpu.index}: no thermal slowdown{at}; its HW slowdown is the platform power brake, judged by "
            "power.brake.", gpu=gpu,
            observed=sorted(reasons)) if braked else None
        temperature, slowdown = gpu.temperature_c, gpu.slowdown_temperature_c
        if temperature is None or slowdown is None:
            return brake_note
        if temperature >= slowdown:
            return context.fail(f"GPU{gpu.index} is at {temperature:.0f} °C, at or above its slowdown temperature "
                                f"{slowdown:.0f} °C.", gpu=gpu, observed=temperature, expected=f"< {slowdown:.0f}",
                                fix="Improve cooling before any run (fans, airflow, blanking panels).",
                                refs=[limits["source"]])
        if temperature >= slowdown - limits["warn_within_c"]:
            return context.warn(f"GPU{gpu.index} is at {temperature:.0f} °C, within {limits['warn_within_c']} °C of "
                                f"its slowdown temperature {slowdown:.0f} °C.", gpu=gpu, observed=temperature,
                                expected=f"< {slowdown - limits['warn_within_c']:.0f}",
                                fix="Check cooling; under load the GPU will throttle.", refs=[limits["source"]])
        return brake_note
    findings = per_gpu(context, judge,
                       "All {count} GPU(s) are below their slowdown temperature with no thermal or hardware slowdown.",
                   reported=lambda gpu: gpu.temperature_c is not None or gpu.clock_event_reasons is not None,
                   unreported="No temperatures or clock-event reasons reported.")
    capped = [gpu.index for gpu in context.gpus if "sw_power_cap" in (gpu.clock_event_reasons or ())]
    if capped and all(finding.status.value == "pass" for finding in findings):
        findings[0].message += (f" SW power cap active on GPU{', GPU'.join(map(str, capped))}: normal, the GPU holds "
                                "its power limit.")
    return findings
