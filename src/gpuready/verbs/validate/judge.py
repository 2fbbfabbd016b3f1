"""Rank results → measurements (with method, expected value and versions) and findings."""

from __future__ import annotations

import re
import statistics
from typing import Any

from gpuready.checks.job_logs import STRAGGLER_REFS, straggler_ranks
from gpuready.facts.types import Facts
from gpuready.i18n import Said, finding_text, said, said_from
from gpuready.knowledge import thresholds
from gpuready.model import Finding, GpuRef, Measurement, Status, Subject
from gpuready.estimate import expect
from gpuready.runner.local import RunOutcome
from gpuready.verbs.validate import transport
from gpuready.verbs.validate.between_nodes import between_nodes_facts, between_nodes_findings

PEER_LOST = re.compile(r"closed by peer|reset by peer|broken pipe|connection refused|remote (process|peer|worker)|"
                       r"ncclRemoteError|peer .*(exited|crash)", re.IGNORECASE)
"""Errors a rank sees when another rank is gone (gloo, NCCL, the store): a consequence, never the first failure."""
TRANSFERS_SAID = ("h2d_pinned", "d2h_pinned", "h2d_pageable", "d2h_pageable")
"""Host copies the catalogue names in words (`validate.what.<key>`); another key is shown by its name."""


