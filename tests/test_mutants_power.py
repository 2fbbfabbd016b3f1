"""Tests that kill the mutants of checks/power.py that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh): power.limit (enforced limit vs default), power.budget
(full load against PSU and circuit), power.brake (HW Power Brake Slowdown) and thermal.current (temperatures and
thermal/hardware slowdown).

Published figures used: NVIDIA DGX H100/H200 User Guide, Power Specifications: 10.2 kW maximum system input for
8x H100/H200 SXM; GeForce RTX 4090 Total Graphics Power 450 W and RTX 3090 350 W (NVIDIA product specifications);
NEC 210.19/210.20: a continuous load may draw at most 80 % of the circuit rating. gpuready's own printed assumptions
for a machine that is no published platform (they are in every message, so the user sees them): 350 W per CPU socket,
100 W per GPU for fans/PCIe switches/NICs, 200 W platform base, PSU >= 1.3 x full load. Every total and message below
is worked out by hand in the docstring from those figures and the inputs.
"""

from __future__ import annotations

from gpuready.checks.registry import CheckOptions, registered_in_order, run_checks
from gpuready.facts.types import Facts, GpuFacts, HostFacts
from gpuready.model import Status

registered_in_order()  # imports every module of checks/: run_checks(only=…) does not

H100 = "NVIDIA H100 80GB HBM3"
H200 = "NVIDIA H200"
RTX_3090 = "NVIDIA GeForce RTX 3090"
RTX_4090 = "NVIDIA GeForce RTX 4090"
UNKNOWN = "Graphics Device"  # what nvidia-smi prints for a board it has no name for; no gpus.toml row matches
ESTIMATE_BASIS = "estimate: GPU limits + CPU sockets + per-GPU system allowance + platform base"
DGX_H100 = "published maximum of the NVIDIA DGX H100 / H200 (8x H100 SXM)"
ONE_3090 = ("GPUs 350 W (their enforced limits) + 1 CPU socket(s) x 350 W + 1 GPU(s) x 100 W system allowance "
            "(fans, PCIe switches, NICs) + 200 W platform (assumed)")
"""One RTX 3090 at its 350 W limit, one socket: 350 + 1 x 350 + 1 x 100 + 200 = 1,000 W."""


def _gpu(index: int, name: str | None, **fields) -> GpuFacts:
    return GpuFacts(index=index, bus_id=f"0000:{0x18 + index:02x}:00.0", name=name, **fields)


def _run(check_id: str, gpus: list[GpuFacts], sockets: int | None = None, **options):
    facts = Facts(gpus=gpus, host=HostFacts(sockets=sockets))
    return run_checks(facts, CheckOptions(**options), only=[check_id])


def _one(check_id: str, gpus: list[GpuFacts], sockets: int | None = None, **options):
    found = _run(check_id, gpus, sockets, **options)
    assert len(found) == 1, [(f.status.value, f.message) for f in found]
    return found[0]


def _one_3090(**options):
    """The 1,000 W estimate above (one RTX 3090 limited to its published 350 W, one CPU socket)."""
    return _run("power.budget", [_gpu(0, RTX_3090, power_limit_w=350, power_default_limit_w=350)], 1, **options)


def _dgx_h100(**options):
    """8x H100 SXM: the DGX H100 user guide's published maximum, 10,200 W."""
    return _run("power.budget", [_gpu(i, H100, power_limit_w=700) for i in range(8)], 2, **options)


# ------------------------------------------------------------------------------------------------ power.limit

def test_a_limit_below_the_default_says_how_much_less_power_in_percent():
    """500 W against a 700 W default: 1 − 500/700 = 200/700 = 28.6 % → 'about 29% less power'."""
    finding = _one("power.limit", [_gpu(0, H200, power_limit_w=500, power_default_limit_w=700)])
    assert (finding.status, finding.message_id) == (Status.WARN, "power.limit.below_default")
    assert finding.message == ("GPU0's power limit is 500 W, below its default 700 W: it will run slower under load "
                               "(about 29% less power).")
    assert (finding.observed, finding.expected) == ("500 W", "700 W")
    assert finding.refs[0] == "NVML nvmlDeviceGetEnforcedPowerLimit / DefaultLimit"
    assert "milliwatts" in finding.refs[1]


