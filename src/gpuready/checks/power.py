"""Power limits, the power budget against PSU and circuit, and current temperatures."""

from __future__ import annotations

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.clock_reasons import HARDWARE_REASONS, THERMAL_REASONS
from gpuready.facts.types import GpuFacts
from gpuready.knowledge import gpu_spec, thresholds
from gpuready.model import Finding


@check("power.limit", "Enforced power limit at the default")
def power_limit(context: CheckContext) -> list[Finding]:
    def judge(gpu: GpuFacts) -> Finding | None:
        limit, default = gpu.power_limit_w, gpu.power_default_limit_w
        if limit is None or default is None:
            return None
        if limit < default - 1:  # the limits are reported in whole or centi-watts
            return context.warn(
                f"GPU{gpu.index}'s power limit is {limit:.0f} W, below its default {default:.0f} W: it will run "
                f"slower under load (about {1 - limit / default:.0%} less power).", gpu=gpu,
                observed=f"{limit:.0f} W", expected=f"{default:.0f} W",
                fix=f"If not intended: `sudo nvidia-smi -i {gpu.index} -pl {default:.0f}` (check that PSU and cooling "
                    "allow it; see power.budget).", refs=["NVML nvmlDeviceGetEnforcedPowerLimit / DefaultLimit"])
        return None
    return per_gpu(context, judge, "All {count} GPU(s) run at their default power limit.",
                   reported=lambda gpu: gpu.power_limit_w is not None,
                   unreported="No power limits reported.")


@check("power.budget", "Power budget against PSU and circuit")
def power_budget(context: CheckContext) -> list[Finding]:
    budget = thresholds("power_budget")
    gpu_watts = 0.0
    unknown = []
    for gpu in context.gpus:
        watts = gpu.power_limit_w or (gpu_spec(gpu.name).get("tdp_w") if gpu_spec(gpu.name) else None)
        if watts is None:
            unknown.append(f"GPU{gpu.index}")
        gpu_watts += watts or 0
    sockets = context.facts.host.sockets or 1
    rest_watts = sockets * budget["non_gpu_w_per_socket"] + budget["platform_w"]
    total = gpu_watts + rest_watts
    assumptions = (f"GPUs {gpu_watts:,.0f} W (their enforced limits) + {sockets} CPU socket(s) × "
                   f"{budget['non_gpu_w_per_socket']} W + {budget['platform_w']} W platform (assumed)")
    observed = {"full_load_w": round(total), "assumptions": assumptions}
    findings = []
    psu, circuit = context.options.psu_watts, context.options.circuit_watts
    if psu:
        needed = total * budget["psu_headroom"]
        status = context.fail if psu < total else context.warn if psu < needed else context.passed
        findings.append(status(f"Full load ≈ {total:,.0f} W ({assumptions}); PSU {psu:,.0f} W "
                               f"{'cannot carry it' if psu < total else 'has less than 30% headroom' if psu < needed else 'has enough headroom'}.",
                               observed=observed, expected=f"PSU >= {needed:,.0f} W ({budget['psu_headroom']}× full load)",
                               fix=None if psu >= needed else "Use a larger PSU (or redundant PSUs), or lower GPU "
                               "power limits with `nvidia-smi -pl`.", refs=[budget["source"]]))
    if circuit:
        allowed = circuit * budget["circuit_continuous_fraction"]
        status = context.fail if total > allowed else context.passed
        findings.append(status(f"Full load ≈ {total:,.0f} W against {allowed:,.0f} W continuous on a {circuit:,.0f} W "
                               "circuit (80% rule).", observed=observed, expected=f"<= {allowed:,.0f} W",
                               fix=None if total <= allowed else "Move the machine to a higher-rated circuit or split "
                               "the load; lower power limits in the meantime.", refs=[budget["source"]]))
    if not findings:
        findings.append(context.passed(f"Full load ≈ {total:,.0f} W ({assumptions}); give --psu-watts / "
                                       "--circuit-watts to judge it.", observed=observed, refs=[budget["source"]]))
    if unknown:
        findings[-1].message += f" Power of {', '.join(unknown)} unknown (not counted)."
    return findings


@check("thermal.current", "Temperatures and thermal/hardware slowdown")
def thermal_current(context: CheckContext) -> list[Finding]:
    limits = thresholds("thermal")

    def judge(gpu: GpuFacts) -> Finding | None:
        reasons = gpu.clock_event_reasons or frozenset()
        active_bad = sorted(reasons & (THERMAL_REASONS | HARDWARE_REASONS))
        if active_bad:
            return context.fail(
                f"GPU{gpu.index} is being slowed right now by {', '.join(active_bad)}"
                f"{f' at {gpu.temperature_c:.0f} °C' if gpu.temperature_c is not None else ''}.", gpu=gpu,
                observed=active_bad, expected="no thermal or hardware slowdown",
                fix="Thermal: check fans, airflow, inlet temperature and heatsink seating. HW slowdown / power brake: "
                    "check PSU capacity and power cables (`nvidia-smi -q -d PERFORMANCE`).",
                refs=["nvidia-smi --help-query-gpu clocks_event_reasons"])
        temperature, slowdown = gpu.temperature_c, gpu.slowdown_temperature_c
        if temperature is None or slowdown is None:
            return None
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
        return None
    findings = per_gpu(context, judge,
                       "All {count} GPU(s) are below their slowdown temperature with no thermal or hardware slowdown.",
                   reported=lambda gpu: gpu.temperature_c is not None or gpu.clock_event_reasons is not None,
                   unreported="No temperatures or clock-event reasons reported.")
    capped = [gpu.index for gpu in context.gpus if "sw_power_cap" in (gpu.clock_event_reasons or ())]
    if capped and all(finding.status.value == "pass" for finding in findings):
        findings[0].message += (f" SW power cap active on GPU{', GPU'.join(map(str, capped))}: normal, the GPU holds "
                                "its power limit.")
    return findings
