"""nccl-tests output (all_reduce_perf, all_gather_perf, …): one line at a time, parsing only, never judging.

What a run prints (NVIDIA/nccl-tests src/common.cu):

    # Collective test starting: all_reduce_perf                      (newer versions)
    # nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 …
    #  Rank  0 Group  0 Pid 498607 on ubuntu-server device  0 [0x18] NVIDIA H100 80GB HBM3
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
         8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 70.742

The row has the out-of-place then the in-place time (us), algbw and busbw (GB/s, 1e9 B) and #wrong (`N/A` with
`-c 0`); older versions print no `root` column and a float `error` instead of `#wrong`, which the column header
line says. A row whose numbers do not hold together (algbw = size / time; the same busbw/algbw factor in both
halves) was cut or mixed with other output: it is refused (None), never read as something else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpuready.busbw import busbw_factor

TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16",
         "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2", "int", "char")
"""Data types nccl-tests prints in the `type` column (`-d`)."""

PREFIX = re.compile(r"^[ \t]{0,40}(?:\[\d{1,6},\d{1,6}\]<std(?:out|err)>:)?[ \t]{0,40}")
"""`mpirun --tag-output` puts `[1,0]<stdout>:` before every line."""

# Searched over raw chunks of many lines: no `\s` (it would cross line breaks) and every run bounded, so a chunk of
# blank lines or spaces costs its length (an unbounded `^\s*…\s*` took minutes on 1,000 blank lines).
MARKERS = (r"^[ \t]{0,40}(?:\[\d{1,6},\d{1,6}\]<std(?:out|err)>:)?[ \t]{0,40}(?:"
           r"#?[ \t]{0,8}nThread[ \t]{1,8}\d|#?[ \t]{0,8}Rank[ \t]{1,8}\d{1,6}[ \t]{1,8}(?:Group[ \t]{1,8}\d{1,6}[ \t]{1,8})?Pid"
           r"[ \t]|"
           r"#[ \t]{0,8}Collective test (?:starting|concluded)|#[ \t]{0,8}Out of bounds values|#[ \t]{0,8}Avg bus bandwidth|"
           r"#?[ \t]{0,8}size[ \t]{1,20}count[ \t]{1,20}type|"
           r"\d{1,20}[ \t]{1,20}\d{1,20}[ \t]{1,20}(?:" + "|".join(TYPES) + r")[ \t])")
"""Lines a reader of nccl-tests output wants (a regex source, searched per line)."""

MODERN_COLUMNS = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                  "time", "algbw", "busbw", "#wrong")

BINARIES = {"all_reduce_perf": "all_reduce", "all_gather_perf": "all_gather", "reduce_scatter_perf": "reduce_scatter",
            "alltoall_perf": "all_to_all", "broadcast_perf": "broadcast", "reduce_perf": "reduce",
            "sendrecv_perf": "send_recv"}
"""nccl-tests binaries → collective names of busbw.py (others keep their name without `_perf`)."""

_HEADER = re.compile(r"nThread\s+(?P<threads>\d+)\s+nGpus\s+(?P<gpus>\d+)\s+minBytes\s+(?P<min>\d+)\s+"
                     r"maxBytes\s+(?P<max>\d+)")
_RANK = re.compile(r"Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
                   r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>\S.*?)\s*$")
_TEST = re.compile(r"#\s*Collective test (?P<what>starting|concluded):\s*(?P<binary>\w+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(?P<value>\d+)\s*(?P<verdict>OK|FAILED)?")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(?P<value>[0-9.]+(?:[eE][-+]?\d+)?)")


@dataclass(frozen=True)
class Header:
    threads: int
    gpus_per_thread: int
    min_bytes: int
    max_bytes: int


@dataclass(frozen=True)
class RankLine:
    rank: int
    host: str
    device: int
    bus: str
    """As printed: `0x1b` (bus number only) or `0000:1b:00`."""
    name: str
    """The GPU model as the driver names it (`NVIDIA H100 80GB HBM3`)."""

    def bus_number(self) -> int | None:
        """The PCI bus number, the one part every nccl-tests version prints."""
        return bus_number(self.bus)


def bus_number(text: str) -> int | None:
    """The PCI bus number of `0x1b`, `0000:1b:00` or `0000:1b:00.0` (nvidia-smi's form)."""
    text = text.strip().lower()
    match = re.fullmatch(r"0x([0-9a-f]+)", text) or re.fullmatch(r"(?:[0-9a-f]+:)?([0-9a-f]{2}):[0-9a-f]{2}(?:\.\d)?", text)
    return int(match.group(1), 16) if match else None


@dataclass(frozen=True)
class Half:
    """The out-of-place or the in-place half of a row."""
    time_us: float
    algbw_gb_per_s: float
    busbw_gb_per_s: float
    wrong: int | None
    """Wrong elements summed over ranks; None where not checked (`N/A`) or the old `error` column."""


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Half
    in_place: Half

    def best(self) -> tuple[float, str]:
        """The higher busbw of the two halves and which half it is."""
        if self.in_place.busbw_gb_per_s > self.out_of_place.busbw_gb_per_s:
            return self.in_place.busbw_gb_per_s, "in-place"
        return self.out_of_place.busbw_gb_per_s, "out-of-place"

    def wrong(self) -> int:
        return sum(half.wrong or 0 for half in (self.out_of_place, self.in_place))

    def checked(self) -> bool:
        return any(half.wrong is not None for half in (self.out_of_place, self.in_place))

    def ratio(self) -> float | None:
        """busbw / algbw from the half with more digits; None where algbw is too small to say."""
        half = max((self.out_of_place, self.in_place), key=lambda h: h.algbw_gb_per_s)
        return half.busbw_gb_per_s / half.algbw_gb_per_s if half.algbw_gb_per_s >= 1.0 else None


def strip_prefix(text: str) -> str:
    return PREFIX.sub("", text, count=1)


def parse_header(text: str) -> Header | None:
    match = _HEADER.search(text)
    if not match:
        return None
    return Header(int(match["threads"]), int(match["gpus"]), int(match["min"]), int(match["max"]))


def parse_rank(text: str) -> RankLine | None:
    match = _RANK.search(strip_prefix(text))
    if not match:
        return None
    return RankLine(rank=int(match["rank"]), host=match["host"], device=int(match["device"]), bus=match["bus"],
                    name=match["name"])


def parse_test(text: str) -> tuple[str, str] | None:
    """(`starting` | `concluded`, collective) from `# Collective test starting: all_reduce_perf`."""
    match = _TEST.search(text)
    if not match:
        return None
    return match["what"], collective_of_binary(match["binary"])


def collective_of_binary(binary: str) -> str:
    return BINARIES.get(binary, binary.removesuffix("_perf"))


def parse_columns(text: str) -> tuple[str, ...] | None:
    """The column names from `#  size  count  type  redop  root  time  algbw  busbw #wrong …`."""
    body = strip_prefix(text).lstrip("#").split()
    if len(body) < 7 or body[:3] != ["size", "count", "type"] or body.count("busbw") != 2:
        return None
    return tuple(body)


def parse_out_of_bounds(text: str) -> tuple[int, bool] | None:
    """(value, whether nccl-tests said OK) from `# Out of bounds values : 0 OK`."""
    match = _OOB.search(text)
    if not match:
        return None
    value = int(match["value"])
    return value, (match["verdict"] == "OK") if match["verdict"] else value == 0


def parse_avg_busbw(text: str) -> float | None:
    match = _AVG.search(text)
    if not match:
        return None
    value = float(match["value"])
    return value if math.isfinite(value) else None


def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _integer(token: str) -> int | None:
    return int(token) if re.fullmatch(r"-?\d+", token) else None


def parse_row(text: str, columns: tuple[str, ...] | None = None) -> Row | None:
    """One data row, or None where it is not a whole, self-consistent row of these columns."""
    columns = columns or MODERN_COLUMNS
    tokens = strip_prefix(text).split()
    if len(tokens) != len(columns):
        return None
    seen: dict[str, list[str]] = {}
    for name, token in zip(columns, tokens):
        seen.setdefault(name, []).append(token)
    size, count = _integer(seen["size"][0]), _integer(seen["count"][0])
    dtype = seen["type"][0]
    if size is None or count is None or size < 0 or count < 0 or dtype not in TYPES:
        return None
    redop = seen["redop"][0] if "redop" in seen else None
    if redop is not None and not re.fullmatch(r"[a-z]+", redop):
        return None
    root = _integer(seen["root"][0]) if "root" in seen else None
    if "root" in seen and root is None:
        return None
    check = "#wrong" if "#wrong" in seen else "error" if "error" in seen else None
    halves = []
    for i in range(2):
        try:
            time_us, algbw, busbw = (_number(seen[name][i]) for name in ("time", "algbw", "busbw"))
        except (KeyError, IndexError):
            return None
        if time_us is None or algbw is None or busbw is None:
            return None
        wrong: int | None = None
        if check == "#wrong":
            token = seen[check][i]
            wrong = None if token == "N/A" else _integer(token)
            if token != "N/A" and (wrong is None or wrong < 0):
                return None
        elif check == "error" and _number(seen[check][i]) is None and seen[check][i] != "N/A":
            return None
        halves.append(Half(time_us, algbw, busbw, wrong))
    row = Row(size_bytes=size, count=count, dtype=dtype, redop=redop, root=root, out_of_place=halves[0],
              in_place=halves[1])
    # old versions (an `error` column) sized some rows differently: only the factor check applies there
    return row if consistent(row, check_time=check == "#wrong" or check is None) else None


def consistent(row: Row, check_time: bool = True) -> bool:
    """algbw = size / time in each half (printed rounding allowed) and the same busbw/algbw factor in both: a
    value cut short or a digit from another process's output breaks one of them."""
    for half in (row.out_of_place, row.in_place) if check_time else ():
        if half.time_us > 0 and half.algbw_gb_per_s >= 0.05:
            computed = row.size_bytes / half.time_us / 1e3
            if abs(computed - half.algbw_gb_per_s) > 0.02 * half.algbw_gb_per_s + 0.011:
                return False
    first, second = row.out_of_place, row.in_place
    if first.algbw_gb_per_s >= 1.0 and second.algbw_gb_per_s >= 1.0:
        ratio = first.busbw_gb_per_s / first.algbw_gb_per_s
        if abs(second.busbw_gb_per_s - second.algbw_gb_per_s * ratio) > 0.01 * second.busbw_gb_per_s + 0.011 * (1 + ratio):
            return False
    return True


def ranks_from_ratio(collective: str, ratio: float) -> int | None:
    """The rank count that nccl-tests' busbw factor for this collective gives (None for factor-1 collectives)."""
    if collective == "all_reduce" and ratio < 2:
        ranks = 2 / (2 - ratio)
    elif collective in ("all_gather", "reduce_scatter", "all_to_all") and ratio < 1:
        ranks = 1 / (1 - ratio)
    else:
        return None
    rounded = round(ranks)
    if rounded < 2 or abs(busbw_factor(collective, rounded) - ratio) > 0.01 * max(ratio, 0.1):
        return None
    return rounded


def infer_collective(redop: str | None, root: int | None, ratio: float | None,
                     ranks: int | None) -> str | None:
    """The collective a run of rows without `# Collective test starting` measured, from its redop, root and
    busbw/algbw ratio (nccl-tests' factors: all_reduce 2(n-1)/n, all_gather/reduce_scatter/alltoall (n-1)/n,
    broadcast/reduce/sendrecv 1). None where the rows cannot tell."""
    if root is not None and root >= 0:
        return "broadcast" if redop == "none" else "reduce"
    if ratio is None:
        return None
    if ratio > 1.005:
        return "all_reduce"
    if ratio < 0.995:
        return "all_gather" if redop in ("none", None) else "reduce_scatter"
    # factor 1: all_reduce on 2 ranks, or sendrecv
    if redop not in ("none", None) and ranks in (None, 2):
        return "all_reduce"
    return "send_recv"