def test_a_limit_one_watt_under_the_default_is_the_default():
    """NVML reports milliwatts and nvidia-smi prints two decimals: within 1 W is the default. 699 W of 700 is the
    default (pass); 698 W is 2 W under (warn, 2/700 = 0.3 % → 'about 0% less')."""
    within = _one("power.limit", [_gpu(0, H200, power_limit_w=699, power_default_limit_w=700)])
    assert (within.status, within.message) == (Status.PASS, "All 1 GPU(s) run at their default power limit.")
    under = _one("power.limit", [_gpu(0, H200, power_limit_w=698, power_default_limit_w=700)])
    assert under.status == Status.WARN and under.message.endswith("(about 0% less power).")


# ------------------------------------------------------------------------------------ power.budget: estimates

def test_an_estimate_without_supply_figures_states_its_sum_and_sources():
    """No --psu-watts or --circuit: one pass stating the 1,000 W estimate, its basis and assumptions; cited are the
    budget's source (the NEC rule) and the per-GPU allowance's."""
    (finding,) = _one_3090()
    assert (finding.status, finding.message_id) == (Status.PASS, "power.budget.unjudged_supply_estimate")
    assert finding.message == f"Full load ≈ 1,000 W ({ONE_3090}); give --psu-watts / --circuit to judge it."
    assert finding.observed == {"full_load_w": 1000, "basis": ESTIMATE_BASIS, "assumptions": ONE_3090}
    assert len(finding.refs) == 2 and "NEC 210.19" in finding.refs[0]
    assert finding.refs[1].startswith("Unknown platforms: GPUs at their enforced limits")


def test_a_psu_between_the_load_and_its_headroom_warns_with_the_percentage():
    """1,000 W full load, PSU 1,150 W: carries it, but below 1.3 x 1,000 = 1,300 W → warn, 'less than 30% headroom'."""
    (finding,) = _one_3090(psu_watts=1150)
    assert (finding.status, finding.message_id) == (Status.WARN, "power.budget.psu_low_headroom_estimate")
    assert finding.message == f"Full load ≈ 1,000 W ({ONE_3090}); PSU 1,150 W has less than 30% headroom."
    assert finding.expected == "PSU >= 1,300 W (1.3x full load)"
    assert finding.observed["full_load_w"] == 1000


def test_psu_edges_of_an_estimate():
    """999 W < 1,000 W cannot carry it (fail); exactly 1,000 W carries it without headroom (warn); exactly 1,300 W
    = 1.3 x 1,000 has the headroom (pass, 'enough headroom')."""
    judged = {psu: _one_3090(psu_watts=psu)[0] for psu in (999, 1000, 1300)}
    assert [(f.status, f.message_id) for f in judged.values()] == [
        (Status.FAIL, "power.budget.psu_cannot_estimate"),
        (Status.WARN, "power.budget.psu_low_headroom_estimate"),
        (Status.PASS, "power.budget.psu_enough_headroom_estimate")]
    assert judged[999].message == f"Full load ≈ 1,000 W ({ONE_3090}); PSU 999 W cannot carry it."
    assert judged[1300].message == f"Full load ≈ 1,000 W ({ONE_3090}); PSU 1,300 W has enough headroom."


def test_a_circuit_is_held_to_eighty_percent_continuous():
    """NEC 210.19/210.20: 80 % continuous. 1,250 W circuit → 0.8 x 1,250 = 1,000 W allowed = the load: within (pass);
    1,249 W → 999.2 W allowed, prints 999 W < 1,000 W: over (fail)."""
    (within,) = _one_3090(circuit_watts=1250)
    (over,) = _one_3090(circuit_watts=1249)
    assert (within.status, within.message_id) == (Status.PASS, "power.budget.circuit_within_estimate")
    assert within.message == (f"Full load ≈ 1,000 W ({ONE_3090}) against 1,000 W continuous on a 1,250 W circuit "
                               "(80% rule).")
    assert within.expected == "<= 1,000 W"
    assert (over.status, over.message_id) == (Status.FAIL, "power.budget.circuit_over_estimate")
    assert over.message == (f"Full load ≈ 1,000 W ({ONE_3090}) against 999 W continuous on a 1,249 W circuit "
                            "(80% rule).")


