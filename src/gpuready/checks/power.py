"""Power limits, the power budget against PSU and circuit, and current temperatures."""

from __future__ import annotations

from dataclasses import replace

from gpuready.checks.registry import CheckContext, check, per_gpu
from gpuready.facts.types import GpuFacts
from gpuready.i18n import finding_text, said, said_again
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


@check("power.limit")
def power_limit(context: CheckContext) -> list[Finding]:
    """Enforced power limit at the default."""
    tolerance = thresholds("power_limit")

    def judge(gpu: GpuFacts) -> Finding | None:
        limit, default = gpu.power_limit_w, gpu.power_default_limit_w
        if limit is not None and default is None:
            return _below_reference(context, gpu, limit)
        if limit is None or default is None:
            return None
        if limit < default - tolerance["tolerance_w"]:
            return context.warn(
                said("power.limit.below_default", index=gpu.index, limit_w=limit, default_w=default,
                     cut=1 - limit / default), gpu=gpu, observed=f"{limit:.0f} W", expected=f"{default:.0f} W",
                refs=["NVML nvmlDeviceGetEnforcedPowerLimit / DefaultLimit",
                                                          tolerance["source"]])
        return None
    return per_gpu(context, judge, said("power.limit.all_good"),
                   reported=lambda gpu: gpu.power_limit_w is not None,
                   unreported=said("power.limit.unreported"))


def _below_reference(context: CheckContext, gpu: GpuFacts, limit: float) -> Finding | None:
    """Only the enforced cap is known (a plain `nvidia-smi` table prints `Pwr:Usage/Cap`, not the default): a cap far
    below the model's reference board power (gpus.toml `tdp_w`) is a cap set below the default; partner boards that
    default a little lower stay inside the margin (thresholds.toml `power_limit_reference`)."""
    spec = gpu_spec(gpu.name)
    reference = spec.get("tdp_w") if spec else None
    margin = thresholds("power_limit_reference")
    if not reference or limit >= reference * margin["min_fraction"]:
        return None
    return context.warn(
        said("power.limit.below_reference", index=gpu.index, limit_w=limit, reference_w=reference, model=spec.model,
             cut=1 - limit / reference), gpu=gpu, observed=f"{limit:.0f} W",
        expected=f"about {reference:.0f} W (reference board power)",
        refs=["nvidia-smi(1): Pwr:Usage/Cap is the enforced power limit", spec.get("source") or "gpus.toml",
              margin["source"]])


def _platform(context: CheckContext) -> dict | None:
    """The published platform these GPUs make up (8x H100 SXM → DGX H100/H200), or None."""
    models = {spec.model if (spec := gpu_spec(gpu.name)) else None for gpu in context.gpus}
    if len(models) != 1 or None in models:
        return None
    return platform_spec(models.pop(), len(context.gpus))


