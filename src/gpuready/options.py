"""Hostile-input guards shared by every verb: numeric option types with a range and a unit, and input files (model
configs, prices, reports) read from regular files only, with a size cap, strict JSON constants and bounded nesting.

A value out of range, NaN, an infinity or a file that is a FIFO or a device is a usage error (exit 2): one sentence
naming the option or file, never a traceback and never a hang.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from gpuready.i18n import DEFAULT_LANGUAGE, Said, Sentence, in_language, said_of, sentence
from gpuready.safe_text import without_surrogates

MAX_NODES = 100_000
"""Nodes of one job (torchrun's --nnodes)."""
MAX_GPUS_PER_NODE = 1_024
MAX_GPUS = 1_048_576
"""GPUs of one job in all (plan: --nnodes x --nproc-per-node, --known-gpus)."""
MAX_RANKS = 1_000_000
"""Ranks or workers on one machine; the CPUs or GPUs there bound them further (4 per CPU with --oversubscribe)."""
MAX_TIMEOUT_S = 86_400.0
"""One day: the longest wait for one operation or the start-up."""
MAX_RUN_S = 604_800.0
"""One week: the longest whole run (validate --deadline, burn --duration)."""
MAX_INTERVAL_S = 3_600.0
MAX_WATTS = 10_000_000.0
MAX_INPUT_BYTES = 1 << 20
"""A model config.json or a prices file: 1 MiB."""
MAX_REPORT_BYTES = 64 << 20
"""A gpuready report (plan and bench --validate-report): 64 MiB."""
MAX_NESTING = 64
_MAX_DIGITS = 40


class UsageError(Exception):
    """A wrong option or unreadable input: one sentence, exit code 2. The sentence is text, or a `Said` that the
    command line renders in the user's language (`str()` is its English)."""

    def text(self, lang: str = DEFAULT_LANGUAGE) -> str:
        sentence = self.args[0] if self.args else ""
        return in_language(sentence, lang) if isinstance(sentence, Said) else str(sentence)

    def __str__(self) -> str:
        return self.text()


class InputFileError(ValueError):
    """An input file that is not a regular file, too large, not UTF-8, not strict JSON or nested too deeply."""


def _thousands(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def whole(unit: str, minimum: int, maximum: int, *, noun: str | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number of `unit` from `minimum` to `maximum` (both included); `noun` replaces
    "a whole number of UNIT" where the unit names the thing itself ("a TCP port")."""
    describe = f"{noun or f'a whole number of {unit}'} from {_thousands(minimum)} to {_thousands(maximum)}"

    def parse(text: str) -> int:
        cleaned = str(text).strip()
        if len(cleaned) > _MAX_DIGITS or not re.fullmatch(r"[+-]?\d+", cleaned):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {describe}")
        value = int(cleaned)
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {describe}")
        return value

    return _labelled(parse, "whole number", describe, minimum, maximum, above_minimum=False)


def number(unit: str, minimum: float, maximum: float, *, above_minimum: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number of `unit` from `minimum` (excluded where `above_minimum`) to `maximum`."""
    lower = f"above {_thousands(minimum)}" if above_minimum else f"from {_thousands(minimum)}"
    describe = f"a number of {unit} {lower} to {_thousands(maximum)}"

    def parse(text: str) -> float:
        cleaned = str(text).strip()
        try:
            value = float(cleaned) if len(cleaned) <= _MAX_DIGITS else math.nan
        except ValueError:
            value = math.nan
        low_ok = value > minimum if above_minimum else value >= minimum
        if not (math.isfinite(value) and low_ok and value <= maximum):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not {describe}")
        return value

    return _labelled(parse, "number", describe, minimum, maximum, above_minimum=above_minimum)


def _labelled(parse: Callable, name: str, describe: str, minimum: float, maximum: float, *,
              above_minimum: bool) -> Callable:
    """The range an option type accepts, on the type itself: --help and the tests read it from there."""
    parse.describe, parse.minimum, parse.maximum = describe, minimum, maximum  # type: ignore[attr-defined]
    parse.above_minimum = above_minimum  # type: ignore[attr-defined]
    parse.__name__ = name
    return parse


def _shown(text: Any) -> str:
    text = str(text)
    return repr(text if len(text) <= _MAX_DIGITS else text[:_MAX_DIGITS] + "…")


def check_range(label: str, value: Any, minimum: float, maximum: float, *, whole_number: bool = True,
                optional: bool = False) -> Any:
    """A value read from a file: an int (or a finite number) inside the range, else InputFileError naming `label`."""
    if value is None and optional:
        return None
    ok_type = isinstance(value, int) if whole_number else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not (math.isfinite(value) and minimum <= value <= maximum):
        raise InputFileError(sentence("error.input.range." + ("whole" if whole_number else "number"), label=label,
                                      minimum=_thousands(minimum), maximum=_thousands(maximum),
                                      value=_shown(value) if isinstance(value, str) else repr(value)[:_MAX_DIGITS]))
    return value


def read_input_text(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The text of a regular file of at most `max_bytes`: never opens a FIFO or a device (no hang, no endless
    read), and checks again on the open file. InputFileError otherwise."""
    named = {"what": what, "path": str(path)}
    try:
        info = os.stat(path)
    except OSError as error:
        raise InputFileError(sentence("error.input.unreadable", reason=str(error.strerror or error), **named)) from None
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError(sentence("error.input.not_regular.kind", kind=file_kind(info.st_mode), **named))
    if info.st_size > max_bytes:
        raise InputFileError(sentence("error.input.too_large", kib=max_bytes // 1024, **named))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise InputFileError(sentence("error.input.not_regular", **named))
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise InputFileError(sentence("error.input.unreadable", reason=str(error.strerror or error), **named)) from None
    if len(data) > max_bytes:
        raise InputFileError(sentence("error.input.too_large", kib=max_bytes // 1024, **named))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputFileError(sentence("error.input.not_utf8", byte=error.start, **named)) from None


def file_kind(mode: int) -> Sentence:
    """What a path that is not a regular file is, in words (`file.kind.*`; its str() is the English)."""
    if stat.S_ISDIR(mode):
        return sentence("file.kind.folder")
    if stat.S_ISFIFO(mode):
        return sentence("file.kind.fifo")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return sentence("file.kind.device")
    if stat.S_ISSOCK(mode):
        return sentence("file.kind.socket")
    return sentence("file.kind.other")


_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
"""A JSON string, or an unterminated one to the end of the text; possessive, so that each string is read once (the
alternation without them backtracks, and retrying from each quote of an unterminated `\\"\\"…` made it
quadratic)."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_AS_PARENTHESES = str.maketrans("[{]}", "(())")
_CHUNK = 16


def json_depth(text: str, stop_above: int | None = None) -> int:
    """The deepest nesting of arrays and objects in JSON `text`, brackets inside strings not counted: linear in the
    text whatever it holds (an unterminated string reaches to the end): three passes of the regex engine, then the
    brackets 16 at a time (`_chunk_depth`), stopping once the depth passes `stop_above`."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)).translate(_AS_PARENTHESES)
    depth = deepest = 0
    for start in range(0, len(brackets), _CHUNK):
        net, peak = _chunk_depth(brackets[start:start + _CHUNK])
        deepest, depth = max(deepest, depth + peak), depth + net
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


@lru_cache(maxsize=1 << 16)
def _chunk_depth(chunk: str) -> tuple[int, int]:
    """(the depth `chunk` of parentheses adds, the highest it reaches on the way), from 0."""
    depth = peak = 0
    for char in chunk:
        depth += 1 if char == "(" else -1
        peak = max(peak, depth)
    return depth, peak


def _reject_constant(name: str) -> Any:
    raise ValueError(sentence("error.json.constant", name=name))


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(sentence("error.json.beyond_double", number=text[:_MAX_DIGITS]))
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise ValueError(sentence("error.json.digits", digits=len(text)))
    return int(text)


def read_json_input(path: str | Path, what: str, max_bytes: int = MAX_INPUT_BYTES,
                    max_nesting: int = MAX_NESTING) -> Any:
    """Strict JSON from a regular file: no NaN/Infinity, no number beyond a double, at most `max_nesting` levels of
    arrays and objects. InputFileError (one sentence naming `what` and the path) otherwise."""
    text = read_input_text(path, what, max_bytes)
    if json_depth(text, max_nesting) > max_nesting:
        raise InputFileError(sentence("error.input.nested", what=what, path=str(path), levels=max_nesting))
    try:
        document = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except (ValueError, RecursionError) as error:
        why = said_of(error)
        raise InputFileError(sentence("error.input.not_json", what=what, path=str(path),
                                      error=why if why is not error else str(error)[:200])) from None
    # only a `\udXXX` escape makes a lone surrogate (strict UTF-8 decoding never does): U+FFFD in its place
    return without_surrogates(document) if _SURROGATE_ESCAPE.search(text) else document
