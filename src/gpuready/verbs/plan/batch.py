"""Batch size and learning rate when the GPU count changes: the linear rule (SGD) or the square-root rule (Adam family).

Rules, optimizer families and the "verify above 8x" boundary are data in knowledge/prices.toml `[batch]`, with their
sources (Goyal et al. 2017; Krizhevsky 2014; Malladi et al. 2022; LEGW).
"""

from __future__ import annotations

import math
from typing import Any

from gpuready.i18n import Sentence, said, said_json, sentence
from gpuready.knowledge import load_table


def _rules() -> dict[str, Any]:
    return load_table("prices")["batch"]


def _check_inputs(known_batch: int, known_lr: float, known_gpus: int, new_gpus: int, micro_batch: int | None) -> None:
    for name, value in (("known_batch", known_batch), ("known_gpus", known_gpus), ("new_gpus", new_gpus)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive whole number, not {value!r}")
    if micro_batch is not None and (not isinstance(micro_batch, int) or isinstance(micro_batch, bool)
                                    or micro_batch < 1):
        raise ValueError(f"micro_batch must be a positive whole number, not {micro_batch!r}")
    if not isinstance(known_lr, (int, float)) or isinstance(known_lr, bool) or not known_lr > 0 \
            or math.isinf(known_lr):
        raise ValueError(f"known_lr must be a positive number, not {known_lr!r}")


def _rule_of(optimizer: str, rules: dict[str, Any]) -> tuple[str, str]:
    """(`linear` | `sqrt`, its source) for the optimizer's family."""
    family = optimizer.strip().lower().replace("-", "_")
    if family in rules["linear_optimizers"]:
        return "linear", rules["linear_source"]
    if family in rules["sqrt_optimizers"]:
        return "sqrt", rules["sqrt_source"]
    known = ", ".join(rules["linear_optimizers"] + rules["sqrt_optimizers"])
    raise ValueError(f"optimizer {optimizer!r}: no scaling rule known (known: {known})")


def _accumulation(new_global: int, new_gpus: int, micro_batch: int | None,
                  notes: list[str]) -> tuple[int | None, int | None]:
    """(micro-batch per GPU, accumulation steps) with global = micro × GPUs × accumulation; None where the global
    batch does not divide (a note then says the nearest that does)."""
    if micro_batch is None:
        per_gpu_total = new_global / new_gpus
        micro = int(per_gpu_total) if per_gpu_total == int(per_gpu_total) and per_gpu_total >= 1 else None
        steps = 1 if micro is not None else None
    else:
        micro = micro_batch
        steps_exact = new_global / (micro * new_gpus)
        steps = int(steps_exact) if steps_exact == int(steps_exact) and steps_exact >= 1 else None
    if steps is None:
        per_gpu = said("plan.batch.micro", micro_batch=micro_batch) if micro_batch else said("plan.batch.whole")
        nearest = None
        if micro_batch:
            up = max(1, math.ceil(new_global / (micro_batch * new_gpus)))
            nearest = micro_batch * new_gpus * up
        notes.append(sentence("plan.batch.indivisible", batch=new_global, gpus=new_gpus, per_gpu=per_gpu,
                              nearest=said("plan.batch.nearest", nearest=nearest, accumulation=up) if nearest else ""))
    return micro, steps


def _warmup(rule: str, factor: float, known_lr: float, new_lr: float, rules: dict[str, Any]) -> Sentence:
    if factor > 1:
        if rule == "linear":
            return sentence("plan.batch.warmup.linear", known_lr=known_lr, new_lr=new_lr,
                            epochs=rules["goyal_warmup_epochs"])
        return sentence("plan.batch.warmup.sqrt", new_lr=new_lr, factor=factor)
    if factor < 1:
        return sentence("plan.batch.warmup.smaller")
    return sentence("plan.batch.warmup.unchanged")


def scale_batch(*, known_batch: int, known_lr: float, known_gpus: int, new_gpus: int, optimizer: str = "adamw",
                micro_batch: int | None = None, keep_global_batch: bool = False) -> dict[str, Any]:
    """The global batch, learning rate, accumulation steps and warm-up for `new_gpus`, from a run known to work.

    Without `keep_global_batch` the per-GPU work is kept, so the global batch grows with the GPU count and the
    learning rate follows the rule of the optimizer's family. With it the global batch (and the learning rate) stay,
    and gradient accumulation makes up the difference: global = micro x GPUs x accumulation steps.
    ValueError for a count, batch or rate that is not positive, or an optimizer of no known family.
    """
    rules = _rules()
    _check_inputs(known_batch, known_lr, known_gpus, new_gpus, micro_batch)
    rule, source = _rule_of(optimizer, rules)
    notes: list[str] = []
    if keep_global_batch:
        new_global = known_batch
    else:
        new_global = known_batch * new_gpus / known_gpus
        if new_global != int(new_global):
            notes.append(sentence("plan.batch.rounded_down", known_batch=known_batch, new_gpus=new_gpus,
                                  known_gpus=known_gpus))
        new_global = int(new_global)
    factor = new_global / known_batch
    lr_factor = factor if rule == "linear" else math.sqrt(factor)
    new_lr = known_lr * lr_factor
    micro, steps = _accumulation(new_global, new_gpus, micro_batch, notes)
    warmup = _warmup(rule, factor, known_lr, new_lr, rules)
    extrapolation = max(factor, 1 / factor) if factor > 0 else math.inf
    verify = extrapolation > rules["verify_above_factor"]
    verify_message = sentence("plan.batch.verify", factor=extrapolation, trusted=rules["verify_above_factor"]) \
        if verify else None
    return {
        "known": {"global_batch": known_batch, "lr": known_lr, "gpus": known_gpus},
        "optimizer": optimizer,
        "rule": rule,
        "new_gpus": new_gpus,
        "new_global_batch": new_global,
        "batch_factor": factor,
        "lr_factor": lr_factor,
        "new_lr": new_lr,
        "micro_batch": micro,
        "accumulation_steps": steps,
        "divides": steps is not None,
        "warmup": warmup,
        "verify": verify,
        "verify_message": verify_message,
        "notes": notes,
        "texts": {"warmup": said_json(warmup), "verify_message": said_json(verify_message),
                  "notes": [said_json(note) for note in notes]},
        "refs": [source, rules["verify_source"]],
    }