def test_psu_then_circuit_in_that_order():
    """Both given: the PSU finding first (1,300 W: pass), then the circuit's (1,000 W circuit → 800 W < 1,000: fail)."""
    found = _one_3090(psu_watts=1300, circuit_watts=1000)
    assert [(f.status, f.message_id) for f in found] == [
        (Status.PASS, "power.budget.psu_enough_headroom_estimate"), (Status.FAIL, "power.budget.circuit_over_estimate")]
    assert found[1].expected == "<= 800 W"


def test_a_gpu_without_a_limit_counts_its_models_published_power():
    """An RTX 4090 whose limit was not reported: its published 450 W TGP stands in. One socket:
    450 + 350 + 100 + 200 = 1,100 W."""
    (finding,) = _run("power.budget", [_gpu(0, RTX_4090)], 1)
    assert finding.message == ("Full load ≈ 1,100 W (GPUs 450 W (their enforced limits) + 1 CPU socket(s) x 350 W + "
                               "1 GPU(s) x 100 W system allowance (fans, PCIe switches, NICs) + 200 W platform "
                               "(assumed)); give --psu-watts / --circuit to judge it.")


def test_gpus_of_unknown_power_are_named_and_not_counted():
    """GPU0 an RTX 3090 at 350 W; GPU1 and GPU2 unnamed boards without a limit: they add 0 W but count in the per-GPU
    allowance. One socket: 350 + 0 + 0 + 350 + 3 x 100 + 200 = 1,200 W; the last finding names 'GPU1, GPU2'."""
    gpus = [_gpu(0, RTX_3090, power_limit_w=350), _gpu(1, UNKNOWN), _gpu(2, UNKNOWN)]
    found = _run("power.budget", gpus, 1, psu_watts=2000)
    assert [(f.status, f.message_id) for f in found] == [
        (Status.PASS, "power.budget.psu_enough_headroom_estimate_unknown")]
    assert found[0].message == ("Full load ≈ 1,200 W (GPUs 350 W (their enforced limits) + 1 CPU socket(s) x 350 W + "
                                "3 GPU(s) x 100 W system allowance (fans, PCIe switches, NICs) + 200 W platform "
                                "(assumed)); PSU 2,000 W has enough headroom. Power of GPU1, GPU2 unknown "
                                "(not counted).")
    assert found[0].observed["full_load_w"] == 1200


def test_no_known_power_at_all_is_not_judged():
    """Two unnamed boards without limits: nothing to add up → one skip."""
    finding = _one("power.budget", [_gpu(0, UNKNOWN), _gpu(1, UNKNOWN)], psu_watts=2000)
    assert (finding.status, finding.message_id) == (Status.SKIP, "power.budget.unjudged")


def test_a_mix_of_h100_and_h200_is_no_published_platform():
    """DGX H100/H200 has eight GPUs of one model; 4x H100 + 4x H200 is no published platform, so it is estimated:
    8 x 700 W = 5,600 W + 2 sockets x 350 + 8 x 100 + 200 = 7,300 W."""
    gpus = [_gpu(i, H100 if i < 4 else H200, power_limit_w=700) for i in range(8)]
    (finding,) = _run("power.budget", gpus, 2)
    assert finding.message_id == "power.budget.unjudged_supply_estimate"
    assert finding.message == ("Full load ≈ 7,300 W (GPUs 5,600 W (their enforced limits) + 2 CPU socket(s) x 350 W + "
                               "8 GPU(s) x 100 W system allowance (fans, PCIe switches, NICs) + 200 W platform "
                               "(assumed)); give --psu-watts / --circuit to judge it.")


# ------------------------------------------------------------------------------ power.budget: a published platform

