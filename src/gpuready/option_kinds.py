"""The argparse type of each concept on the command line: one unit and one range per concept, in every verb.

Each type carries its range in words (`describe`), read by --help, the README's option table and the tests.
"""

from __future__ import annotations

import argparse
import re

from gpuready.options import (MAX_GPUS, MAX_GPUS_PER_NODE, MAX_INTERVAL_S, MAX_NODES, MAX_RANKS, MAX_RUN_S,
                              MAX_TIMEOUT_S, MAX_WATTS, number, whole)
from gpuready.shapes import SHAPE_LIMITS

NODES = whole("nodes", 1, MAX_NODES)
PROCS_PER_NODE = whole("processes per node (one per GPU)", 1, MAX_RANKS)
"""torchrun's --nproc-per-node; the ranks one node can start bound it further (one per GPU, or per CPU)."""
EXPECTED_GPUS = whole("GPUs per node", 1, MAX_GPUS_PER_NODE)
RANKS = whole("ranks", 1, MAX_RANKS)
ALL_GPUS = whole("GPUs", 1, MAX_GPUS)
TIMEOUT_S = number("seconds", 0, MAX_TIMEOUT_S, above_minimum=True)
INTERVAL_S = number("seconds", 0, MAX_INTERVAL_S, above_minimum=True)
RUN_S = number("seconds", 0, MAX_RUN_S, above_minimum=True)
WATTS = number("watts", 0, MAX_WATTS, above_minimum=True)
PORT = whole("TCP port", 1, 65_535, noun="a TCP port")
ANY_PORT = whole("TCP port", 0, 65_535, noun="a TCP port")
SAMPLES = whole("samples", 1, 1_000_000_000)
GB_PER_S = number("GB/s", 0, 1_000_000, above_minimum=True)
TOKENS = whole("tokens", 1, SHAPE_LIMITS["max_positions"])
MICRO_BATCH = whole("sequences", 1, 1_048_576)
GLOBAL_BATCH = whole("sequences", 1, 1 << 30)
LEARNING_RATE = number("learning rate", 0, 100, above_minimum=True)
ROOM_C = number("degrees Celsius", -50, 60)
PRICE_KWH = number("USD per kWh", 0, 100)
MONTHS = whole("months", 1, 600)
UTILISATION = number("the time (a share)", 0, 1, above_minimum=True)
STEPS = whole("steps", 1, 1_000_000)
WARMUP = whole("steps", 0, 1_000_000)
MEMBERS = whole("archive members", 1, 100_000_000)
MIB = whole("MiB", 1, 1 << 20)
SHAPE = {
    "layers": whole("layers", 1, SHAPE_LIMITS["layers"]),
    "hidden": whole("units (the model width)", 1, SHAPE_LIMITS["hidden"]),
    "heads": whole("attention heads", 1, SHAPE_LIMITS["heads"]),
    "kv_heads": whole("key/value heads", 1, SHAPE_LIMITS["kv_heads"]),
    "ffn_hidden": whole("units (the MLP width)", 1, SHAPE_LIMITS["ffn_hidden"]),
    "vocab": whole("tokens (the vocabulary)", 1, SHAPE_LIMITS["vocab"]),
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
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size like 64M or 1G (1 byte to 1T)")
    size = int(float(digits) * units[unit])
    if not 1 <= size <= MAX_BYTES:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size from 1 byte to 1T")
    return size


size_bytes.describe, size_bytes.minimum, size_bytes.maximum, size_bytes.above_minimum = (  # type: ignore[attr-defined]
    "a size in bytes from 1 to 1T (e.g. 64M, 1G)", 1, MAX_BYTES, False)


class CircuitWatts(float):
    """A branch circuit's nominal rating in watts, with the words it was given in (`230V/16A`): plan's report
    names the circuit as written, check's power budget needs the watts."""

    text: str


def circuit(text: str) -> CircuitWatts:
    """--circuit: 230V/16A, 120V20A, household, 2200W, 2.2kW, or a bare number of watts (3680)."""
    from gpuready.verbs.plan.power import circuit_watts
    cleaned = str(text).strip()
    if re.fullmatch(r"\d{1,9}(\.\d{1,6})?", cleaned):  # a bare number: watts, as check's --circuit-watts took it
        cleaned += "W"
    try:
        watts = circuit_watts(cleaned[:60])[1]
    except ValueError:
        watts = -1.0
    if not 0 < watts <= MAX_WATTS:
        raise argparse.ArgumentTypeError(f"{str(text)[:40]!r} is not {circuit.describe}")  # type: ignore[attr-defined]
    value = CircuitWatts(watts)
    value.text = cleaned
    return value


circuit.describe, circuit.minimum, circuit.maximum, circuit.above_minimum = (  # type: ignore[attr-defined]
    f"a circuit: VOLTSV/AMPSA (230V/16A), household, or watts (2200W, 2.2kW, 3680) above 0 to {MAX_WATTS:,.0f}",
    0.0, MAX_WATTS, True)
