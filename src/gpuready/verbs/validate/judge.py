"""Rank results → measurements (with method, expected value and versions) and findings."""

from __future__ import annotations

import re
from typing import Any

from gpuready.facts.types import Facts
from gpuready.knowledge import thresholds
from gpuready.model import Finding, GpuRef, Measurement, Status, Subject
from gpuready.verbs.validate import expect
from gpuready.runner.local import RunOutcome

PEER_LOST = re.compile(r"closed by peer|reset by peer|broken pipe|connection refused|remote (process|peer|worker)|"
                       r"ncclRemoteError|peer .*(exited|crash)", re.IGNORECASE)
"""Errors a rank sees when another rank is gone (gloo, NCCL, the store): a consequence, never the first failure."""


class Judge:
    def __init__(self, outcome: RunOutcome, facts: Facts | None, host: str):
        self.outcome, self.facts, self.host = outcome, facts, host
        self.measurements: list[Measurement] = []
        self.findings: list[Finding] = []
        self.limits = thresholds("validate")

    # -- subjects -------------------------------------------------------------------------------
    def _gpu_ref(self, result: dict[str, Any]) -> GpuRef | None:
        gpu = result.get("gpu") or {}
        if not gpu.get("bus_id") and not gpu.get("uuid"):
            return None
        facts_gpu = expect.gpu_by_bus(self.facts, gpu.get("bus_id"))
        index = facts_gpu.index if facts_gpu else result.get("local_rank", 0)
        cuda_index = result.get("local_rank")
        return GpuRef(index=index, bus_id=gpu.get("bus_id"), uuid=gpu.get("uuid"),
                      cuda_index=cuda_index if cuda_index != index else None)

    def _subject(self, result: dict[str, Any], peer: GpuRef | None = None) -> Subject:
        return Subject(host=result.get("host", self.host), gpu=self._gpu_ref(result), peer=peer,
                       rank=result.get("rank"))

    def _finding(self, check_id: str, status: Status, subject: Subject, message: str, **kwargs: Any) -> None:
        self.findings.append(Finding(check_id=check_id, status=status, subject=subject, message=message, **kwargs))

    def _level(self, value: float, expected: float) -> Status:
        if value < expected * self.limits["low_fail_fraction"]:
            return Status.FAIL
        if value < expected * self.limits["low_warn_fraction"]:
            return Status.WARN
        return Status.PASS

    def _measure(self, name: str, subject: Subject, value: float, unit: str, expected: expect.Expected | None,
                 method: dict[str, Any], versions: dict[str, str], samples: list[float] | None = None) -> None:
        self.measurements.append(Measurement(
            name=name, subject=subject, value=round(value, 3), unit=unit,
            expected=round(expected.value, 3) if expected else None,
            expected_source=expected.source if expected else None, method=method,
            samples=[round(sample, 3) for sample in samples or [value]], versions=versions))

    def _judge_against(self, check_id: str, subject: Subject, what: str, value: float, unit: str,
                       expected: expect.Expected | None, fix: str) -> None:
        if expected is None:
            return
        status = self._level(value, expected.value)
        fraction = value / expected.value
        message = (f"{what}: {value:,.1f} {unit}, {fraction:.0%} of the {expected.value:,.1f} {unit} expected.")
        self._finding(check_id, status, subject, message, observed=round(value, 2),
                      expected=round(expected.value, 2), fix=fix if status != Status.PASS else None,
                      refs=[expected.source, self.limits["source"]])

    # -- workloads ------------------------------------------------------------------------------
    def judge_all(self) -> None:
        self._failures()
        results = [self.outcome.results[rank] for rank in sorted(self.outcome.results)]
        self._compute(results)
        self._transfer(results)
        self._p2p(results)
        self._collectives(results)
        self._ddp(results)

    def _failures(self) -> None:
        for failure in self.outcome.failures:
            if failure.kind == "workload":
                continue  # reported from the rank's stored results, as that workload's failure
            progress = failure.progress
            subject = Subject(host=progress.host if progress else self.host,
                              gpu=GpuRef(index=failure.rank, bus_id=progress.gpu) if progress and progress.gpu else None,
                              rank=failure.rank)
            check_id = {"start": "ddp.init_failed", "hang": "validate.rank_hung"}.get(failure.kind,
                                                                                     "validate.rank_exited")
            self._finding(check_id, Status.FAIL, subject,
                          f"Rank {failure.rank} on {subject.host}"
                          + (f" (GPU {progress.gpu})" if progress and progress.gpu else "")
                          + f" {failure.detail}; the run was stopped.",
                          observed=failure.detail, expected="every rank advances",
                          fix="Look at that rank's log and flight-recorder dump in "
                              f"{self.outcome.log_dir}; check the GPU with `gpuready check` (Xid, P2P, ACS); "
                              "rerun with NCCL_DEBUG=INFO.",
                          refs=["PyTorch flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE / TORCH_NCCL_DUMP_ON_TIMEOUT"])
        for pid in self.outcome.unkillable:
            self._finding("validate.rank_unkillable", Status.FAIL, Subject(host=self.host),
                          f"Process {pid} survived SIGKILL (uninterruptible sleep: typically a GPU that fell off "
                          "the bus); it was left behind.", observed=pid,
                          fix="Check `dmesg` for Xid 79; the node needs a reboot.")

    def _first_to_fail(self) -> set[int]:
        """Ranks that failed on their own: ended or hung (the watchdog), or raised an error that is not the loss
        of a peer (a peer's loss is what the others see after the first one fails)."""
        ranks = {failure.rank for failure in self.outcome.failures if failure.kind != "workload"}
        for rank, result in self.outcome.results.items():
            for data in (result.get("workloads") or {}).values():
                if isinstance(data, dict) and "error" in data and not PEER_LOST.search(str(data["error"])):
                    ranks.add(rank)
        return ranks

    def _workload(self, result: dict[str, Any], name: str) -> dict[str, Any] | None:
        data = (result.get("workloads") or {}).get(name)
        if data and "error" in data:
            check_id = {"collectives": "nccl.failed", "ddp": "ddp.init_failed", "p2p": "p2p.failed"}.get(
                name, f"{name}.failed")
            first = self._first_to_fail() - {result.get("rank")}
            ended = sorted(first if PEER_LOST.search(data["error"]) else
                           {f.rank for f in self.outcome.failures if f.kind != "workload"} & first)
            # a peer that died, hung or raised first makes every other rank's next collective fail: say which
            cause = (f" Likely a consequence of rank{'s' if len(ended) > 1 else ''} {', '.join(map(str, ended))} "
                     "failing, ending or hanging first." if ended else "")
            self._finding(check_id, Status.FAIL, self._subject(result),
                          f"{name} failed on rank {result.get('rank')}: {data['error']}{cause}", observed=data["error"],
                          fix="See the rank's log; rerun with NCCL_DEBUG=INFO.")
            return None
        return data

    def _compute(self, results: list[dict[str, Any]]) -> None:
        best: dict[str, float] = {}
        rows = []
        for result in results:
            data = self._workload(result, "compute")
            if not data:
                continue
            name = (result.get("gpu") or {}).get("name")
            subject = self._subject(result)
            for dtype, figure in data["matmul"].items():
                if "tflops" not in figure:
                    continue
                expected = expect.matmul_tflops(name, dtype)
                self._measure(f"matmul_tflops_{dtype}", subject, figure["tflops"], "tflops", expected,
                              figure["method"], result["versions"])
                self._judge_against("compute.low", subject, f"{dtype} matmul", figure["tflops"], "TFLOP/s",
                                    expected, "Check clocks and throttle reasons under load (`gpuready burn`), the "
                                    "power limit (power.limit) and cooling.")
                best[dtype] = max(best.get(dtype, 0.0), figure["tflops"])
                rows.append((dtype, figure["tflops"], subject))
            memory = data.get("memory")
            if memory:
                expected = expect.memory_copy(name)
                self._measure("memory_copy_gb_per_s", subject, memory["gb_per_s"], "gb_per_s", expected,
                              memory["method"], result["versions"])
                self._judge_against("memory_bw.low", subject, "device memory copy (read+write)",
                                    memory["gb_per_s"], "GB/s", expected,
                                    "Check memory clocks (`nvidia-smi -q -d CLOCK`) and ECC/row-remap health.")
        straggler = self.limits["straggler_fraction"]
        for dtype, value, subject in rows:
            if len(results) > 1 and value < best[dtype] * (1 - straggler):
                self._finding("compute.straggler", Status.WARN, subject,
                              f"{dtype} matmul {value:,.0f} TFLOP/s is {1 - value / best[dtype]:.0%} below the best GPU "
                              f"({best[dtype]:,.0f}): the whole job runs at this GPU's pace.",
                              observed=round(value, 1), expected=f">= {best[dtype] * (1 - straggler):,.0f}",
                              fix="Compare its clocks, power and temperature with its peers (`gpuready burn`).",
                              refs=[self.limits["source"]])

    def _transfer(self, results: list[dict[str, Any]]) -> None:
        for result in results:
            data = self._workload(result, "transfer")
            if not data:
                continue
            subject = self._subject(result)
            facts_gpu = expect.gpu_by_bus(self.facts, (result.get("gpu") or {}).get("bus_id"))
            name = (result.get("gpu") or {}).get("name")
            for key, figure in data.items():
                expected = expect.host_transfer(facts_gpu, name) if key.endswith("pinned") else None
                self._measure(f"{key}_gb_per_s", subject, figure["gb_per_s"], "gb_per_s", expected,
                              figure["method"], result["versions"])
                if expected:
                    self._judge_against("transfer.low", subject, f"{key.replace('_', ' ')}", figure["gb_per_s"],
                                        "GB/s", expected,
                                        "The link may train below its generation or width under load: check "
                                        "`sudo lspci -vv -s BUSID` LnkSta while busy, the slot and riser, and the "
                                        "BIOS link-speed setting.")

    def _p2p(self, results: list[dict[str, Any]]) -> None:
        for result in results:
            data = self._workload(result, "p2p")
            if not data or not data.get("pairs"):
                continue
            name = (result.get("gpu") or {}).get("name")
            gpus = sorted(self.facts.gpus or [], key=lambda gpu: gpu.bus_id) if self.facts else []
            for pair, entry in data["pairs"].items():
                i, j = (int(part) for part in pair.split(","))
                first, second = (gpus[i] if i < len(gpus) else None), (gpus[j] if j < len(gpus) else None)
                ref = lambda gpu, cuda: GpuRef(index=gpu.index if gpu else cuda, bus_id=gpu.bus_id if gpu else None,
                                               uuid=gpu.uuid if gpu else None)
                subject = Subject(host=result.get("host", self.host), gpu=ref(first, i), peer=ref(second, j))
                if "error" in entry:
                    self._finding("p2p.failed", Status.FAIL, subject, f"GPU{i}→GPU{j} copy failed: {entry['error']}",
                                  observed=entry["error"], fix="Check topology.p2p and pcie.acs_iommu in `gpuready check`.")
                    continue
                expected = expect.p2p_copy(self.facts, first, second, name)
                for direction in ("unidirectional", "bidirectional"):
                    figure = entry[direction]
                    self._measure(f"p2p_{direction}_gb_per_s", subject, figure["gb_per_s"], "gb_per_s",
                                  expected, figure["method"], result["versions"], figure["samples"])
                self._judge_against("p2p.low", subject, f"GPU{i}→GPU{j} copy"
                                    + ("" if entry["peer_access"] else " (no peer access: through host memory)"),
                                    entry["unidirectional"]["gb_per_s"], "GB/s", expected,
                                    "Check the link (`nvidia-smi topo -m`, `nvidia-smi nvlink -s`), ACS and the IOMMU.")
                for size, latency in entry.get("latency_us", {}).items():
                    self._measure(f"p2p_latency_us_{size}B", subject, latency, "us", None,
                                  {"note": data.get("latency_note"), "bytes": int(size)}, result["versions"])

    def _collectives(self, results: list[dict[str, Any]]) -> None:
        # Every rank computes the same rank-averaged figures; the first rank that finished speaks for all.
        first, data = self._shared_result(results, "collectives")
        if not data:
            return
        local_gpus = [expect.gpu_by_bus(self.facts, (result.get("gpu") or {}).get("bus_id")) for result in results]
        hosts = {result.get("host") for result in results}
        name = (first.get("gpu") or {}).get("name")
        expected = expect.nccl_busbw(self.facts, [gpu for gpu in local_gpus if gpu], name) \
            if len(hosts) == 1 and all(local_gpus) and data["backend"] == "nccl" else None
        subject = Subject(host=first.get("host", self.host))
        minimum = thresholds("nccl")["min_judged_bytes"]
        wrong = [row for row in data["rows"] if row["wrong"]]
        if wrong:
            row = wrong[0]
            self._finding("nccl.failed", Status.FAIL, subject,
                          f"Data check failed: {len(wrong)} result(s) wrong, first {row['collective']} "
                          f"{row['size_bytes']} B {row['placement']} with {row['wrong']} wrong element(s).",
                          observed=len(wrong), expected=0,
                          fix="Rerun with NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 to find the transport at fault; "
                              "check ACS/IOMMU and Xid.", refs=["nccl-tests data check (-c 1)"])
        else:
            self._finding("nccl.failed", Status.PASS, subject,
                          f"{len(data['rows'])} collective runs ({data['backend']}, {data['world_size']} ranks) all "
                          "returned exactly the expected data."
                          + (f" Not offered by {data['backend']} here: {', '.join(data['unsupported'])}."
                             if data.get("unsupported") else ""), observed=0, expected=0)
        single_rank = data["world_size"] < 2
        if single_rank:
            self._finding("nccl.busbw_low", Status.SKIP, subject,
                          "One rank: collectives move no data between GPUs, so bandwidth is not judged (the "
                          "latencies below are launch overhead).")
        for collective in dict.fromkeys(row["collective"] for row in data["rows"]):
            rows = [row for row in data["rows"] if row["collective"] == collective]
            large = [row for row in rows if row["size_bytes"] >= minimum] or rows
            peak = max(large, key=lambda row: row["busbw_gb_per_s"])
            method = {"sizes_bytes": sorted({row["size_bytes"] for row in rows}), "dtype": data["dtype"],
                      "ranks": data["world_size"], "backend": data["backend"], "nodes": len(hosts),
                      "timing": "host clock around a batch of back-to-back ops, mean time over ranks (nccl-tests)",
                      "nvls": data["nvls"], "algorithm": data["algorithm"], "peak_at_bytes": peak["size_bytes"],
                      "peak_placement": peak["placement"], "rows": rows}
            if not single_rank:
                self._measure(f"{collective}_busbw_gb_per_s", subject, peak["busbw_gb_per_s"], "gb_per_s",
                              expected if collective != "send_recv" else None, method, first["versions"],
                              [row["busbw_gb_per_s"] for row in large])
            smallest = min(rows, key=lambda row: row["size_bytes"])
            self._measure(f"{collective}_latency_us", subject, smallest["time_us"], "us", None,
                          {"bytes": smallest["size_bytes"], "placement": smallest["placement"],
                           "note": "time of one operation at the smallest size, launch overhead included"},
                          first["versions"])
            if collective != "send_recv" and not single_rank:
                self._judge_against("nccl.busbw_low", subject, f"{collective} busbw at "
                                    f"{peak['size_bytes'] / 2**20:,.0f} MiB", peak["busbw_gb_per_s"], "GB/s", expected,
                                    "Compare with nccl-tests on the same GPUs; check topology.p2p, pcie.acs_iommu and "
                                    "NCCL_P2P/SHM variables (software.env).")

    def _shared_result(self, results: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """A workload every rank runs together: errors of any rank are findings; one rank's data is the figure."""
        outcomes = [(result, self._workload(result, name)) for result in results
                    if name in (result.get("workloads") or {})]
        if not outcomes or any(data is None for _, data in outcomes):
            return {}, None
        return outcomes[0]

    def _ddp(self, results: list[dict[str, Any]]) -> None:
        result, data = self._shared_result(results, "ddp")
        if data:
            subject = Subject(host=result.get("host", self.host))
            problems = []
            if data["gradient_mismatched"]:
                problems.append(f"gradients differ from the single-process reference in "
                                f"{', '.join(data['gradient_mismatched'])} (worst {data['gradient_worst_ratio']:.1f}× the "
                                "tolerance)")
            if not data["parameters_identical"]:
                problems.append(f"parameters of rank(s) {data['ranks_differing_from_rank0']} differ from rank 0")
            fsdp = data.get("fsdp", {})
            if fsdp.get("status") == "fail":
                problems.append(f"FSDP2 parameters differ from DDP's by {fsdp['max_abs_difference']:.2e}")
            if problems:
                self._finding("ddp.mismatch", Status.FAIL, subject, "DDP smoke test: " + "; ".join(problems) + ".",
                              observed=data, fix="Rerun; if it persists, run `gpuready burn` for silent errors and "
                                                 "check NCCL transports (NCCL_P2P_DISABLE=1 to compare).")
            else:
                fsdp_text = "FSDP2 step matches DDP" if fsdp.get("status") == "pass" else \
                    f"FSDP2 {fsdp.get('status')}: {fsdp.get('reason', '')}"
                self._finding("ddp.mismatch", Status.PASS, subject,
                              f"DDP on {data['world_size']} rank(s): {data['steps']} steps, gradients equal the "
                              f"single-process reference (worst {data['gradient_worst_ratio']:.2f}× tolerance), "
                              f"parameters bitwise identical on every rank; {fsdp_text}.",
                              observed={"gradient_worst_ratio": data["gradient_worst_ratio"], "fsdp": fsdp})
