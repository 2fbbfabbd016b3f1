"""`gpuready monitor`: watch GPU health beside a training job.

Prints health events as they happen (a new Xid, throttling starting or stopping by reason, ECC
counts rising, a PCIe link narrowing, the power limit changing, a GPU lost, an InfiniBand/RoCE port error counter
rising), keeps a compact live
table, appends events and samples to a JSON-lines file, and serves Prometheus metrics whose label
keys join with DCGM-exporter dashboards (gpu, UUID, Hostname, modelName).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from pathlib import Path
from typing import Any

from gpuready.checks.kernel_judge import judge_xid
from gpuready.cli import option_groups as groups
from gpuready.cli import option_kinds
from gpuready.facts.clock_reasons import REASON_BITS, reasons_from_mask
from gpuready.facts.ib_counters_live import IB_ROOT, CounterChange, CounterWindow
from gpuready.facts.nvml import NvmlSession, NvmlUnavailable
from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.i18n import DEFAULT_LANGUAGE, choose_language, in_language, message, said, sentence
from gpuready.model import ExitCode
from gpuready.safe_text import tell

IGNORED_REASONS = frozenset({"gpu_idle"})


def _reasons(sample: GpuSample) -> frozenset[str]:
    return reasons_from_mask(int(sample.clock_event_reasons or 0)) - IGNORED_REASONS


def detect_events(index: int, previous: GpuSample | None, current: GpuSample | None) -> list[dict[str, Any]]:
    """Health events between two samples of one GPU (pure: tests replay recorded series)."""
    if previous is None:
        return []
    if current is None:
        return [{"gpu": index, "event": "gpu_lost", "detail": "the GPU stopped answering NVML"}]
    events: list[dict[str, Any]] = []
    before, after = _reasons(previous), _reasons(current)
    for reason in sorted(after - before):
        events.append({"gpu": index, "event": "throttle_start", "reason": reason})
    for reason in sorted(before - after):
        events.append({"gpu": index, "event": "throttle_stop", "reason": reason})
    for kind_of_error, old, new in (("uncorrectable", previous.ecc_uncorrected, current.ecc_uncorrected),
                                    ("corrected", previous.ecc_corrected, current.ecc_corrected)):
        if old is not None and new is not None and new > old:
            events.append({"gpu": index, "event": "ecc_increment", "kind": kind_of_error, "delta": new - old,
                           "total": new})
    old_width, new_width = previous.pcie_width, current.pcie_width
    if old_width and new_width and new_width < old_width:
        events.append({"gpu": index, "event": "pcie_width_drop", "from": old_width, "to": new_width})
    old_limit, new_limit = previous.power_limit_w, current.power_limit_w
    if old_limit and new_limit and abs(new_limit - old_limit) >= 1:
        events.append({"gpu": index, "event": "power_limit_change", "from_w": old_limit, "to_w": new_limit})
    return events


def ib_events(moved: list[CounterChange]) -> list[dict[str, Any]]:
    """RDMA port error counters that rose (or were reset) since the last reading, as events."""
    return [{"event": "ib_counter_reset", "port": change.port, "counter": change.counter, "from": change.before,
             "to": change.after} if change.reset else
            {"event": "ib_counter_increase", "port": change.port, "counter": change.counter,
             "delta": change.increase, "total": change.after} for change in moved]


def ib_record(now: float, window: CounterWindow, moved: list[CounterChange]) -> dict[str, Any]:
    """The JSONL record `ib_counters`: per port, each counter's value and its increase since the last record."""
    rose = {(change.port, change.counter): change for change in moved}
    ports = {port: {name: {"value": value, "increase": rose[(port, name)].increase if (port, name) in rose else 0,
                           **({"reset": True} if (port, name) in rose and rose[(port, name)].reset else {})}
                    for name, value in values.items()} for port, values in window.last.items()}
    return {"type": "ib_counters", "time": now, "ports": ports}


def xid_status(code: int) -> str:
    """What the one kernel judge says of this Xid (check, diagnose and burn say the same)."""
    return judge_xid(code).status.value


def describe(event: dict[str, Any], lang: str = DEFAULT_LANGUAGE) -> str:
    """One health event as a line of text in `lang` (the catalogue's `monitor.event.*`)."""
    kind = event["event"]
    gpu = f"GPU{event['gpu']}" if event.get("gpu") is not None else "GPU?"
    if kind == "xid":
        judged = judge_xid(event["xid"])  # the one kernel judge, as check, diagnose and burn
        return message("monitor.event.xid", lang, gpu=gpu, status=judged.status.value.upper(), name=judged.title,
                       reasons=list(judged.reason_texts), action=judged.action_text)
    if kind == "power_limit_change":
        return message("monitor.event.power_limit_change", lang, gpu=gpu, before=f"{event['from_w']:.0f}",
                       after=f"{event['to_w']:.0f}")
    if kind in _EVENT_VALUES:
        return message(f"monitor.event.{kind}", lang, gpu=gpu, **{name: event[key] for name, key in _EVENT_VALUES[kind]})
    return json.dumps(event)