class Judge:
    def __init__(self, outcome: RunOutcome, facts: Facts | None, host: str):
        self.outcome, self.facts, self.host = outcome, facts, host
        self.measurements: list[Measurement] = []
        self.findings: list[Finding] = []
        self.limits = thresholds("validate")
        self.transport_facts: dict[str, Any] | None = None
        """Across nodes on NCCL: the transport per communicator (the report's facts.validate.nccl_transport)."""
        self.between_nodes: dict[str, Any] | None = None
        """validate --between-nodes: the pair tests (the report's facts.between_nodes)."""

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

    def _finding(self, check_id: str, status: Status, subject: Subject, text: Said, **kwargs: Any) -> None:
        """`kwargs` may override the catalogue's fix (`fix=None`: a pass needs no next step)."""
        self.findings.append(Finding(check_id=check_id, status=status, subject=subject,
                                     **{**finding_text(text), **kwargs}))

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

    def _judge_against(self, check_id: str, subject: Subject, what: Said, value: float, unit: str,
                       expected: expect.Expected | None) -> None:
        """`validate.<check_id>`: the figure against its expectation; its fix (`.fix`) where it falls short."""
        if expected is None:
            return
        status = self._level(value, expected.value)
        text = said(f"validate.{check_id}", what=what, value=value, unit=unit, fraction=value / expected.value,
                    expected=expected.value)
        self._finding(check_id, status, subject, text, observed=round(value, 2), expected=round(expected.value, 2),
                      refs=[expected.source, self.limits["source"]],
                      **({"fix": None} if status == Status.PASS else {}))

    # -- workloads ------------------------------------------------------------------------------
    def judge_all(self) -> None:
        self._failures()
        results = [self.outcome.results[rank] for rank in sorted(self.outcome.results)]
        self._compute(results)
        self._transfer(results)
        self._p2p(results)
        self._collectives(results)
        self._ddp(results)
        self._ddp_ranks(results)
        self._between_nodes(results)

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
            values = dict(rank=failure.rank, host=subject.host, detail=failure.text,
                          log_dir=str(self.outcome.log_dir))
            text = said("validate.rank_failed.gpu", gpu=progress.gpu, **values) if progress and progress.gpu \
                else said("validate.rank_failed", **values)
            self._finding(check_id, Status.FAIL, subject, text,
                          observed=failure.detail, expected="every rank advances",
                          refs=["PyTorch flight recorder: TORCH_NCCL_TRACE_BUFFER_SIZE / TORCH_NCCL_DUMP_ON_TIMEOUT"])
        for pid in self.outcome.unkillable:
            self._finding("validate.rank_unkillable", Status.FAIL, Subject(host=self.host),
                          said("validate.rank_unkillable", pid=pid), observed=pid)

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
            text = said("validate.workload_failed" + (".after_peers" if len(ended) > 1 else ".after_peer" if ended
                                                      else ""), workload=name, rank=result.get("rank"),
                        error=data["error"], peers=", ".join(map(str, ended)))
            self._finding(check_id, Status.FAIL, self._subject(result), text, observed=data["error"])
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
                self._judge_against("compute.low", subject, said("validate.what.matmul", dtype=dtype),
                                    figure["tflops"], "TFLOP/s", expected)
                best[dtype] = max(best.get(dtype, 0.0), figure["tflops"])
                rows.append((dtype, figure["tflops"], subject))
            memory = data.get("memory")
            if memory:
                expected = expect.memory_copy(name)
                self._measure("memory_copy_gb_per_s", subject, memory["gb_per_s"], "gb_per_s", expected,
                              memory["method"], result["versions"])
                self._judge_against("memory_bw.low", subject, said("validate.what.memory_copy"),
                                    memory["gb_per_s"], "GB/s", expected)
        straggler = self.limits["straggler_fraction"]
        for dtype, value, subject in rows:
            if len(results) > 1 and value < best[dtype] * (1 - straggler):
                self._finding("compute.straggler", Status.WARN, subject,
                              said("validate.compute.straggler", dtype=dtype, value=value,
                                   below=1 - value / best[dtype], best=best[dtype]),
                              observed=round(value, 1), expected=f">= {best[dtype] * (1 - straggler):,.0f}",
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
                    what = said(f"validate.what.{key}") if key in TRANSFERS_SAID else \
                        said("validate.what.transfer", name=key.replace("_", " "))
                    self._judge_against("transfer.low", subject, what, figure["gb_per_s"], "GB/s", expected)

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
                    self._finding("p2p.failed", Status.FAIL, subject,
                                  said("validate.p2p.failed", source=i, target=j, error=entry["error"]),
                                  observed=entry["error"])
                    continue
                expected = expect.p2p_copy(self.facts, first, second, name)
                for direction in ("unidirectional", "bidirectional"):
                    figure = entry[direction]
                    self._measure(f"p2p_{direction}_gb_per_s", subject, figure["gb_per_s"], "gb_per_s",
                                  expected, figure["method"], result["versions"], figure["samples"])
                self._judge_against("p2p.low", subject, said("validate.what.p2p" if entry["peer_access"] else
                                                             "validate.what.p2p_via_host", source=i, target=j),
                                    entry["unidirectional"]["gb_per_s"], "GB/s", expected)
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
        across = self._across_nodes(results, data, subject)
        wrong = [row for row in data["rows"] if row["wrong"]]
        if wrong:
            row = wrong[0]
            self._finding("nccl.failed", Status.FAIL, subject,
                          said("validate.nccl.data_wrong", count=len(wrong), collective=row["collective"],
                               size_bytes=row["size_bytes"], placement=row["placement"], wrong=row["wrong"]),
                          observed=len(wrong), expected=0, refs=["nccl-tests data check (-c 1)"])
        else:
            values = dict(runs=len(data["rows"]), backend=data["backend"], ranks=data["world_size"])
            self._finding("nccl.failed", Status.PASS, subject,
                          said("validate.nccl.data_ok.unsupported", unsupported=", ".join(data["unsupported"]),
                               **values) if data.get("unsupported") else said("validate.nccl.data_ok", **values),
                          observed=0, expected=0)
        single_rank = data["world_size"] < 2
        if single_rank:
            self._finding("nccl.busbw_low", Status.SKIP, subject, said("validate.nccl.one_rank"))
        for collective in dict.fromkeys(row["collective"] for row in data["rows"]):
            rows = [row for row in data["rows"] if row["collective"] == collective]
            large = [row for row in rows if row["size_bytes"] >= minimum] or rows
            peak = max(large, key=lambda row: row["busbw_gb_per_s"])
            method = {"sizes_bytes": sorted({row["size_bytes"] for row in rows}), "dtype": data["dtype"],
                      "ranks": data["world_size"], "backend": data["backend"], "nodes": len(hosts),
                      "timing": "host clock around a batch of back-to-back ops, mean time over ranks (nccl-tests)",
                      "nvls": data["nvls"], "algorithm": data["algorithm"], "peak_at_bytes": peak["size_bytes"],
                      "peak_placement": peak["placement"], "rows": rows}
            judged_across = across is not None and collective != "send_recv"
            if judged_across:  # across nodes on NCCL: per NIC, beside the transport NCCL used
                status, text, expected = transport.judge_per_nic(
                    self.facts, rows, collective, nodes=len(hosts), ranks_per_node=transport.per_node(results),
                    world_size=data["world_size"], transports=across.transports, gpu_name=name)
                self._finding("nccl.busbw_low", status, subject, text, refs=[expected.source] if expected else [],
                              **({"fix": None} if status == Status.PASS else {}))
            if judged_across and across.transports:
                method["transport"] = " + ".join(across.transports)
            if not single_rank:
                self._measure(f"{collective}_busbw_gb_per_s", subject, peak["busbw_gb_per_s"], "gb_per_s",
                              expected if collective != "send_recv" else None, method, first["versions"],
                              [row["busbw_gb_per_s"] for row in large])
            smallest = min(rows, key=lambda row: row["size_bytes"])
            self._measure(f"{collective}_latency_us", subject, smallest["time_us"], "us", None,
                          {"bytes": smallest["size_bytes"], "placement": smallest["placement"],
                           "note": "time of one operation at the smallest size, launch overhead included"},
                          first["versions"])
            if collective != "send_recv" and not single_rank and not judged_across:
                self._judge_against("nccl.busbw_low", subject, said("validate.what.busbw", collective=collective,
                                                                    mib=peak["size_bytes"] / 2**20),
                                    peak["busbw_gb_per_s"], "GB/s", expected)

    def _across_nodes(self, results: list[dict[str, Any]], data: dict[str, Any],
                      subject: Subject) -> transport.RanksTransport | None:
        """Across nodes on NCCL: the transport its communicators used (nccl.transport's findings, and the report's
        facts); across nodes on gloo: a skip saying why busbw is not judged per NIC. None on one node or gloo."""
        nodes = len({result.get("host") for result in results})
        if nodes < 2:
            return None
        if data["backend"] != "nccl":
            self._finding("nccl.busbw_low", Status.SKIP, subject,
                          said("validate.transport.gloo", nodes=nodes, backend=data["backend"]))
            return None
        seen = transport.ranks_transport(self.facts, results, self.host)
        self.findings += seen.findings
        self.transport_facts = {"transports": seen.transports, "communicators": seen.communicators,
                                "files": seen.files, "unread": {str(rank): why for rank, why in seen.unread.items()}}
        return seen

    def _between_nodes(self, results: list[dict[str, Any]]) -> None:
        """validate --between-nodes: rank 0's pair tests (every rank's failure is its own finding)."""
        data = [self._workload(result, "between_nodes") for result in results]
        if data and data[0]:
            # NCCL between GPUs of two nodes: one rank each, so one NIC's large-message rate from rank 0's facts
            # (gloo's TCP is not bounded by the RDMA NICs: the median of the pairs then)
            nic = expect.internode_busbw_floor_gb_per_s(self.facts, 2, 1, "send_recv") \
                if (data[0].get("method") or {}).get("backend") == "nccl" else None
            self.between_nodes, conclusion = between_nodes_facts(data[0], nic.ceiling_gb_per_s if nic else None,
                                                                 nic.source if nic else None)
            self.findings += between_nodes_findings(self.between_nodes, conclusion, self.host)

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
                problems.append(said("validate.ddp.gradients_differ", parameters=", ".join(data["gradient_mismatched"]),
                                     worst=data["gradient_worst_ratio"]))
            if not data["parameters_identical"]:
                problems.append(said("validate.ddp.parameters_differ", ranks=str(data["ranks_differing_from_rank0"])))
            fsdp = data.get("fsdp", {})
            if fsdp.get("status") == "fail":
                problems.append(said("validate.ddp.fsdp_differs", difference=fsdp["max_abs_difference"]))
            if problems:
                self._finding("ddp.mismatch", Status.FAIL, subject, said("validate.ddp.mismatch", problems=problems),
                              observed=data)
            else:
                counts = {"world_size": data["world_size"], "steps": data["steps"],
                          "worst": data["gradient_worst_ratio"]}
                if data.get("method") == "by_hand":  # --quick: no DDP, no FSDP2 step; the message says so
                    text = said("validate.ddp.pass_by_hand", **counts)
                else:
                    text = said("validate.ddp.pass", **counts, fsdp=_fsdp_said(fsdp))
                self._finding("ddp.mismatch", Status.PASS, subject, text,
                              observed={"gradient_worst_ratio": data["gradient_worst_ratio"], "fsdp": fsdp})


    def _ddp_ranks(self, results: list[dict[str, Any]]) -> None:
        """Each rank's own DDP step time (forward and backward without the all-reduce, workloads/ddp.py), and the
        straggler rule over them (checks/job_logs.py `straggler_ranks`, the one `diagnose` applies to training logs
        and bench to its ranks): a GPU rank both one standard deviation and 10 % slower than the mean of all is named
        with its GPU and host. Each rank's figure is the median of its timed steps (5: one pause must not decide).
        CPU ranks are measured, not judged: they share the host's cores, so their times say nothing of a device."""
        timed = [(result, data) for result in results
                 if isinstance(data := (result.get("workloads") or {}).get("ddp"), dict) and data.get("step_times_s")]
        need = thresholds("straggler")["min_steps"]
        if len(timed) < 2 or any(len(data["step_times_s"]) - data.get("warmup_steps", 0) < need for _, data in timed):
            return
        figures, subjects = {}, {}
        for result, data in timed:
            # ms: _measure keeps 3 decimals; the warm-up step left out
            steps = [1000 * float(seconds) for seconds in data["step_times_s"][data.get("warmup_steps", 0):]]
            rank = result.get("rank")
            figures[rank], subjects[rank] = statistics.median(steps), self._subject(result)
            self._measure("ddp_step_time_ms", subjects[rank], figures[rank], "ms", None,
                          {"statistic": "median of this rank's timed passes", "steps": len(steps),
                           "warmup_steps": data.get("warmup_steps", 0), "timing": data.get("step_timing"),
                           "world_size": data.get("world_size")}, result.get("versions") or {}, samples=steps)
        if not all(subject.gpu for subject in subjects.values()):
            return
        spread = straggler_ranks(figures)
        for row in spread.stragglers:
            subject = subjects[row.rank]
            self._finding("ddp.straggler", Status.WARN, subject, said(
                "validate.ddp.straggler", rank=row.rank, gpu=subject.gpu.label(), host=subject.host,
                mean=round(row.mean, 3), percent=round(100 * row.above, 1), ranks=len(figures),
                overall=round(spread.mean, 3), std=round(spread.std, 3)), refs=STRAGGLER_REFS,
                observed={"rank": row.rank, "median_ms": round(row.mean, 3), "above_mean": round(row.above, 4),
                          "ranks_mean_ms": round(spread.mean, 3), "std_ms": round(spread.std, 3)},
                expected="within one standard deviation or 10 % of the mean of all ranks")


def _fsdp_said(fsdp: dict[str, Any]) -> Said:
    """What the FSDP2 step of a DDP pass came to: it matched DDP, was skipped (with its reason: catalogue text where
    the rank sent it so), or was not run."""
    if fsdp.get("status") == "pass":
        return said("validate.ddp.fsdp_matches")
    if fsdp.get("status") == "skip":
        return said("validate.ddp.fsdp_skipped", reason=said_from(fsdp.get("reason_text")) or fsdp.get("reason", ""))
    return said("validate.ddp.fsdp_absent")
