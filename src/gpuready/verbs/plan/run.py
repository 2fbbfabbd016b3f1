"""`gpuready plan`: does the model fit, with which strategy, how fast; batch/LR on a new GPU count; power; cost.

Wires the options to the machine (machine.py), the memory and strategy estimates (memory.py, strategy.py), batch
scaling (batch.py), power (power.py) and cost (cost.py), and turns their answers into one report: findings for the
judgements, and the ranked strategies as the document's `strategies` section.
"""

from __future__ import annotations

import dataclasses
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuready import __version__
from gpuready.i18n import catalogue, finding_text, said, said_json, sentence, text_of
from gpuready.model import Finding, Report, Status, Subject
from gpuready.shapes import PRESETS, ModelShape, ShapeError, shape_from_hf_config, with_sequence
from gpuready.estimate.machine import Machine, MachineError, machine_from_description, machine_from_facts
from gpuready.estimate.measured import measured_figures
from gpuready.options import InputFileError
from gpuready.estimate import memory
from gpuready.estimate.power import power_plan
from gpuready.evidence.bundle import BundleError
from gpuready.pipeline import gather_facts
from gpuready.verbs.plan import strategy
from gpuready.verbs.plan.batch import scale_batch
from gpuready.verbs.plan.cost import PricesError, cost_plan, load_prices


class PlanError(ValueError):
    """Options that describe no model or no machine (a usage error, exit 2)."""


@dataclass(kw_only=True)
class PlanOptions:
    preset: str | None = None
    hf_config: Path | None = None
    family: str = "gpt2"
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn_hidden: int | None = None
    vocab: int | None = None
    seq: int = 1024
    micro_batch: int = 1
    global_batch: int | None = None
    gpus: int | None = None
    nodes: int = 1
    machine: str | None = None
    bundle: Path | None = None
    precision: str = "amp-bf16"
    optimizer: str = "adamw"
    recompute: str = "none"
    attention: str = "flash"
    logits: str = "fp32"
    """The loss's logits: fp32 (upcast, Hugging Face) or bf16 (kept 16-bit, nanoGPT); memory.LOGITS."""
    strategies: tuple[str, ...] = ()
    """Only these strategies (ddp, zero1, fsdp, tp=2, ...); () for every one that fits the GPU count."""
    task: str = "train"
    infer_batch: int = 1
    context: int | None = None
    known_batch: int | None = None
    known_lr: float | None = None
    known_gpus: int | None = None
    power: dict[str, Any] = dataclasses.field(default_factory=dict)
    cost: dict[str, Any] = dataclasses.field(default_factory=dict)
    prices: Path | None = None
    measured: Path | None = None
    """A `validate` (or `bench`) report: its figures replace datasheet assumptions in step times."""


def model_shape(options: PlanOptions) -> ModelShape:
    try:
        if options.hf_config is not None:
            shape = shape_from_hf_config(options.hf_config)
        elif options.preset is not None:
            if options.preset not in PRESETS:
                raise PlanError(sentence("error.preset.unknown", preset=repr(options.preset),
                                         presets=", ".join(PRESETS)))
            shape = PRESETS[options.preset]
        elif None not in (options.layers, options.hidden, options.heads, options.vocab):
            shape = ModelShape(family=options.family, layers=options.layers, hidden=options.hidden,
                               heads=options.heads, vocab=options.vocab, kv_heads=options.kv_heads,
                               ffn_hidden=options.ffn_hidden, name="given shape")
        else:
            raise PlanError(sentence("error.plan.no_model"))
    except ShapeError as error:
        raise PlanError(text_of(error)) from None
    return with_sequence(shape, options.seq)