_EVENT_VALUES = {"throttle_start": (("reason", "reason"),), "throttle_stop": (("reason", "reason"),),
                 "ecc_increment": (("delta", "delta"), ("kind", "kind"), ("total", "total")),
                 "pcie_width_drop": (("before", "from"), ("after", "to")), "gpu_lost": (),
                 "ib_counter_increase": (("port", "port"), ("counter", "counter"), ("delta", "delta"),
                                         ("total", "total")),
                 "ib_counter_reset": (("port", "port"), ("counter", "counter"), ("before", "from"), ("after", "to"))}
"""The catalogue's placeholders of each event's sentence and the event's keys that fill them."""


class PrometheusExporter:
    """Metrics in base units with a gpuready_ prefix; labels as DCGM-exporter names them."""

    def __init__(self, port: int, identity: list[GpuIdentity], hostname: str, address: str = "127.0.0.1"):
        from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server  # optional (monitor's)
        self.registry = CollectorRegistry()
        labels = ["gpu", "UUID", "Hostname", "modelName"]
        gauge = lambda name, doc, extra=(): Gauge(name, doc, labels + list(extra), registry=self.registry)
        self.gauges = {
            "power_w": (gauge("gpuready_power_usage_watts", "Board power draw"), 1.0),
            "power_limit_w": (gauge("gpuready_power_limit_watts", "Enforced power limit"), 1.0),
            "temperature_c": (gauge("gpuready_gpu_temperature_celsius", "GPU temperature"), 1.0),
            "memory_temperature_c": (gauge("gpuready_memory_temperature_celsius", "HBM temperature"), 1.0),
            "sm_clock_mhz": (gauge("gpuready_sm_clock_hertz", "SM clock"), 1e6),
            "memory_clock_mhz": (gauge("gpuready_memory_clock_hertz", "Memory clock"), 1e6),
            "utilization_pct": (gauge("gpuready_gpu_utilization_ratio", "GPU utilisation"), 0.01),
            "pcie_replay": (gauge("gpuready_pcie_replay_count", "PCIe replays since reset"), 1.0),
            "pcie_width": (gauge("gpuready_pcie_link_width_lanes", "Current PCIe link width"), 1.0),
        }
        self.ecc = gauge("gpuready_ecc_errors_volatile", "ECC errors since driver load", ["type"])
        self.reasons = gauge("gpuready_clock_event_reason_active", "Clock-event reason active (1) or not", ["reason"])
        self.lost = gauge("gpuready_gpu_lost", "1 when the GPU stopped answering")
        self.xids = Counter("gpuready_xid_events", "Xid events seen", labels + ["xid"], registry=self.registry)
        ib_labels = ["Hostname", "device", "port", "counter"]  # device and port as node_exporter's infiniband collector
        self.ib_value = Gauge("gpuready_ib_port_error_count", "RDMA port error counter (since boot or reset)",
                              ib_labels, registry=self.registry)
        self.ib_increase = Counter("gpuready_ib_port_error_increase", "Rise of an RDMA port error counter while "
                                   "monitored (resets not subtracted)", ib_labels, registry=self.registry)
        self.hostname = hostname
        self.labels = [{"gpu": str(i), "UUID": gpu.uuid or "", "Hostname": hostname,
                        "modelName": gpu.name or ""} for i, gpu in enumerate(identity)]
        self.server, self.thread = start_http_server(port, addr=address, registry=self.registry)

    def update(self, index: int, sample: GpuSample | None) -> None:
        labels = self.labels[index]
        self.lost.labels(**labels).set(0 if sample is not None else 1)
        if sample is None:
            return
        for metric, (gauge, scale) in self.gauges.items():
            if getattr(sample, metric) is not None:
                gauge.labels(**labels).set(getattr(sample, metric) * scale)
        for kind_of_error, count in (("corrected", sample.ecc_corrected), ("uncorrected", sample.ecc_uncorrected)):
            if count is not None:
                self.ecc.labels(**labels, type=kind_of_error).set(count)
        mask = int(sample.clock_event_reasons or 0)
        for reason, bit in REASON_BITS.items():
            self.reasons.labels(**labels, reason=reason).set(1 if mask & bit else 0)

    def xid(self, index: int | None, xid: int) -> None:
        if index is not None:
            self.xids.labels(**self.labels[index], xid=str(xid)).inc()

    def ib_counters(self, window: CounterWindow, moved: list[CounterChange]) -> None:
        """Each port's counters now, and what rose since the last reading."""
        for port, values in window.last.items():
            device, _, number = port.rpartition("/")
            for name, value in values.items():
                self.ib_value.labels(Hostname=self.hostname, device=device, port=number, counter=name).set(value)
        for change in moved:
            device, _, number = change.port.rpartition("/")
            self.ib_increase.labels(Hostname=self.hostname, device=device, port=number,
                                    counter=change.counter).inc(change.increase)

    def close(self) -> None:
        self.server.shutdown()