@check("power.budget")
def power_budget(context: CheckContext) -> list[Finding]:
    """Power budget against PSU and circuit."""
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
        reckoned = {"basis": "platform", "platform": platform["name"], "count": len(gpus),
                    "model": gpu_spec(gpus[0].name).model}
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
            return [context.skip(said("power.budget.unjudged"))]
        total = node_full_load_w(gpu_watts, len(gpus), sockets)
        headroom = budget["psu_headroom"]
        basis = "estimate: GPU limits + CPU sockets + per-GPU system allowance + platform base"
        assumptions = (f"GPUs {gpu_watts:,.0f} W (their enforced limits) + {sockets} CPU socket(s) x "
                       f"{budget['non_gpu_w_per_socket']} W + {len(gpus)} GPU(s) x {scaling['per_gpu_system_w']} W "
                       f"system allowance (fans, PCIe switches, NICs) + {budget['platform_w']} W platform (assumed)")
        reckoned = {"basis": "estimate", "gpu_w": gpu_watts, "sockets": sockets, "socket_w": budget["non_gpu_w_per_socket"],
                    "count": len(gpus), "per_gpu_w": scaling["per_gpu_system_w"], "platform_w": budget["platform_w"]}
        refs = [budget["source"], scaling["source"]]
    observed = {"full_load_w": round(total), "basis": basis, "assumptions": assumptions}
    kind = reckoned.pop("basis")  # the catalogue variant: a published platform maximum, or an estimate
    findings = []
    psu, circuit = context.options.psu_watts, context.options.circuit_watts
    if psu:
        needed = total * headroom
        status = context.fail if psu < total else context.warn if psu < needed else context.passed
        verdict = ("cannot" if psu < total else "low_headroom" if psu < needed
                   else "enough_headroom" if headroom > 1 else "covers")
        findings.append(status(said(f"power.budget.psu_{verdict}_{kind}", **reckoned, total_w=total, psu_w=psu,
                                    headroom_pct=headroom - 1),
                               observed=observed, expected=f"PSU >= {needed:,.0f} W ({headroom}x full load)",
                               refs=refs))
    if circuit:
        allowed = circuit * budget["circuit_continuous_fraction"]
        status = context.fail if total > allowed else context.passed
        findings.append(status(said(f"power.budget.circuit_{'over' if total > allowed else 'within'}_{kind}",
                                    **reckoned, total_w=total, allowed_w=allowed, circuit_w=circuit),
                               observed=observed, expected=f"<= {allowed:,.0f} W", refs=refs))
    if not findings:
        findings.append(context.passed(said(f"power.budget.unjudged_supply_{kind}", **reckoned, total_w=total),
                                       observed=observed, refs=refs))
    if unknown:  # the last finding says so: its `_unknown` variant
        last = findings[-1]
        findings[-1] = replace(last, **finding_text(said(f"{last.message_id}_unknown", **last.message_values,
                                                         unknown=", ".join(unknown))))
    return findings


def _power_braked(reasons: frozenset[str]) -> bool:
    """The platform is braking the GPU: HW Power Brake Slowdown active while HW Thermal Slowdown is not (nvidia-smi
    prints both under HW Slowdown; with the thermal one, heat is the cause)."""
    return bool(reasons & clock_reasons("power_brake")) and "hw_thermal_slowdown" not in reasons


@check("power.brake", needs_gpus=False)
def power_brake(context: CheckContext) -> list[Finding]:
    """No platform power brake on the GPUs."""
    ref = thresholds("power_brake")["source"]
    # A `-q` section pasted without its GPU header (a `Clocks Event Reasons` block alone) is still about a GPU.
    unnamed = [context.fail(said("power.brake.braked_unnamed"), observed=sorted(gpu.clock_event_reasons or ()),
                            expected="no HW power brake slowdown", refs=[ref])
               for gpu in context.facts.unnamed_gpus if _power_braked(gpu.clock_event_reasons or frozenset())]
    if not context.gpus:
        return unnamed or [context.skip(said("power.brake.unreported"))]

    def judge(gpu: GpuFacts) -> Finding | None:
        reasons = gpu.clock_event_reasons or frozenset()
        if _power_braked(reasons):
            return context.fail(
                said("power.brake.braked", index=gpu.index), gpu=gpu,
                observed=sorted(reasons & (clock_reasons("hardware") | clock_reasons("thermal"))),
                expected="no HW power brake slowdown", refs=[ref])
        if reasons & clock_reasons("power_brake"):
            return context.passed(said("power.brake.with_thermal", index=gpu.index), gpu=gpu,
                                  observed=sorted(reasons), refs=[ref])
        return None
    named = per_gpu(context, judge, said("power.brake.all_good"),
                    reported=lambda gpu: gpu.clock_event_reasons is not None,
                    unreported=said("power.brake.unreported"))
    return unnamed + [finding for finding in named if not unnamed or finding.status.value not in ("pass", "skip")]


