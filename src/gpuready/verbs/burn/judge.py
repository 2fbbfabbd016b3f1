"""Burn-in results and telemetry → findings and measurements. Pure: tests feed recorded series."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from gpuready.checks.gpu import lost_gpu_events
from gpuready.checks.ib_rails import _COUNTERS_REF
from gpuready.checks.kernel_judge import nvml_xid_findings
from gpuready.devices import blame_sharing, holders, sharing_findings, users_of
from gpuready.facts.clock_reasons import REASON_BITS
from gpuready.facts.ib_counters_live import CounterWindow
from gpuready.facts.kernel_log import read_message
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import clock_reasons, gpu_spec, thresholds
from gpuready.model import Finding, GpuRef, Measurement, Status, Subject
from gpuready.telemetry import Telemetry
from gpuready.runner.watchdog import RankFailure

THERMAL_MASK = sum(REASON_BITS[name] for name in clock_reasons("thermal"))
HARDWARE_MASK = sum(REASON_BITS[name] for name in clock_reasons("hardware"))
POWER_CAP_MASK = REASON_BITS["sw_power_cap"]
LINK_DOWN_COUNTERS = ("link_downed",)
"""A rise here fails burn.ib_counters: the link dropped during the run. A rise of any other error counter (symbol and
receive errors, link error recovery, buffer overruns) warns: a marginal cable or transceiver."""
_IB_SPEC_REF = ("InfiniBand Architecture Specification Vol. 1, PortCounters: LinkDownedCounter, SymbolErrorCounter, "
                "PortRcvErrors, LinkErrorRecoveryCounter, ExcessiveBufferOverrunErrors")


@dataclass
class BurnGpu:
    """One burned GPU: its rank's result, its NVML index (telemetry key) and identity."""
    rank: int
    nvml_index: int | None
    identity: dict[str, Any]
    """NVML's identity of the GPU as its JSON (facts/nvml_records.py GpuIdentity: bus_id, uuid, name …); {} on CPU."""
    result: dict[str, Any] | None
    slowdown_c: float | None = None
    power_limit_w: float | None = None
    """Enforced power limit at the start (facts); telemetry's `power_limit_w` is preferred where sampled."""
    power_default_limit_w: float | None = None


def _share(mask_values: list[int], mask: int) -> float:
    return sum(1 for value in mask_values if value & mask) / len(mask_values) if mask_values else 0.0


FAILURE_CAUSES = ("out_of_memory", "illegal_address", "launch_failure", "device_lost", "other")
"""What a worker's exception can mean: each has its sentence and fix in the catalogue (`burn.failed.<cause>`)."""
_CAUSE_PATTERNS = [
    ("out_of_memory", ("out of memory", "outofmemoryerror", "cudaerrormemoryallocation")),
    ("illegal_address", ("illegal memory access", "illegal address", "misaligned address")),
    ("launch_failure", ("launch failure", "launch timed out", "too many resources requested for launch")),
    # A GPU that is lost (checks/gpu.py's one judgement) or that CUDA cannot use
    ("device_lost", ("device lost", "no cuda-capable device", "uncorrectable ecc", "ecc error",
                     "cuda-capable device(s) is/are busy or unavailable", "device not ready", "unknown error",
                     "cudaerrordevicesunavailable")),
]


def _sizing(sizing: object) -> object:
    """The worker's note on how much memory it tested, in the catalogue's words where it is one of the worker's own
    (workloads/burn.py); anything else as it came."""
    from gpuready.workloads.burn import MEMORY_CAP_BYTES, MEMORY_FREE_SHARE  # the rank's module: imports torch
    for text in (said("burn.sizing.cuda", share=MEMORY_FREE_SHARE, cap_gib=MEMORY_CAP_BYTES / 2**30),
                 said("burn.sizing.cpu")):
        if sizing == text.english():
            return text
    return sizing


def classify_failure(error: str) -> str:
    """A worker's exception text → out_of_memory | illegal_address | launch_failure | device_lost | other. Whether it
    says the GPU is lost is the one judgement check and diagnose make of any log (checks/gpu.py lost_gpu_events)."""
    text = (error or "").lower()
    lost = bool(lost_gpu_events(read_message(error or "")))
    for cause, patterns in _CAUSE_PATTERNS:
        if any(pattern in text for pattern in patterns) or (cause == "device_lost" and lost):
            return cause
    return "other"