def monitor_loop(source: Any, *, interval_s: float, count: int | None, jsonl: Path | None,
                 exporter: PrometheusExporter | None, emit_event, show_table=None,
                 ib_window: CounterWindow | None = None) -> int:
    """Sample every GPU each interval; returns the number of samples taken. `source` as telemetry's. `ib_window`:
    the RDMA port error counters, read again each interval (None or no port: not read)."""
    previous: dict[int, GpuSample | None] = {}
    handle = open(jsonl, "a") if jsonl else None
    taken = 0
    try:
        next_at = time.monotonic()
        while count is None or taken < count:
            now = time.time()
            samples = {index: (None if index in source.lost else source.sample(index))
                       for index in range(len(source.identity))}
            events: list[dict[str, Any]] = []
            for index, sample in samples.items():
                if index in previous and not (previous[index] is None and sample is None):
                    events.extend(detect_events(index, previous[index], sample))
                previous[index] = sample
                if exporter:
                    exporter.update(index, sample)
            for index, xid in source.wait_xid(0) if hasattr(source, "wait_xid") else []:
                events.append({"gpu": index, "event": "xid", "xid": xid, "status": xid_status(xid)})
                if exporter:
                    exporter.xid(index, xid)
            moved = ib_window.step() if ib_window is not None and ib_window.last else None
            events.extend(ib_events(moved or []))
            if exporter and moved is not None:
                exporter.ib_counters(ib_window, moved)
            for event in events:
                event["time"] = now
                emit_event(event)
            if handle:
                for event in events:
                    handle.write(json.dumps({"type": "event", **event}) + "\n")
                figures = {str(i): dataclasses.asdict(s) if s is not None else None for i, s in samples.items()}
                handle.write(json.dumps({"type": "sample", "time": now, "gpus": figures}) + "\n")
                if moved is not None:
                    handle.write(json.dumps(ib_record(now, ib_window, moved)) + "\n")
                handle.flush()
            if show_table:
                show_table(samples)
            taken += 1
            next_at += interval_s
            time.sleep(max(0.0, next_at - time.monotonic()))
    finally:
        if handle:
            handle.close()
    return taken


def _table(identity: list[GpuIdentity], samples: dict[int, GpuSample | None]):
    from rich.table import Table  # rich's tables load only where a terminal shows them
    table = Table(expand=False)
    for column in ("GPU", "model", "power", "temp", "SM", "util", "reasons", "ECC (c/u)"):
        table.add_column(column, no_wrap=True)
    for index, sample in samples.items():
        name = identity[index].name or ""
        if sample is None:
            table.add_row(str(index), name, "LOST", "", "", "", "", "")
            continue
        table.add_row(str(index), name, f"{sample.power_w or 0:.0f} W", f"{sample.temperature_c} °C",
                      f"{sample.sm_clock_mhz} MHz", f"{sample.utilization_pct} %",
                      ", ".join(sorted(_reasons(sample))) or "-", f"{sample.ecc_corrected}/{sample.ecc_uncorrected}")
    return table


def check_prometheus_endpoint(address: str, port: int) -> str | None:
    """Why metrics cannot be served on address:port (one sentence), or None. Checked before NVML is opened."""
    if not 1 <= port <= 65535:
        return sentence("error.monitor.port", port=port)
    try:
        family, kind, proto, _, sockaddr = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as error:
        return sentence("error.monitor.address", address=repr(address),
                        reason=str(getattr(error, "strerror", None) or error))
    probe = socket.socket(family, kind, proto)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the metrics server will
        probe.bind(sockaddr)
        probe.listen(1)
    except OSError as error:
        return sentence("error.monitor.cannot_serve", address=address, port=port, reason=str(error.strerror or error))
    finally:
        probe.close()
    return None


