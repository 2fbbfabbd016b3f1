"""Burn-in results and telemetry → findings and measurements. Pure: tests feed recorded series."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpuready.checks.kernel_judge import nvml_xid_findings
from gpuready.facts.clock_reasons import REASON_BITS
from gpuready.knowledge import clock_reasons, thresholds
from gpuready.model import Finding, GpuRef, Measurement, Status, Subject
from gpuready.telemetry import Telemetry
from gpuready.runner.watchdog import RankFailure

THERMAL_MASK = sum(REASON_BITS[name] for name in clock_reasons("thermal"))
HARDWARE_MASK = sum(REASON_BITS[name] for name in clock_reasons("hardware"))
POWER_CAP_MASK = REASON_BITS["sw_power_cap"]


@dataclass
class BurnGpu:
    """One burned GPU: its rank's result, its NVML index (telemetry key) and identity."""
    rank: int
    nvml_index: int | None
    identity: dict[str, Any]
    result: dict[str, Any] | None
    slowdown_c: float | None = None
    power_limit_w: float | None = None
    """Enforced power limit at the start (facts); telemetry's `power_limit_w` is preferred where sampled."""
    power_default_limit_w: float | None = None


def _share(mask_values: list[int], mask: int) -> float:
    return sum(1 for value in mask_values if value & mask) / len(mask_values) if mask_values else 0.0


FAILURE_CAUSES = {
    "out_of_memory": ("CUDA ran out of memory", "Free the GPU (see who holds its memory: `nvidia-smi`) and rerun."),
    "illegal_address": ("an illegal memory access (a fault on the GPU)",
                        "Check `dmesg` for Xid 13/31/43; rerun; RMA if it repeats on this GPU only."),
    "launch_failure": ("a kernel launch failure", "Check `dmesg` for Xid; rerun; RMA if it repeats on this GPU only."),
    "device_lost": ("the GPU was lost or became unusable",
                    "Check `dmesg` for Xid 79/119/48 and the GPU's power and seating; reboot; RMA if it repeats."),
    "other": ("an exception in the worker", "Read the worker log in --log-dir; rerun."),
}
_CAUSE_PATTERNS = [
    ("out_of_memory", ("out of memory", "outofmemoryerror", "cudaerrormemoryallocation")),
    ("illegal_address", ("illegal memory access", "illegal address", "misaligned address")),
    ("launch_failure", ("launch failure", "launch timed out", "too many resources requested for launch")),
    ("device_lost", ("fallen off the bus", "device lost", "gpu is lost", "no cuda-capable device",
                     "uncorrectable ecc", "ecc error", "cuda-capable device(s) is/are busy or unavailable",
                     "device not ready", "unknown error", "cudaerrordevicesunavailable")),
]


def classify_failure(error: str) -> str:
    """A worker's exception text → out_of_memory | illegal_address | launch_failure | device_lost | other."""
    text = (error or "").lower()
    for cause, patterns in _CAUSE_PATTERNS:
        if any(pattern in text for pattern in patterns):
            return cause
    return "other"


