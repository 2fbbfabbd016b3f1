"""`gpuready plan` on the command line: its options and the plan they ask for."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds as kind
from gpuready.i18n import said, said_of
from gpuready.options import MAX_GPUS
from gpuready.options import UsageError
from gpuready.cli.output import check_out, emit
from gpuready.verbs.plan.run import PlanError, PlanOptions, run_plan

SUMMARY = "does the model fit, with which strategy, how fast; batch/LR, power, cost"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    groups.add_model(parser)
    run_group = parser.add_argument_group(said("cli.group.training_run"))
    groups.add(run_group, "seq", said("cli.plan.seq"), default=1024)
    groups.add(run_group, "micro_batch", said("cli.plan.micro_batch"), default=1)
    groups.add(run_group, "global_batch")
    groups.add(run_group, "precision")
    run_group.add_argument("--optimizer", choices=("adamw", "sgd", "adafactor"), default="adamw",
                           help=said("cli.plan.optimizer"))
    groups.add(run_group, "recompute")
    groups.add(run_group, "logits")
    run_group.add_argument("--attention", choices=("flash", "eager"), default="flash",
                           help=said("cli.plan.attention"))
    groups.add(run_group, "strategies", said("cli.plan.strategies"))
    run_group.add_argument("--task", choices=("train", "infer"), default="train", help=said("cli.plan.task"))
    run_group.add_argument("--batch", type=kind.MICRO_BATCH, default=1, metavar="B",
                           help=groups.with_range(said("cli.plan.batch"), kind.MICRO_BATCH))
    run_group.add_argument("--context", type=kind.TOKENS, metavar="S",
                           help=groups.with_range(said("cli.plan.context"), kind.TOKENS))
    where = parser.add_argument_group(said("cli.group.machine"))
    where.add_argument("--machine", metavar="COUNTxMODEL", help=said("cli.plan.machine"))
    groups.add(where, "bundle", said("cli.plan.bundle"))
    groups.add(where, "nnodes", said("cli.plan.nnodes"), default=1)
    groups.add(where, "nproc_per_node", said("cli.plan.nproc_per_node"))
    groups.add(where, "validate_report", said("cli.plan.validate_report"))
    scale = parser.add_argument_group(said("cli.group.known_good_run"))
    scale.add_argument("--known-batch", type=kind.GLOBAL_BATCH, metavar="B",
                       help=groups.with_range(said("cli.plan.known_batch"), kind.GLOBAL_BATCH))
    scale.add_argument("--known-lr", type=kind.LEARNING_RATE, metavar="LR",
                       help=groups.with_range(said("cli.plan.known_lr"), kind.LEARNING_RATE))
    scale.add_argument("--known-gpus", type=kind.ALL_GPUS, metavar="N",
                       help=groups.with_range(said("cli.plan.known_gpus"), kind.ALL_GPUS))
    money = parser.add_argument_group(said("cli.group.power_and_cost"))
    groups.add_power(money)
    money.add_argument("--room-c", type=kind.ROOM_C, metavar="C",
                       help=groups.with_range(said("cli.plan.room_c"), kind.ROOM_C))
    money.add_argument("--price-kwh", type=kind.PRICE_KWH, metavar="PRICE",
                       help=groups.with_range(said("cli.plan.price_kwh"), kind.PRICE_KWH))
    money.add_argument("--horizon-months", type=kind.MONTHS, default=36, metavar="M",
                       help=groups.with_range(said("cli.plan.horizon_months"), kind.MONTHS))
    money.add_argument("--utilisation", type=kind.UTILISATION, default=0.6, metavar="0..1",
                       help=groups.with_range(said("cli.plan.utilisation"), kind.UTILISATION))
    money.add_argument("--prices", type=Path, metavar="FILE", help=said("cli.plan.prices"))
    groups.add_output(parser)


def run(args: argparse.Namespace) -> int:
    check_out(args)
    circuit = args.circuit.text if args.circuit is not None else None
    power = {key: value for key, value in (("psu_w", args.psu_watts), ("circuit", circuit),
                                           ("room_c", args.room_c), ("price_per_kwh", args.price_kwh))
             if value is not None}
    gpus = args.nproc_per_node * args.nnodes if args.nproc_per_node else getattr(args, "gpus_total", None)
    if gpus is not None and gpus > MAX_GPUS:
        raise UsageError(said("error.plan.too_many_gpus", nnodes=args.nnodes, per_node=args.nproc_per_node, gpus=gpus,
                              most=MAX_GPUS))
    options = PlanOptions(preset=args.preset, hf_config=args.model_config, family=args.family, layers=args.layers,
                          hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads, ffn_hidden=args.ffn_hidden,
                          vocab=args.vocab, seq=args.seq, micro_batch=args.micro_batch,
                          global_batch=args.global_batch, gpus=gpus, nodes=args.nnodes, machine=args.machine,
                          bundle=args.bundle, precision=args.precision, optimizer=args.optimizer,
                          recompute=args.recompute, attention=args.attention, logits=args.logits,
                          strategies=groups.comma_list(args.strategies), task=args.task, infer_batch=args.batch,
                          context=args.context, known_batch=args.known_batch, known_lr=args.known_lr,
                          known_gpus=args.known_gpus, power=power,
                          cost={"horizon_months": args.horizon_months, "utilisation": args.utilisation},
                          prices=args.prices, measured=args.validate_report)
    try:
        report = run_plan(options)
    except PlanError as error:
        raise UsageError(said_of(error)) from None
    return emit(report, args)