def check_jsonl(path: Path) -> str | None:
    """Why events cannot be appended to `path` (one sentence), or None. Creates the file (empty) if absent."""
    try:
        with open(path, "a"):
            pass
    except OSError as error:
        return sentence("error.monitor.jsonl", path=str(path), reason=str(error.strerror or error))
    return None


def run_monitor(*, interval_s: float, jsonl: Path | None, prometheus_port: int | None, count: int | None,
                quiet: bool, source: Any = None, prometheus_address: str = "127.0.0.1", lang: str | None = None,
                ib_root: Path = IB_ROOT) -> int:
    """`prometheus_address`: where the metrics server listens; loopback unless asked (0.0.0.0: every interface).
    `lang`: --lang (None: from the environment). `ib_root`: where the RDMA ports' counters are read."""
    from rich.console import Console  # rich loads only for a live run
    from rich.live import Live

    lang = choose_language(lang)
    if interval_s <= 0 or (count is not None and count < 1):
        tell(in_language(said("error.monitor.positive"), lang))
        return ExitCode.USAGE
    problem = (check_prometheus_endpoint(prometheus_address, prometheus_port) if prometheus_port is not None
               else None) or (check_jsonl(jsonl) if jsonl else None)
    if problem:
        tell(in_language(problem, lang))
        return ExitCode.USAGE
    if source is None:
        try:
            source = NvmlSession()
        except Exception as error:  # NvmlUnavailable (no driver …), nvidia-ml-py missing
            reason = str(error) if isinstance(error, NvmlUnavailable) else f"{type(error).__name__}: {error}"
            tell(in_language(said("error.monitor.no_gpu", error=reason), lang))
            return ExitCode.NOT_READY
        source.watch_xid()
    console = Console(stderr=True)
    exporter = None
    if prometheus_port is not None:
        try:
            exporter = PrometheusExporter(prometheus_port, source.identity, socket.gethostname(),
                                          address=prometheus_address)
        except OSError as error:
            tell(in_language(said("error.monitor.cannot_serve", address=prometheus_address, port=prometheus_port,
                                  reason=str(error.strerror or error)), lang))
            if hasattr(source, "close"):
                source.close()
            return ExitCode.USAGE
        host = f"[{prometheus_address}]" if ":" in prometheus_address else prometheus_address
        console.print(message("monitor.prometheus.every" if prometheus_address in ("0.0.0.0", "::") else
                              "monitor.prometheus", lang, url=f"http://{host}:{prometheus_port}/metrics"))
    live = None if quiet or not console.is_terminal else Live(console=console, refresh_per_second=1)
    emit = (lambda event: live.console.print(f"[bold]{time.strftime('%H:%M:%S')}[/bold] {describe(event, lang)}")) \
        if live else (lambda event: print(f"{time.strftime('%H:%M:%S')} {describe(event, lang)}", flush=True))
    try:
        if live:
            live.start()
        monitor_loop(source, interval_s=interval_s, count=count, jsonl=jsonl, exporter=exporter, emit_event=emit,
                     show_table=(lambda samples: live.update(_table(source.identity, samples))) if live else None,
                     ib_window=CounterWindow.start(ib_root))
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    finally:
        if live:
            live.stop()
        if exporter:
            exporter.close()
        if hasattr(source, "close"):
            source.close()
    return ExitCode.READY


# --- the command line ----------------------------------------------------------------------------------------------

SUMMARY = "watch GPU health beside a training job"


def add_arguments(parser) -> None:
    groups.add(parser, "interval")
    parser.add_argument("--jsonl", type=Path, metavar="FILE", help=said("cli.monitor.jsonl"))
    parser.add_argument("--prometheus-port", type=option_kinds.PORT, metavar="N",
                        help=groups.with_range(said("cli.monitor.prometheus_port"), option_kinds.PORT))
    parser.add_argument("--prometheus-address", default="127.0.0.1", metavar="ADDR",
                        help=said("cli.monitor.prometheus_address"))
    parser.add_argument("--count", type=option_kinds.SAMPLES, metavar="N",
                        help=groups.with_range(said("cli.monitor.count"), option_kinds.SAMPLES))
    parser.add_argument("--quiet", action="store_true", help=said("cli.monitor.quiet"))
    groups.add_language(parser)


def run(args) -> int:
    return run_monitor(interval_s=args.interval, jsonl=args.jsonl, prometheus_port=args.prometheus_port,
                       count=args.count, quiet=args.quiet, prometheus_address=args.prometheus_address,
                       lang=args.lang)