def test_a_dgx_h100_is_judged_by_its_published_maximum():
    """8x H100 SXM is a DGX H100: 10.2 kW maximum (user guide), whatever the GPUs' limits; the PSU must carry that
    maximum itself (1.0x: it is already the peak)."""
    (finding,) = _dgx_h100()
    assert (finding.status, finding.message_id) == (Status.PASS, "power.budget.unjudged_supply_platform")
    assert finding.message == (f"Full load ≈ 10,200 W ({DGX_H100}: 10,200 W); give --psu-watts / --circuit to judge "
                               "it.")
    assert finding.observed == {"full_load_w": 10200, "basis": DGX_H100, "assumptions": f"{DGX_H100}: 10,200 W"}
    assert len(finding.refs) == 3 and "10.2 kW max" in finding.refs[0] and "NEC 210.19" in finding.refs[2]


def test_a_psu_of_exactly_the_published_maximum_covers_it():
    """PSU 10,200 W = the maximum: covers it (pass; no headroom asked of a published maximum); 10,199 W cannot."""
    (covers,) = _dgx_h100(psu_watts=10200)
    (short,) = _dgx_h100(psu_watts=10199)
    assert (covers.status, covers.message_id) == (Status.PASS, "power.budget.psu_covers_platform")
    assert covers.message == f"Full load ≈ 10,200 W ({DGX_H100}: 10,200 W); PSU 10,200 W covers it."
    assert covers.expected == "PSU >= 10,200 W (1.0x full load)"
    assert (short.status, short.message_id) == (Status.FAIL, "power.budget.psu_cannot_platform")


def test_a_dgx_h100_on_a_circuit_at_and_over_eighty_percent():
    """0.8 x 12,750 W = 10,200 W: exactly the maximum, within (pass); 0.8 x 12,000 = 9,600 W < 10,200: over (fail)."""
    (within,) = _dgx_h100(circuit_watts=12750)
    (over,) = _dgx_h100(circuit_watts=12000)
    assert (within.status, within.message_id) == (Status.PASS, "power.budget.circuit_within_platform")
    assert (over.status, over.message_id) == (Status.FAIL, "power.budget.circuit_over_platform")
    assert over.message == (f"Full load ≈ 10,200 W ({DGX_H100}: 10,200 W) against 9,600 W continuous on a 12,000 W "
                            "circuit (80% rule).")
    assert over.expected == "<= 9,600 W"


# ----------------------------------------------------------------------------------------------------- power.brake

def test_a_power_brake_without_heat_fails_and_shows_the_hardware_reasons():
    """HW Slowdown with its Power Brake sub-reason (NVML 0x80) and no HW Thermal Slowdown: the platform brakes. The
    observed reasons are the hardware/thermal ones only (the SW power cap is policy, left out), sorted."""
    reasons = frozenset({"hw_slowdown", "hw_power_brake_slowdown", "sw_power_cap"})
    finding = _one("power.brake", [_gpu(0, H100, clock_event_reasons=reasons)])
    assert (finding.status, finding.message_id) == (Status.FAIL, "power.brake.braked")
    assert finding.observed == ["hw_power_brake_slowdown", "hw_slowdown"]
    assert finding.expected == "no HW power brake slowdown"
    assert len(finding.refs) == 1 and "HW Power Brake Slowdown (0x80)" in finding.refs[0]


def test_a_power_brake_with_thermal_slowdown_is_thermal():
    """Power brake and HW Thermal Slowdown together: heat is the cause. power.brake passes with a note (all reasons
    sorted); thermal.current fails naming all three hardware/thermal reasons, alphabetically, at 80 °C."""
    reasons = frozenset({"hw_slowdown", "hw_power_brake_slowdown", "hw_thermal_slowdown"})
    gpu = _gpu(0, H100, clock_event_reasons=reasons, temperature_c=80, slowdown_temperature_c=89)
    brake = _one("power.brake", [gpu])
    assert (brake.status, brake.message) == (
        Status.PASS, "GPU0 shows the power brake together with HW thermal slowdown: judged as thermal by "
                     "thermal.current.")
    assert brake.observed == ["hw_power_brake_slowdown", "hw_slowdown", "hw_thermal_slowdown"]
    thermal = _one("thermal.current", [gpu])
    assert (thermal.status, thermal.message) == (
        Status.FAIL, "GPU0 is being slowed right now by hw_power_brake_slowdown, hw_slowdown, hw_thermal_slowdown "
                     "at 80 °C.")