def _slowed(reasons: frozenset[str]) -> list[str]:
    """The reasons that slow a GPU by heat or the board (a power brake without heat is power.brake's)."""
    thermal, hardware = clock_reasons("thermal"), clock_reasons("hardware")
    return sorted(reasons & (thermal if _power_braked(reasons) else thermal | hardware))


@check("thermal.current", needs_gpus=False)
def thermal_current(context: CheckContext) -> list[Finding]:
    """Temperatures and thermal/hardware slowdown."""
    limits = thresholds("thermal")
    # A `-q` section pasted without its GPU header (a `Clocks Event Reasons` block alone) is still about a GPU.
    unnamed = [context.fail(said("thermal.current.slowed_unnamed", reasons=", ".join(slowed)), observed=slowed,
                            expected="no thermal or hardware slowdown",
                            refs=["nvidia-smi --help-query-gpu clocks_event_reasons"])
               for gpu in context.facts.unnamed_gpus if (slowed := _slowed(gpu.clock_event_reasons or frozenset()))]
    if not context.gpus:
        return unnamed or [context.skip(said("thermal.current.unreported"))]

    def judge(gpu: GpuFacts) -> Finding | None:
        reasons = gpu.clock_event_reasons or frozenset()
        braked = _power_braked(reasons)
        # A power brake (HW Slowdown whose sub-reason is the power brake, not heat) is power.brake's finding.
        thermal, hardware = clock_reasons("thermal"), clock_reasons("hardware")
        active_bad = sorted(reasons & (thermal if braked else thermal | hardware))
        if active_bad:
            return context.fail(
                said(f"thermal.current.slowed{'' if gpu.temperature_c is None else '_at'}", index=gpu.index,
                     reasons=", ".join(active_bad), temperature_c=gpu.temperature_c), gpu=gpu,
                observed=active_bad, expected="no thermal or hardware slowdown",
                refs=["nvidia-smi --help-query-gpu clocks_event_reasons", thresholds("power_brake")["source"]])
        at = "" if gpu.temperature_c is None else "_at"  # with the temperature
        brake_note = context.passed(
            said(f"thermal.current.brake_note{at}", index=gpu.index, temperature_c=gpu.temperature_c), gpu=gpu,
            observed=sorted(reasons)) if braked else None
        temperature, slowdown = gpu.temperature_c, gpu.slowdown_temperature_c
        if temperature is None or slowdown is None:
            return brake_note
        if temperature >= slowdown:
            return context.fail(said("thermal.current.hot", index=gpu.index, temperature_c=temperature,
                                     slowdown_c=slowdown), gpu=gpu, observed=temperature, expected=f"< {slowdown:.0f}",
                                refs=[limits["source"]])
        if temperature >= slowdown - limits["warn_within_c"]:
            return context.warn(said("thermal.current.warm", index=gpu.index, temperature_c=temperature,
                                     within_c=limits["warn_within_c"], slowdown_c=slowdown), gpu=gpu,
                                observed=temperature, expected=f"< {slowdown - limits['warn_within_c']:.0f}",
                                refs=[limits["source"]])
        return brake_note
    findings = per_gpu(context, judge,
                       said("thermal.current.all_good"),
                   reported=lambda gpu: gpu.temperature_c is not None or gpu.clock_event_reasons is not None,
                   unreported=said("thermal.current.unreported"))
    capped = [gpu.index for gpu in context.gpus if "sw_power_cap" in (gpu.clock_event_reasons or ())]
    if capped and all(finding.status.value == "pass" for finding in findings):
        gpus = f"GPU{', GPU'.join(map(str, capped))}"
        first = findings[0]
        findings[0] = replace(first, **finding_text(said("thermal.current.sw_cap", judged=said_again(first),
                                                         gpus=gpus)))
    return unnamed + [finding for finding in findings if not unnamed or finding.status.value not in ("pass", "skip")]