def plan_machine(options: PlanOptions) -> Machine | None:
    """The machine: --machine, else --bundle, else this one; `gpus` (--nnodes x --nproc-per-node) sets the count.
    None: nothing says which GPU."""
    try:
        if options.machine:
            machine = machine_from_description(options.machine, nodes=options.nodes)
        else:
            try:
                facts = gather_facts(options.bundle, fast=True)
            except BundleError as error:
                raise PlanError(text_of(error)) from None
            try:
                machine = machine_from_facts(facts, nodes=options.nodes,
                                             source=f"bundle {options.bundle}" if options.bundle else "live")
            except MachineError:
                return None
    except MachineError as error:
        raise PlanError(text_of(error)) from None
    if options.measured is not None:
        try:
            machine = dataclasses.replace(machine, measured=measured_figures(options.measured))
        except InputFileError as error:
            raise PlanError(text_of(error)) from None
    if options.gpus:  # plan for N of these GPUs: a fully NVLinked node stays fully linked
        per_node = max(1, options.gpus // max(1, machine.nodes))
        linked = machine.nvlink_domain >= machine.gpus_per_node > 1
        machine = dataclasses.replace(machine, gpus_per_node=per_node,
                                      nvlink_domain=per_node if linked else min(machine.nvlink_domain, per_node))
    return machine


def run_plan(options: PlanOptions) -> Report:
    shape = model_shape(options)
    try:
        prices = load_prices(options.prices)
    except PricesError as error:
        raise PlanError(text_of(error)) from None
    machine = plan_machine(options)
    host = socket.gethostname()
    report = Report(tool_version=__version__, host=host)
    gpus = machine.gpus if machine else (options.gpus or 1)
    nvlink = machine.nvlink_domain if machine else 1
    setup = memory.TrainSetup(shape=shape, seq=options.seq, micro_batch=options.micro_batch,
                              precision=options.precision, optimizer=options.optimizer, recompute=options.recompute,
                              attention=options.attention, logits=options.logits)
    facts: dict[str, Any] = {"model": {"name": shape.name, "family": shape.family, "parameters": shape.parameters(),
                                       "layers": shape.layers, "hidden": shape.hidden, "heads": shape.heads,
                                       "vocab": shape.vocab},
                             "logits": setup.logits,
                             "machine": dataclasses.asdict(machine) if machine else None}
    if options.task == "infer":
        if machine is None:
            raise PlanError(sentence("error.plan.infer_needs_machine"))
        rows = strategy.plan_inference(shape, machine, options.infer_batch, options.context or options.seq,
                                       precision="bf16" if options.precision == "amp-bf16" else options.precision)
        report.sections["inference"] = rows
        report.findings.append(_inference_finding(host, rows))
    else:
        candidates = memory.strategies_for(gpus, nvlink, machine.nodes if machine else options.nodes)
        if options.strategies:
            known = [c.name for c in candidates]
            unknown = [name for name in options.strategies if name not in known]
            if unknown:
                raise PlanError(sentence("error.plan.strategies", unknown=repr(", ".join(unknown)), gpus=gpus,
                                         known=", ".join(known)))
            candidates = [c for c in candidates if c.name in options.strategies]
        if machine is not None:
            rows = strategy.plan_training(setup, machine, global_batch=options.global_batch, strategies=candidates)
            report.sections["strategies"] = [_row_document(row) for row in rows]
            report.findings.append(_fit_finding(host, machine, rows))
        else:  # memory only: nothing says how much memory a GPU has
            report.sections["strategies"] = [_memory_document(c, memory.memory_per_gpu(setup, c)) for c in candidates]
            report.findings.append(Finding(check_id="plan.fits", status=Status.SKIP, subject=Subject(host=host),
                                           **finding_text(said("plan.fits.no_machine"))))
    if options.known_batch and options.known_lr and options.known_gpus:
        report.sections["batch"] = scale_batch(known_batch=options.known_batch, known_lr=options.known_lr,
                                               known_gpus=options.known_gpus, new_gpus=gpus,
                                               optimizer=options.optimizer, micro_batch=options.micro_batch)
    if machine is not None:
        power = power_plan(machine, **options.power)
        report.sections["power"] = power
        report.findings.extend(_findings_from(host, power.get("findings", [])))
        report.sections["cost"] = cost_plan(machine, prices=prices, **options.cost)
    report.facts["plan"] = facts
    return report


def _row_document(row: Any) -> dict[str, Any]:
    document = _memory_document(row.strategy, row.memory)
    document.update(fits=row.fits, headroom_bytes=row.headroom_bytes, step_time_s=row.step_time_s,
                    compute_s=row.compute_s, communication_s=row.communication_s, bottleneck=row.bottleneck,
                    reasons=list(row.reasons), reasons_text=[said_json(reason) for reason in row.reasons])
    return document


def _memory_document(candidate: Any, breakdown: Any) -> dict[str, Any]:
    return {"name": candidate.name, "dp": candidate.dp, "tp": candidate.tp, "pp": candidate.pp,
            "zero": candidate.zero, "offload": candidate.offload,
            "memory_bytes": {"parameters": breakdown.parameters, "gradients": breakdown.gradients,
                             "optimizer": breakdown.optimizer, "activations": breakdown.activations,
                             "other": breakdown.other, "backward_working": breakdown.backward_working,
                             "total": breakdown.total},
            "memory_peak": breakdown.peak_phase,
            "memory_terms": dict(breakdown.terms), "sources": list(breakdown.sources), "fits": None}


def _fit_finding(host: str, machine: Machine, rows: list[Any]) -> Finding:
    fitting = [row for row in rows if row.fits]
    gib = machine.memory_bytes_per_gpu / 2**30 if machine.memory_bytes_per_gpu else None
    gpus = said("plan.gpus.sized", count=machine.gpus, name=machine.gpu_name, gib=gib) if gib else \
        said("plan.gpus", count=machine.gpus, name=machine.gpu_name)
    if not fitting:
        smallest = min(rows, key=lambda row: row.memory.total) if rows else None
        text = said("plan.fits.none", gpus=gpus, smallest=smallest.strategy.name,
                    gib=smallest.memory.total / 2**30) if smallest else said("plan.fits.none.no_strategy", gpus=gpus)
        return Finding(check_id="plan.fits", status=Status.FAIL, subject=Subject(host=host), **finding_text(text))
    best = fitting[0]
    values = dict(fitting=len(fitting), strategies=len(rows), gpus=said("plan.gpus", count=machine.gpus,
                                                                         name=machine.gpu_name),
                  best=best.strategy.name, gib=best.memory.total / 2**30)
    text = said("plan.fits.step", step_s=best.step_time_s, bound=_bound(best.bottleneck), **values) \
        if best.step_time_s else said("plan.fits", **values)
    return Finding(check_id="plan.fits", status=Status.PASS, subject=Subject(host=host), **finding_text(text),
                   observed={"best": best.strategy.name, "fitting": [row.strategy.name for row in fitting]})


def _bound(bottleneck: str) -> object:
    """`compute-bound`, `communication-bound`, …: what limits the step, in words."""
    msg_id = f"plan.bound.{bottleneck.replace(' ', '_')}"
    return said(msg_id) if msg_id in catalogue("en") else said("plan.bound", bottleneck=bottleneck)


def _inference_finding(host: str, rows: list[dict[str, Any]]) -> Finding:
    fitting = [row for row in rows if row.get("fits")]
    if not fitting:
        return Finding(check_id="plan.infer_fits", status=Status.FAIL, subject=Subject(host=host),
                       **finding_text(said("plan.infer_fits.none")), observed=rows)
    first = fitting[0]
    return Finding(check_id="plan.infer_fits", status=Status.PASS, subject=Subject(host=host),
                   **finding_text(said("plan.infer_fits", tp=first.get("tp"), gib=first["total_bytes"] / 2**30)),
                   observed=first)


def _findings_from(host: str, entries: list[dict[str, Any]]) -> list[Finding]:
    """power.py's entries as findings; an entry that names its catalogue text (`message_id`, `message_values`) keeps
    it, so that it renders in the reader's language."""
    return [Finding(check_id=entry["id"], status=Status(entry["status"]), subject=Subject(host=host),
                    message=entry["message"], fix=entry.get("fix"), observed=entry.get("observed"),
                    expected=entry.get("expected"), refs=list(entry.get("refs", [])),
                    message_id=entry.get("message_id"), message_values=entry.get("message_values"))
            for entry in entries]