class BurnJudge:
    def __init__(self, host: str, gpus: list[BurnGpu], telemetry: Telemetry | None,
                 failures: list[RankFailure], self_test: bool = False, users: dict | None = None,
                 checked_sharing: bool = False, exclusive: bool = False):
        self.host, self.gpus, self.telemetry, self.failures = host, gpus, telemetry, failures
        self.users = users
        """NVML index → GpuUsers (facts/gpu_users.py): other processes seen on the burned GPUs."""
        self.checked_sharing = checked_sharing or users is not None
        self.exclusive = exclusive
        self.self_test = self_test
        self.limits = thresholds("burn")
        self.findings: list[Finding] = []
        self.measurements: list[Measurement] = []

    def subject(self, gpu: BurnGpu) -> Subject:
        ref = GpuRef(index=gpu.nvml_index if gpu.nvml_index is not None else gpu.rank,
                     bus_id=gpu.identity.get("bus_id"), uuid=gpu.identity.get("uuid"))
        return Subject(host=self.host, gpu=ref if gpu.identity else None, rank=gpu.rank)

    def add(self, check_id: str, status: Status, gpu: BurnGpu | None, message: str, **kwargs: Any) -> None:
        subject = self.subject(gpu) if gpu else Subject(host=self.host)
        self.findings.append(Finding(check_id=check_id, status=status, subject=subject, message=message, **kwargs))

    def window(self, gpu: BurnGpu, skip_first_s: float = 0.0) -> tuple[float, float] | None:
        """The GEMM window in telemetry time (seconds since sampling began)."""
        result = gpu.result or {}
        if self.telemetry is None or "window_start" not in result:
            return None
        start = result["window_start"] - self.telemetry.started_at + skip_first_s
        end = result.get("window_end", start) - self.telemetry.started_at
        return (start, end) if end > start else None

    def judge(self) -> None:
        from gpuready.verbs.sharing import blame_sharing, sharing_findings
        if self.checked_sharing:
            self.findings.extend(sharing_findings("burn", self.host, self.users, self.exclusive))
        self._errors()
        self._lost()
        self._throughput()
        if self.telemetry is not None:
            self._xid()
            for gpu in self.gpus:
                if gpu.nvml_index is not None:
                    self._telemetry(gpu)
        blame_sharing(self.findings, self.users)

    # -- correctness --------------------------------------------------------------------------
    def _errors(self) -> None:
        checksums: dict[tuple[str, str], list[BurnGpu]] = defaultdict(list)
        for gpu in self.gpus:
            result = gpu.result
            if not result or "iterations" not in result:
                continue
            memory_wrong = result.get("memory", {}).get("wrong_words", 0)
            errors = result.get("errors", [])
            if errors or memory_wrong:
                first = errors[0] if errors else None
                detail = (f"{len(errors)} checked product(s) wrong, first at GEMM {first['iteration']} with "
                          f"{first['elements']} element(s) off by up to {first['max_abs_error']:.3g} "
                          f"(tolerance {result['tolerance_abs']:.3g})") if first else ""
                if memory_wrong:
                    detail += ("; " if detail else "") + f"{memory_wrong} memory word(s) read back wrong"
                self.add("burn.errors", Status.FAIL, gpu,
                         f"Silent errors on {self.subject(gpu).label()}: "
                         f"{detail}." + (" (--self-test: the deliberate fault was caught.)" if self.self_test else ""),
                         observed={"gemm_errors": errors[:10], "memory_wrong_words": memory_wrong}, expected=0,
                         fix="Take the GPU out of service; rerun `gpuready burn` to confirm, then `dcgmi diag -r 3`; "
                             "RMA if errors repeat.", refs=["gpu-burn method: compare against a reference product"])
            else:
                self.add("burn.errors", Status.PASS, gpu,
                         f"{result['iterations']:,} {result['dtype']} GEMMs ({result['n']}³) matched the reference; "
                         f"memory pattern over {result['memory']['bytes'] / 2**30:,.1f} GiB read back intact"
                         + (f" ({result['memory']['sizing']}: {result['memory']['free_bytes_at_start'] / 2**30:,.1f} "
                            "GiB free)." if result["memory"].get("free_bytes_at_start") else "."),
                         observed=0, expected=0)
            checksums[(gpu.identity.get("name") or "cpu", result["dtype"])].append(gpu)
        for (name, dtype), group in checksums.items():
            values = {round(gpu.result["reference_checksum"], 3) for gpu in group}
            if len(group) > 1 and len(values) > 1:
                majority = statistics.mode(round(gpu.result["reference_checksum"], 3) for gpu in group)
                for gpu in group:
                    if round(gpu.result["reference_checksum"], 3) != majority:
                        self.add("burn.errors", Status.FAIL, gpu,
                                 f"The reference product differs from the other {name} GPUs' (checksum "
                                 f"{gpu.result['reference_checksum']:.6g} vs {majority:.6g}).",
                                 observed=gpu.result["reference_checksum"], expected=majority,
                                 fix="Identical GPUs must compute identical products: test this GPU alone; RMA if "
                                     "confirmed.")

    def _lost(self) -> None:
        lost_ranks = {failure.rank: failure for failure in self.failures if failure.kind in ("hang", "exit", "start")}
        for gpu in self.gpus:
            telemetry_lost = self.telemetry is not None and gpu.nvml_index in self.telemetry.lost_at
            failure = lost_ranks.get(gpu.rank)
            if failure or telemetry_lost:
                how = failure.detail if failure else "stopped answering NVML"
                self.add("burn.gpu_lost", Status.FAIL, gpu,
                         f"GPU {gpu.identity.get('bus_id') or gpu.rank} was lost during the burn: {how}; the other "
                         "GPUs went on.", observed=how, expected="answers until the end",
                         fix="Check `dmesg` for Xid 79/119 and the GPU's power and seating; reboot; RMA if it repeats.")
        for failure in self.failures:
            if failure.kind == "workload":
                gpu = next((gpu for gpu in self.gpus if gpu.rank == failure.rank), None)
                error = ((gpu.result or {}).get("error") if gpu else None) or failure.detail
                self._failed(gpu, str(error))

    def _failed(self, gpu: BurnGpu | None, error: str) -> None:
        """burn.failed: the worker raised (not a wrong result: those are burn.errors), with its cause."""
        from gpuready.verbs.sharing import users_of
        cause = classify_failure(error)
        text, fix = FAILURE_CAUSES[cause]
        message = f"The burn worker stopped: {text} ({error.splitlines()[0][:300] if error else 'no detail'})."
        observed: dict[str, Any] = {"cause": cause, "error": error}
        if cause == "out_of_memory":
            entry = users_of(self.subject(gpu).gpu, self.users or {}) if gpu else None
            if entry is not None and entry.processes:
                message += f" Other processes hold memory on this GPU: {entry.describe()}."
                observed["holders"] = entry.processes
            elif self.users is not None:
                message += " No other compute process was seen on this GPU."
        self.add("burn.failed", Status.FAIL, gpu, message, observed=observed, expected="no exception", fix=fix)

    def _throughput(self) -> None:
        figures = {gpu.rank: gpu.result["tflops"] for gpu in self.gpus if gpu.result and "tflops" in gpu.result}
        if not figures:
            return
        best = max(figures.values())
        for gpu in self.gpus:
            if gpu.rank not in figures:
                continue
            result = gpu.result
            self.measurements.append(Measurement(
                name=f"burn_tflops_{result['dtype']}", subject=self.subject(gpu), value=round(figures[gpu.rank], 2),
                unit="tflops", samples=[round(value, 2) for _, value in result.get("intervals", [])],
                method={"n": result["n"], "dtype": result["dtype"], "window_s": round(
                    result["window_end"] - result["window_start"], 1), "gemms": result["iterations"],
                    "checked_every": 20, "counting": "GEMM work in the GEMM window only",
                    **({"partial": "the run was stopped before the window ended"} if result.get("partial") else {})}))
            self._against_datasheet(gpu, figures[gpu.rank])
            if len(figures) > 1 and figures[gpu.rank] < best * (1 - self.limits["straggler_fraction"]):
                self.add("burn.straggler", Status.WARN, gpu,
                         f"{figures[gpu.rank]:,.0f} TFLOP/s sustained, {1 - figures[gpu.rank] / best:.0%} below the "
                         f"best GPU ({best:,.0f}).", observed=round(figures[gpu.rank], 1), expected=round(best, 1),
                         fix="Compare its clocks, power and temperature series with its peers'.",
                         refs=[self.limits["source"]])

    def expected_tflops(self, gpu: BurnGpu) -> tuple[float, dict[str, Any]] | None:
        """Datasheet dense peak × sustained-load efficiency × (enforced / default power limit where below)."""
        from gpuready.knowledge import gpu_spec
        result = gpu.result or {}
        dtype = result.get("dtype")
        spec = gpu_spec(gpu.identity.get("name"))
        if spec is None or not dtype:
            return None
        peak = spec.get(f"peak_tflops_{dtype}_dense") or spec.get(f"peak_tflops_{dtype}")
        if not peak:
            return None
        table = thresholds("burn_throughput")
        measured = dtype in table["measured"]
        efficiency = table.get(dtype, table["default"]) if measured else table["default"]
        enforced = self._enforced_limit(gpu)
        default = gpu.power_default_limit_w
        scale = enforced / default if enforced and default and enforced < default else 1.0
        basis = {"peak_tflops_dense": peak, "efficiency": efficiency, "power_scale": round(scale, 3),
                 "enforced_power_limit_w": enforced, "default_power_limit_w": default,
                 "expected_source": (table["source"] if measured else "unmeasured") ,
                 "peak_source": spec.source}
        return peak * efficiency * scale, basis

    def _enforced_limit(self, gpu: BurnGpu) -> float | None:
        if self.telemetry is not None and gpu.nvml_index is not None:
            limits = [sample.get("power_limit_w") for _, sample in self.telemetry.samples.get(gpu.nvml_index, [])
                      if isinstance(sample.get("power_limit_w"), (int, float))]
            if limits:
                return float(min(limits))
        return gpu.power_limit_w

    def _against_datasheet(self, gpu: BurnGpu, value: float) -> None:
        """burn.throughput_low: warn below 90 %, fail below 50 % of what the GPU should sustain."""
        found = self.expected_tflops(gpu)
        if found is None:
            return
        expected, basis = found
        table = thresholds("burn_throughput")
        measurement = self.measurements[-1]
        measurement.expected = round(expected, 1)
        measurement.expected_source = basis["expected_source"]
        measurement.method = {**measurement.method, "expected_basis": basis}
        fraction = value / expected
        status = (Status.FAIL if fraction < table["low_fail_fraction"] else
                  Status.WARN if fraction < table["low_warn_fraction"] else Status.PASS)
        dtype = gpu.result["dtype"]
        how = (f"{basis['peak_tflops_dense']:,.1f} dense × {basis['efficiency']:.2f} sustained"
               + (f" × {basis['power_scale']:.2f} power limit" if basis["power_scale"] < 1 else "")
               + ("" if basis["expected_source"] != "unmeasured" else f"; the {dtype} efficiency is unmeasured, "
                  "a conservative default"))
        self.add("burn.throughput_low", status, gpu,
                 f"{value:,.1f} {dtype} TFLOP/s sustained, {fraction:.0%} of the {expected:,.1f} expected ({how}).",
                 observed=round(value, 1), expected=round(expected, 1),
                 fix=None if status == Status.PASS else
                 "Check its clocks, throttle reasons, power limit and temperature series; another process on the GPU "
                 "(burn.gpu_shared) also lowers it.",
                 refs=[basis["expected_source"] if basis["expected_source"] != "unmeasured" else table["source"],
                       basis["peak_source"]])

    # -- telemetry ----------------------------------------------------------------------------
    def _xid(self) -> None:
        events = self.telemetry.xid_events
        if self.telemetry.xid_source == "none":
            self.add("burn.xid", Status.SKIP, None, "Xid events not watched (NVML event API unavailable).")
            return
        if not events:
            self.add("burn.xid", Status.PASS, None, f"No Xid during the burn ({self.telemetry.xid_source}).")
            return
        def subject_of(index: int | None) -> Subject:
            gpu = next((gpu for gpu in self.gpus if gpu.nvml_index == index), None)
            return self.subject(gpu) if gpu else Subject(host=self.host)
        # the one kernel judge: check and diagnose give the same Xid number the same status
        self.findings += nvml_xid_findings("burn.xid", events, subject_of, "the burn", application_note=(
            " The application here is gpuready's own GEMM loop: if it repeats on this GPU only, treat it as the "
            "GPU's."))

    def _telemetry(self, gpu: BurnGpu) -> None:
        telemetry, index = self.telemetry, gpu.nvml_index
        window = self.window(gpu)
        if window is None:
            return
        start, end = window
        reasons = [int(value) for value in telemetry.values(index, "clock_event_reasons", start, end)]
        for check_id, mask, what in (("burn.throttle_thermal", THERMAL_MASK, "thermal slowdown"),
                                     ("burn.throttle_hw", HARDWARE_MASK, "hardware slowdown / power brake")):
            share = _share(reasons, mask)
            status = Status.FAIL if share > self.limits["throttle_fail_share"] else \
                Status.WARN if share > self.limits["throttle_warn_share"] else Status.PASS
            self.add(check_id, status, gpu, f"{what.capitalize()} active in {share:.0%} of the GEMM window's samples.",
                     observed=round(share, 3), expected=f"<= {self.limits['throttle_warn_share']:.0%}",
                     fix=None if status == Status.PASS else
                     ("Improve cooling (fans, airflow, inlet temperature)." if "thermal" in check_id
                      else "Check PSU capacity and power cables; HW slowdown also follows overheating."),
                     refs=[self.limits["source"]])
        self._temperature(gpu, start, end)
        self._power(gpu, reasons)
        self._ecc(gpu)
        self._clocks(gpu, reasons)

    def _temperature(self, gpu: BurnGpu, start: float, end: float) -> None:
        temperatures = self.telemetry.values(gpu.nvml_index, "temperature_c", start, end)
        if not temperatures:
            return
        peak = max(temperatures)
        rule = self.limits["temperature_rule_of_thumb_c"]
        slowdown = gpu.slowdown_c
        if slowdown is not None and peak >= slowdown:
            status, why = Status.FAIL, f"reached its slowdown temperature {slowdown:.0f} °C"
        elif (slowdown is not None and peak >= slowdown - self.limits["temperature_margin_c"]) or peak >= rule:
            status, why = Status.WARN, f"came within {self.limits['temperature_margin_c']} °C of its slowdown " \
                                       f"temperature or above {rule} °C"
        else:
            status, why = Status.PASS, "stayed clear of its slowdown temperature" + \
                (f" ({slowdown:.0f} °C)" if slowdown is not None else "")
        self.add("burn.temperature", status, gpu, f"Peak {peak:.0f} °C under full load: {why}.", observed=peak,
                 expected=f"< {slowdown - self.limits['temperature_margin_c']:.0f} °C" if slowdown else f"< {rule} °C",
                 fix=None if status == Status.PASS else "Improve cooling before long runs.",
                 refs=[self.limits["source"]])

    def _power(self, gpu: BurnGpu, reasons: list[int]) -> None:
        window = self.window(gpu, skip_first_s=self.limits["power_skip_first_s"])
        if window is None:
            return
        powers = self.telemetry.values(gpu.nvml_index, "power_w", *window)
        limits = self.telemetry.values(gpu.nvml_index, "power_limit_w", *window)
        if not powers or not limits:
            return
        mean, limit = statistics.fmean(powers), statistics.median(limits)
        capped = _share(reasons, POWER_CAP_MASK)
        self.measurements.append(Measurement(
            name="burn_power_w", subject=self.subject(gpu), value=round(mean, 1), unit="watts", expected=limit,
            expected_source="enforced power limit (NVML)", samples=[round(value, 1) for value in powers],
            method={"window": f"GEMM window after its first {self.limits['power_skip_first_s']} s",
                    "interval_s": self.telemetry.interval_s, "sw_power_cap_share": round(capped, 3)}))
        fraction = mean / limit
        status = Status.WARN if fraction < self.limits["power_low_fraction"] and capped < 0.5 else Status.PASS
        self.add("burn.power", status, gpu,
                 f"Sustained {mean:,.0f} W = {fraction:.0%} of the {limit:,.0f} W limit"
                 + (f"; power-capped ({capped:.0%} of samples show SW power cap): the load is as heavy as the limit "
                    "allows" if capped >= 0.5 else "; not power-capped"), observed=round(mean, 1), expected=limit,
                 fix=None if status == Status.PASS else "The GPU did not reach its limit without being capped: check "
                 "clocks and throttle reasons, and that nothing else limited the load.", refs=[self.limits["source"]])

    def _ecc(self, gpu: BurnGpu) -> None:
        for metric, status_if_grew in (("ecc_uncorrected", Status.FAIL), ("ecc_corrected", Status.PASS)):
            values = self.telemetry.values(gpu.nvml_index, metric)
            if len(values) < 2:
                continue
            grew = values[-1] - values[0]
            if grew > 0:
                self.add("burn.ecc", status_if_grew, gpu,
                         f"{grew:.0f} new {'uncorrectable' if metric == 'ecc_uncorrected' else 'corrected'} ECC "
                         "error(s) during the burn" + ("" if status_if_grew == Status.FAIL else
                                                       " (corrected by ECC; noted, not a fault)") + ".",
                         observed=grew, expected=0,
                         fix="Drain the GPU; reset it so the row remap applies; RMA if it repeats."
                         if status_if_grew == Status.FAIL else None)
                return
        self.add("burn.ecc", Status.PASS, gpu, "No new ECC errors during the burn.", observed=0, expected=0)

    def _clocks(self, gpu: BurnGpu, reasons: list[int]) -> None:
        """A lasting step down in SM clock that the power cap does not explain."""
        window = self.window(gpu, skip_first_s=self.limits["power_skip_first_s"])
        if window is None:
            return
        start, end = window
        clocks = self.telemetry.values(gpu.nvml_index, "sm_clock_mhz", start, end)
        masks = [int(value) for value in self.telemetry.values(gpu.nvml_index, "clock_event_reasons", start, end)]
        if len(clocks) < 9:
            self.add("burn.clock_instability", Status.SKIP, gpu, "GEMM window too short to judge clock stability.")
            return
        third = len(clocks) // 3
        first, last = statistics.median(clocks[:third]), statistics.median(clocks[-third:])
        last_masks = masks[-third:] if len(masks) >= third else masks
        unexplained = _share(last_masks, THERMAL_MASK | HARDWARE_MASK)
        capped = _share(last_masks, POWER_CAP_MASK)
        step_down = last < first * (1 - self.limits["clock_step_fraction"])
        if step_down and (unexplained > 0 or capped < 0.5):
            self.add("burn.clock_instability", Status.WARN, gpu,
                     f"SM clock stepped down from a median {first:,.0f} MHz to {last:,.0f} MHz over the run, "
                     "not explained by the power cap.", observed={"first_third_mhz": first, "last_third_mhz": last},
                     expected=f">= {first * (1 - self.limits['clock_step_fraction']):,.0f} MHz",
                     fix="Check cooling and throttle reasons over time (the report's series).",
                     refs=[self.limits["source"]])
        else:
            self.add("burn.clock_instability", Status.PASS, gpu,
                     f"SM clock median {first:,.0f} → {last:,.0f} MHz"
                     + (" (swings under the power cap are normal)" if capped >= 0.5 else "") + ".",
                     observed={"first_third_mhz": first, "last_third_mhz": last})
