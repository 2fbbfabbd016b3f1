"""The argparse type of each concept on the command line: one unit and one range per concept, in every verb.

Each type carries its range in words: `describe`, the English read by the README's option table and the tests, and
`range_words`, the same as catalogue text (domain `cli`) that --help and the parser's refusals say in the user's
language.
"""

from __future__ import annotations

import re

from typing import Callable, TypeVar

from gpuready.i18n import said
from gpuready.options import (MAX_GPUS, MAX_GPUS_PER_NODE, MAX_INTERVAL_S, MAX_NODES, MAX_RANKS, MAX_RUN_S,
                              MAX_TIMEOUT_S, MAX_WATTS, _thousands, number, whole)
from gpuready.shapes import SHAPE_LIMITS
from gpuready.cli.usage import Refused
from gpuready.estimate.power import circuit_watts

Kind = TypeVar("Kind", bound=Callable)


def worded(kind_of: Kind, unit: str, *, noun: bool = False) -> Kind:
    """`kind_of` (gpuready.options' whole or number) with its range as catalogue text, `range_words`: the unit is
    `cli.unit.<unit>` (with `noun`, the unit names the thing itself: "a TCP port from 1 to 65,535")."""
    bounds = {"minimum": _thousands(kind_of.minimum), "maximum": _thousands(kind_of.maximum)}
    if noun:
        kind_of.range_words = said("cli.range.whole.noun", noun=said(f"cli.unit.{unit}"), **bounds)
    else:
        words = "whole" if kind_of.__name__ == "whole number" else "number.above" if kind_of.above_minimum else "number"
        kind_of.range_words = said(f"cli.range.{words}", unit=said(f"cli.unit.{unit}"), **bounds)
    return kind_of


NODES = worded(whole("nodes", 1, MAX_NODES), "nodes")
PROCS_PER_NODE = worded(whole("processes per node (one per GPU)", 1, MAX_RANKS), "procs_per_node")
"""torchrun's --nproc-per-node; the ranks one node can start bound it further (one per GPU, or per CPU)."""
EXPECTED_GPUS = worded(whole("GPUs per node", 1, MAX_GPUS_PER_NODE), "gpus_per_node")
RANKS = worded(whole("ranks", 1, MAX_RANKS), "ranks")
ALL_GPUS = worded(whole("GPUs", 1, MAX_GPUS), "gpus")
TIMEOUT_S = worded(number("seconds", 0, MAX_TIMEOUT_S, above_minimum=True), "seconds")
INTERVAL_S = worded(number("seconds", 0, MAX_INTERVAL_S, above_minimum=True), "seconds")
RUN_S = worded(number("seconds", 0, MAX_RUN_S, above_minimum=True), "seconds")
WATTS = worded(number("watts", 0, MAX_WATTS, above_minimum=True), "watts")
PORT = worded(whole("TCP port", 1, 65_535, noun="a TCP port"), "tcp_port", noun=True)
ANY_PORT = worded(whole("TCP port", 0, 65_535, noun="a TCP port"), "tcp_port", noun=True)
SAMPLES = worded(whole("samples", 1, 1_000_000_000), "samples")
GB_PER_S = worded(number("GB/s", 0, 1_000_000, above_minimum=True), "gb_per_s")
TOKENS = worded(whole("tokens", 1, SHAPE_LIMITS["max_positions"]), "tokens")
MICRO_BATCH = worded(whole("sequences", 1, 1_048_576), "sequences")
GLOBAL_BATCH = worded(whole("sequences", 1, 1 << 30), "sequences")
LEARNING_RATE = worded(number("learning rate", 0, 100, above_minimum=True), "learning_rate")
ROOM_C = worded(number("degrees Celsius", -50, 60), "celsius")
PRICE_KWH = worded(number("USD per kWh", 0, 100), "usd_per_kwh")
MONTHS = worded(whole("months", 1, 600), "months")
UTILISATION = worded(number("the time (a share)", 0, 1, above_minimum=True), "share")
STEPS = worded(whole("steps", 1, 1_000_000), "steps")
WARMUP = worded(whole("steps", 0, 1_000_000), "steps")
MEMBERS = worded(whole("archive members", 1, 100_000_000), "members")
MIB = worded(whole("MiB", 1, 1 << 20), "mib")
SHAPE = {
    "layers": worded(whole("layers", 1, SHAPE_LIMITS["layers"]), "layers"),
    "hidden": worded(whole("units (the model width)", 1, SHAPE_LIMITS["hidden"]), "hidden"),
    "heads": worded(whole("attention heads", 1, SHAPE_LIMITS["heads"]), "heads"),
    "kv_heads": worded(whole("key/value heads", 1, SHAPE_LIMITS["kv_heads"]), "kv_heads"),
    "ffn_hidden": worded(whole("units (the MLP width)", 1, SHAPE_LIMITS["ffn_hidden"]), "ffn_hidden"),
    "vocab": worded(whole("tokens (the vocabulary)", 1, SHAPE_LIMITS["vocab"]), "vocab"),
}
"""A model dimension (--layers, --ffn-hidden, ...): 1 to the shape's limit."""
MAX_BYTES = 1 << 40
"""The largest collective size --max-bytes accepts (1 TiB)."""


def size_bytes(text: str) -> int:
    """--max-bytes: 64M, 1G, 4096 ...; from 1 byte to 1 TiB."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1] if value and value[-1] in "KMGT" else ""
    digits = value[:-1] if unit else value
    if len(digits) > 20 or not re.fullmatch(r"\d+(\.\d+)?", digits.strip()):
        raise Refused(said("cli.value.not_a_size", value=repr(text[:40])))
    size = int(float(digits) * units[unit])
    if not 1 <= size <= MAX_BYTES:
        raise Refused(said("cli.value.size_out_of_range", value=repr(text[:40])))
    return size


size_bytes.describe, size_bytes.minimum, size_bytes.maximum, size_bytes.above_minimum = (  # type: ignore[attr-defined]
    "a size in bytes from 1 to 1T (e.g. 64M, 1G)", 1, MAX_BYTES, False)
size_bytes.range_words = said("cli.range.size")  # type: ignore[attr-defined]


class CircuitWatts(float):
    """A branch circuit's nominal rating in watts, with the words it was given in (`230V/16A`): plan's report
    names the circuit as written, check's power budget needs the watts."""

    text: str


def circuit(text: str) -> CircuitWatts:
    """--circuit: 230V/16A, 120V20A, household, 2200W, 2.2kW, or a bare number of watts (3680)."""
    cleaned = str(text).strip()
    if re.fullmatch(r"\d{1,9}(\.\d{1,6})?", cleaned):  # a bare number: watts, as check's --circuit-watts took it
        cleaned += "W"
    try:
        watts = circuit_watts(cleaned[:60])[1]
    except ValueError:
        watts = -1.0
    if not 0 < watts <= MAX_WATTS:
        raise Refused(said("cli.value.not", value=repr(str(text)[:40]),
                           range=circuit.range_words))  # type: ignore[attr-defined]
    value = CircuitWatts(watts)
    value.text = cleaned
    return value


circuit.describe, circuit.minimum, circuit.maximum, circuit.above_minimum = (  # type: ignore[attr-defined]
    f"a circuit: VOLTSV/AMPSA (230V/16A), household, or watts (2200W, 2.2kW, 3680) above 0 to {MAX_WATTS:,.0f}",
    0.0, MAX_WATTS, True)
circuit.range_words = said("cli.range.circuit", maximum=_thousands(MAX_WATTS))  # type: ignore[attr-defined]
