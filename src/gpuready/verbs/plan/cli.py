"""`gpuready plan` on the command line: its options and the plan they ask for."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuready import option_groups as groups
from gpuready import option_kinds as kind
from gpuready.options import MAX_GPUS
from gpuready.usage import UsageError
from gpuready.verbs.output import check_out, emit

SUMMARY = "does the model fit, with which strategy, how fast; batch/LR, power, cost"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups.add_model(parser)
    run_group = parser.add_argument_group("training run")
    groups.add(run_group, "seq", "sequence length (default 1024)", default=1024)
    groups.add(run_group, "micro_batch", "sequences per GPU per step (default 1)", default=1)
    groups.add(run_group, "global_batch")
    groups.add(run_group, "precision")
    run_group.add_argument("--optimizer", choices=("adamw", "sgd", "adafactor"), default="adamw",
                           help="the optimizer whose states are counted")
    groups.add(run_group, "recompute")
    run_group.add_argument("--attention", choices=("flash", "eager"), default="flash",
                           help="flash: the attention scores are never held whole; eager: they are")
    groups.add(run_group, "strategies", "only these strategies (ddp, zero1, zero2, fsdp, tp=2, ...)")
    run_group.add_argument("--task", choices=("train", "infer"), default="train",
                           help="infer: weights and KV cache per tensor-parallel degree")
    run_group.add_argument("--batch", type=kind.MICRO_BATCH, default=1, metavar="B",
                           help=groups.with_range("with --task infer: concurrent sequences", kind.MICRO_BATCH))
    run_group.add_argument("--context", type=kind.TOKENS, metavar="S",
                           help=groups.with_range("with --task infer: context length (default --seq)", kind.TOKENS))
    where = parser.add_argument_group("machine (default: this one)")
    where.add_argument("--machine", metavar="COUNTxMODEL", help="a machine described: 8xH100-SXM, 2xRTX4090")
    groups.add(where, "bundle", "the machine of a support bundle")
    groups.add(where, "nnodes", "nodes of the machine (default 1)", default=1)
    groups.add(where, "nproc_per_node", "plan for G GPUs per node (default: the machine's)")
    groups.add(where, "validate_report", "a validate report (--out): its TFLOP/s, busbw and host copy figures "
                                         "replace assumptions")
    scale = parser.add_argument_group("batch and learning rate from a known-good run")
    scale.add_argument("--known-batch", type=kind.GLOBAL_BATCH, metavar="B",
                       help=groups.with_range("the global batch of a run that trained well", kind.GLOBAL_BATCH))
    scale.add_argument("--known-lr", type=kind.LEARNING_RATE, metavar="LR",
                       help=groups.with_range("its learning rate", kind.LEARNING_RATE))
    scale.add_argument("--known-gpus", type=kind.ALL_GPUS, metavar="N",
                       help=groups.with_range("its GPUs, all nodes together", kind.ALL_GPUS))
    money = parser.add_argument_group("power and cost")
    groups.add_power(money)
    money.add_argument("--room-c", type=kind.ROOM_C, metavar="C",
                       help=groups.with_range("the room's air temperature", kind.ROOM_C))
    money.add_argument("--price-kwh", type=kind.PRICE_KWH, metavar="PRICE",
                       help=groups.with_range("the electricity price", kind.PRICE_KWH))
    money.add_argument("--horizon-months", type=kind.MONTHS, default=36, metavar="M",
                       help=groups.with_range("how long the cost comparison runs (default 36)", kind.MONTHS))
    money.add_argument("--utilisation", type=kind.UTILISATION, default=0.6, metavar="0..1",
                       help=groups.with_range("share of the time the GPUs work (default 0.6)", kind.UTILISATION))
    money.add_argument("--prices", type=Path, metavar="FILE",
                       help="a TOML file of prices overriding the defaults (a regular file, at most 1 MiB)")
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    from gpuready.verbs.plan.run import PlanError, PlanOptions, run_plan
    check_out(args)
    circuit = args.circuit.text if args.circuit is not None else None
    power = {key: value for key, value in (("psu_w", args.psu_watts), ("circuit", circuit),
                                           ("room_c", args.room_c), ("price_per_kwh", args.price_kwh))
             if value is not None}
    gpus = args.nproc_per_node * args.nnodes if args.nproc_per_node else getattr(args, "gpus_total", None)
    if gpus is not None and gpus > MAX_GPUS:
        raise UsageError(f"--nnodes {args.nnodes} x --nproc-per-node {args.nproc_per_node} is {gpus:,} GPUs, more "
                         f"than {MAX_GPUS:,}")
    options = PlanOptions(preset=args.preset, hf_config=args.model_config, family=args.family, layers=args.layers,
                          hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads, ffn_hidden=args.ffn_hidden,
                          vocab=args.vocab, seq=args.seq, micro_batch=args.micro_batch,
                          global_batch=args.global_batch, gpus=gpus, nodes=args.nnodes, machine=args.machine,
                          bundle=args.bundle, precision=args.precision, optimizer=args.optimizer,
                          recompute=args.recompute, attention=args.attention,
                          strategies=groups.comma_list(args.strategies), task=args.task, infer_batch=args.batch,
                          context=args.context, known_batch=args.known_batch, known_lr=args.known_lr,
                          known_gpus=args.known_gpus, power=power,
                          cost={"horizon_months": args.horizon_months, "utilisation": args.utilisation},
                          prices=args.prices, measured=args.validate_report)
    try:
        report = run_plan(options)
    except PlanError as error:
        raise UsageError(str(error)) from None
    return emit(report, args)