class BurnJudge:
    def __init__(self, host: str, gpus: list[BurnGpu], telemetry: Telemetry | None,
                 failures: list[RankFailure], self_test: bool = False, users: dict | None = None,
                 checked_sharing: bool = False, exclusive: bool = False, ib_window: CounterWindow | None = None):
        self.host, self.gpus, self.telemetry, self.failures = host, gpus, telemetry, failures
        self.ib_window = ib_window
        """The RDMA port error counters read at the start, every telemetry interval and at the end (None: not read)."""
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

    def add(self, check_id: str, status: Status, gpu: BurnGpu | None, text: Said, **kwargs: Any) -> None:
        """`kwargs` may override the catalogue's fix (`fix=None`: a pass needs no next step)."""
        subject = self.subject(gpu) if gpu else Subject(host=self.host)
        self.findings.append(Finding(check_id=check_id, status=status, subject=subject,
                                     **{**finding_text(text), **kwargs}))

    def window(self, gpu: BurnGpu, skip_first_s: float = 0.0) -> tuple[float, float] | None:
        """The GEMM window in telemetry time (seconds since sampling began)."""
        result = gpu.result or {}
        if self.telemetry is None or "window_start" not in result:
            return None
        start = result["window_start"] - self.telemetry.started_at + skip_first_s
        end = result.get("window_end", start) - self.telemetry.started_at
        return (start, end) if end > start else None

    def judge(self) -> None:
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
        self._ib_counters()
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
                details = [said("burn.errors.gemm", count=len(errors), iteration=first["iteration"],
                                elements=first["elements"], max_error=first["max_abs_error"],
                                tolerance=result["tolerance_abs"])] if first else []
                if memory_wrong:
                    details.append(said("burn.errors.memory", count=memory_wrong))
                self.add("burn.errors", Status.FAIL, gpu,
                         said("burn.errors.self_test" if self.self_test else "burn.errors",
                              gpu=self.subject(gpu).label(), details=details),
                         observed={"gemm_errors": errors[:10], "memory_wrong_words": memory_wrong}, expected=0,
                         refs=["gpu-burn method: compare against a reference product"])
            else:
                memory = result["memory"]
                values = dict(iterations=result["iterations"], dtype=result["dtype"], n=result["n"],
                              gib=memory["bytes"] / 2**30)
                self.add("burn.errors", Status.PASS, gpu,
                         said("burn.errors.none_sized", sizing=_sizing(memory.get("sizing")),
                              free_gib=memory["free_bytes_at_start"] / 2**30, **values)
                         if memory.get("free_bytes_at_start") else said("burn.errors.none", **values),
                         observed=0, expected=0)
            checksums[(gpu.identity.get("name") or "cpu", result["dtype"])].append(gpu)
        for (name, dtype), group in checksums.items():
            values = {round(gpu.result["reference_checksum"], 3) for gpu in group}
            if len(group) > 1 and len(values) > 1:
                majority = statistics.mode(round(gpu.result["reference_checksum"], 3) for gpu in group)
                for gpu in group:
                    if round(gpu.result["reference_checksum"], 3) != majority:
                        self.add("burn.errors", Status.FAIL, gpu,
                                 said("burn.errors.checksum", name=name, checksum=gpu.result["reference_checksum"],
                                      majority=majority),
                                 observed=gpu.result["reference_checksum"], expected=majority)

    def _lost(self) -> None:
        lost_ranks = {failure.rank: failure for failure in self.failures if failure.kind in ("hang", "exit", "start")}
        for gpu in self.gpus:
            telemetry_lost = self.telemetry is not None and gpu.nvml_index in self.telemetry.lost_at
            failure = lost_ranks.get(gpu.rank)
            if failure or telemetry_lost:
                how = failure.text if failure else said("burn.gpu_lost.nvml")
                self.add("burn.gpu_lost", Status.FAIL, gpu,
                         said("burn.gpu_lost", gpu=gpu.identity.get("bus_id") or gpu.rank, how=how),
                         observed=failure.detail if failure else how.english(), expected="answers until the end")
        for failure in self.failures:
            if failure.kind == "workload":
                gpu = next((gpu for gpu in self.gpus if gpu.rank == failure.rank), None)
                error = (gpu.result or {}).get("error") if gpu else None
                self._failed(gpu, str(error or failure.detail), None if error else failure.said)

    def _failed(self, gpu: BurnGpu | None, error: str, text: Said | None = None) -> None:
        """burn.failed: the worker raised (not a wrong result: those are burn.errors), with its cause."""
        cause = classify_failure(error)
        msg_id = f"burn.failed.{cause}"
        values: dict[str, Any] = {"error": text or (error.splitlines()[0][:300] if error
                                                    else said("burn.failed.no_detail"))}
        observed: dict[str, Any] = {"cause": cause, "error": error}
        if cause == "out_of_memory":
            entry = users_of(self.subject(gpu).gpu, self.users or {}) if gpu else None
            if entry is not None and entry.processes:
                msg_id, values["holders"] = f"{msg_id}.held", holders(entry)
                observed["holders"] = entry.processes
            elif self.users is not None:
                msg_id += ".alone"
        self.add("burn.failed", Status.FAIL, gpu, said(msg_id, **values), observed=observed, expected="no exception")

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
                         said("burn.straggler", value=figures[gpu.rank], below=1 - figures[gpu.rank] / best, best=best),
                         observed=round(figures[gpu.rank], 1), expected=round(best, 1), refs=[self.limits["source"]])

    def expected_tflops(self, gpu: BurnGpu) -> tuple[float, dict[str, Any]] | None:
        """Datasheet dense peak × sustained-load efficiency × (enforced / default power limit where below)."""
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
            limits = [sample.power_limit_w for _, sample in self.telemetry.samples.get(gpu.nvml_index, [])
                      if isinstance(sample.power_limit_w, (int, float))]
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
        how = said("burn.expected.power_scaled" if basis["power_scale"] < 1 else "burn.expected",
                   peak=basis["peak_tflops_dense"], efficiency=basis["efficiency"], scale=basis["power_scale"])
        if basis["expected_source"] == "unmeasured":
            how = said("burn.expected.unmeasured", basis=how, dtype=dtype)
        self.add("burn.throughput_low", status, gpu,
                 said("burn.throughput", value=value, dtype=dtype, fraction=fraction, expected=expected, how=how),
                 observed=round(value, 1), expected=round(expected, 1),
                 refs=[basis["expected_source"] if basis["expected_source"] != "unmeasured" else table["source"],
                       basis["peak_source"]], **({"fix": None} if status == Status.PASS else {}))

    # -- telemetry ----------------------------------------------------------------------------
    def _xid(self) -> None:
        events = self.telemetry.xid_events
        if self.telemetry.xid_source == "none":
            self.add("burn.xid", Status.SKIP, None, said("burn.xid.not_watched"))
            return
        if not events:
            self.add("burn.xid", Status.PASS, None, said("burn.xid.none", source=self.telemetry.xid_source))
            return
        def subject_of(index: int | None) -> Subject:
            gpu = next((gpu for gpu in self.gpus if gpu.nvml_index == index), None)
            return self.subject(gpu) if gpu else Subject(host=self.host)
        # the one kernel judge: check and diagnose give the same Xid number the same status
        self.findings += nvml_xid_findings("burn.xid", events, subject_of, said("burn.xid.during"),
                                           application_note=said("burn.xid.application"))

    def _telemetry(self, gpu: BurnGpu) -> None:
        telemetry, index = self.telemetry, gpu.nvml_index
        window = self.window(gpu)
        if window is None:
            return
        start, end = window
        reasons = [int(value) for value in telemetry.values(index, "clock_event_reasons", start, end)]
        for check_id, mask in (("burn.throttle_thermal", THERMAL_MASK), ("burn.throttle_hw", HARDWARE_MASK)):
            share = _share(reasons, mask)
            status = Status.FAIL if share > self.limits["throttle_fail_share"] else \
                Status.WARN if share > self.limits["throttle_warn_share"] else Status.PASS
            self.add(check_id, status, gpu, said(check_id, share=share),
                     observed=round(share, 3), expected=f"<= {self.limits['throttle_warn_share']:.0%}",
                     refs=[self.limits["source"]], **({"fix": None} if status == Status.PASS else {}))
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
            status, why = Status.FAIL, said("burn.temperature.reached", slowdown=slowdown)
        elif (slowdown is not None and peak >= slowdown - self.limits["temperature_margin_c"]) or peak >= rule:
            status, why = Status.WARN, said("burn.temperature.close", margin=self.limits["temperature_margin_c"],
                                            rule=rule)
        else:
            status, why = Status.PASS, said("burn.temperature.clear_of", slowdown=slowdown) \
                if slowdown is not None else said("burn.temperature.clear")
        self.add("burn.temperature", status, gpu, said("burn.temperature", peak=peak, why=why), observed=peak,
                 expected=f"< {slowdown - self.limits['temperature_margin_c']:.0f} °C" if slowdown else f"< {rule} °C",
                 refs=[self.limits["source"]], **({"fix": None} if status == Status.PASS else {}))

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
                 said("burn.power.capped" if capped >= 0.5 else "burn.power.uncapped", watts=mean, fraction=fraction,
                      limit=limit, capped=capped), observed=round(mean, 1), expected=limit,
                 refs=[self.limits["source"]], **({"fix": None} if status == Status.PASS else {}))

    def _ecc(self, gpu: BurnGpu) -> None:
        for metric, status_if_grew in (("ecc_uncorrected", Status.FAIL), ("ecc_corrected", Status.PASS)):
            values = self.telemetry.values(gpu.nvml_index, metric)
            if len(values) < 2:
                continue
            grew = values[-1] - values[0]
            if grew > 0:
                self.add("burn.ecc", status_if_grew, gpu, said(f"burn.ecc.{metric}", count=grew), observed=grew,
                         expected=0)
                return
        self.add("burn.ecc", Status.PASS, gpu, said("burn.ecc.none"), observed=0, expected=0)

    def _ib_counters(self) -> None:
        """burn.ib_counters: the rise of each RDMA port's error counters over the run (a machine without RDMA ports:
        no finding). `link_downed` rising fails, any other error counter rising warns."""
        window = self.ib_window
        if window is None or not window.last:
            return
        increases = window.increases()
        for port, rose in sorted(increases.items()):
            named = ", ".join(f"{name} +{value}" for name, value in sorted(rose.items()))
            device, _, number = port.rpartition("/")
            down = sum(rose.get(name, 0) for name in LINK_DOWN_COUNTERS)
            text = said("burn.ib_counters.link_downed", port=port, count=down, increases=named, device=device,
                        number=number) if down else \
                said("burn.ib_counters.errors", port=port, increases=named, device=device, number=number)
            self.findings.append(Finding(check_id="burn.ib_counters", status=Status.FAIL if down else Status.WARN,
                                         subject=Subject(host=self.host, nic=port), **finding_text(text),
                                         observed={"increase": rose, "resets": window.resets.get(port, {})},
                                         expected=0, refs=[_COUNTERS_REF, _IB_SPEC_REF]))
        if not increases:
            self.add("burn.ib_counters", Status.PASS, None,
                     said("burn.ib_counters.none", ports=len(window.last), readings=window.readings),
                     observed=0, expected=0, refs=[_COUNTERS_REF])

    def _clocks(self, gpu: BurnGpu, reasons: list[int]) -> None:
        """A lasting step down in SM clock that the power cap does not explain."""
        window = self.window(gpu, skip_first_s=self.limits["power_skip_first_s"])
        if window is None:
            return
        start, end = window
        clocks = self.telemetry.values(gpu.nvml_index, "sm_clock_mhz", start, end)
        masks = [int(value) for value in self.telemetry.values(gpu.nvml_index, "clock_event_reasons", start, end)]
        if len(clocks) < 9:
            self.add("burn.clock_instability", Status.SKIP, gpu, said("burn.clocks.too_short"))
            return
        third = len(clocks) // 3
        first, last = statistics.median(clocks[:third]), statistics.median(clocks[-third:])
        last_masks = masks[-third:] if len(masks) >= third else masks
        unexplained = _share(last_masks, THERMAL_MASK | HARDWARE_MASK)
        capped = _share(last_masks, POWER_CAP_MASK)
        step_down = last < first * (1 - self.limits["clock_step_fraction"])
        if step_down and (unexplained > 0 or capped < 0.5):
            self.add("burn.clock_instability", Status.WARN, gpu,
                     said("burn.clocks.stepped_down", first=first, last=last),
                     observed={"first_third_mhz": first, "last_third_mhz": last},
                     expected=f">= {first * (1 - self.limits['clock_step_fraction']):,.0f} MHz",
                     refs=[self.limits["source"]])
        else:
            self.add("burn.clock_instability", Status.PASS, gpu,
                     said("burn.clocks.capped" if capped >= 0.5 else "burn.clocks.steady", first=first, last=last),
                     observed={"first_third_mhz": first, "last_third_mhz": last})