# ------------------------------------------------------------------------------------------------- thermal.current

def test_a_slowed_gpu_names_its_reasons_and_cites_the_query_help():
    """SW Thermal Slowdown and HW Slowdown at 80 °C: 'hw_slowdown, sw_thermal_slowdown' (sorted)."""
    gpu = _gpu(0, H100, temperature_c=80, slowdown_temperature_c=89,
               clock_event_reasons=frozenset({"sw_thermal_slowdown", "hw_slowdown"}))
    finding = _one("thermal.current", [gpu])
    assert (finding.status, finding.message_id) == (Status.FAIL, "thermal.current.slowed_at")
    assert finding.message == "GPU0 is being slowed right now by hw_slowdown, sw_thermal_slowdown at 80 °C."
    assert finding.observed == ["hw_slowdown", "sw_thermal_slowdown"]
    assert finding.expected == "no thermal or hardware slowdown"
    assert finding.refs[0] == "nvidia-smi --help-query-gpu clocks_event_reasons"
    assert "HW Power Brake Slowdown (0x80)" in finding.refs[1]


def test_temperature_edges_against_the_slowdown_temperature():
    """Slowdown at 89 °C, warn margin 5 °C: 89 is at the slowdown (fail, expected '< 89'); 89 − 5 = 84 is within
    the margin (warn, expected '< 84'); 83 is below it (pass)."""
    def judged(temperature):
        return _one("thermal.current", [_gpu(0, H200, temperature_c=temperature, slowdown_temperature_c=89,
                                             clock_event_reasons=frozenset())])
    hot, warm, cool = judged(89), judged(84), judged(83)
    assert (hot.status, hot.message, hot.expected) == (
        Status.FAIL, "GPU0 is at 89 °C, at or above its slowdown temperature 89 °C.", "< 89")
    assert (warm.status, warm.message, warm.expected) == (
        Status.WARN, "GPU0 is at 84 °C, within 5 °C of its slowdown temperature 89 °C.", "< 84")
    assert cool.status == Status.PASS


ALL_COOL = "All 3 GPU(s) are below their slowdown temperature with no thermal or hardware slowdown."


def _three(reasons: list[set[str]], temperatures=(40, 40, 40)) -> list[GpuFacts]:
    return [_gpu(i, H200, temperature_c=t, slowdown_temperature_c=89, clock_event_reasons=frozenset(r))
            for i, (r, t) in enumerate(zip(reasons, temperatures))]


def test_a_sw_power_cap_is_named_as_normal_on_the_gpus_that_have_it():
    """GPU0 and GPU2 hold their power limit (SW Power Cap), all cool: the pass names 'GPU0, GPU2' as normal."""
    finding = _one("thermal.current", _three([{"sw_power_cap"}, set(), {"sw_power_cap"}]))
    assert finding.status == Status.PASS
    assert finding.message == (f"{ALL_COOL} SW power cap active on GPU0, GPU2: normal, the GPU holds its power "
                               "limit.")


def test_without_a_power_cap_the_pass_says_nothing_of_it():
    finding = _one("thermal.current", _three([set(), set(), set()]))
    assert (finding.status, finding.message) == (Status.PASS, ALL_COOL)


def test_a_power_cap_note_is_not_added_to_a_warning():
    """GPU0 capped but at 86 °C (89 − 5 = 84 ≤ 86 < 89): the warning stands alone, no power-cap note."""
    finding = _one("thermal.current", _three([{"sw_power_cap"}, set(), set()], (86, 40, 40)))
    assert (finding.status, finding.message) == (
        Status.WARN, "GPU0 is at 86 °C, within 5 °C of its slowdown temperature 89 °C.")
