"""InfiniBand/RoCE port error counters judged as increases over a window (issue 33): the live reader on a sysfs tree
built in the kernel's layout, resets, monitor's JSONL record and Prometheus exposition, burn's judgement."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuready.facts.ib_counters_live import CounterWatch, CounterWindow, changes, read_counters
from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.i18n import message
from gpuready.model import Status
from gpuready.runner.local import RunOutcome
from gpuready.verbs.burn.judge import BurnJudge
from gpuready.verbs.burn.run import BurnOptions, BurnRun
from gpuready.verbs.monitor import PrometheusExporter, describe, monitor_loop

COUNTERS = ("link_downed", "symbol_error", "port_rcv_errors", "link_error_recovery", "excessive_buffer_overrun_errors")
HOST = "node-7"


def build_tree(tmp_path: Path, ports: dict[str, dict[str, int]]) -> Path:
    """/sys/class/infiniband as the kernel lays it out: `mlx5_0` a link to its PCI device's `infiniband/mlx5_0`, each
    port a folder with `state`, `rate` and `counters/<name>` files holding a number and a newline."""
    root = tmp_path / "sys" / "class" / "infiniband"
    root.mkdir(parents=True)
    for name, values in ports.items():
        device, port = name.split("/")
        real = tmp_path / "sys" / "devices" / "pci0000:00" / f"0000:{len(device):02x}:00.0" / "infiniband" / device
        (real / "ports" / port / "counters").mkdir(parents=True, exist_ok=True)
        (real / "ports" / port / "state").write_text("4: ACTIVE\n")
        (real / "ports" / port / "rate").write_text("400 Gb/sec (4X NDR)\n")
        (real / "ports" / port / "counters" / "port_xmit_data").write_text("123456789\n")  # not an error counter
        for counter, value in values.items():
            (real / "ports" / port / "counters" / counter).write_text(f"{value}\n")
        if not (root / device).exists():
            os.symlink(os.path.relpath(real, root), root / device)
    return root


def bump(root: Path, port: str, counter: str, value: int) -> None:
    device, number = port.split("/")
    (root / device / "ports" / number / "counters" / counter).write_text(f"{value}\n")


def zeros() -> dict[str, int]:
    return dict.fromkeys(COUNTERS, 0)


# ------------------------------------------------------------------------------------------------------- the reader
def test_the_reader_reads_the_five_counters_of_every_port(tmp_path):
    root = build_tree(tmp_path, {"mlx5_0/1": {**zeros(), "symbol_error": 7}, "mlx5_1/1": zeros(),
                                 "mlx5_1/2": {"link_downed": 2}})
    assert read_counters(root) == {"mlx5_0/1": {**zeros(), "symbol_error": 7}, "mlx5_1/1": zeros(),
                                   "mlx5_1/2": {"link_downed": 2}}


def test_a_machine_without_infiniband_reads_nothing_and_raises_nothing(tmp_path):
    assert read_counters(tmp_path / "no" / "infiniband") == {}
    with CounterWatch(tmp_path / "no" / "infiniband", interval_s=0.01) as watch:
        pass
    assert watch.window.last == {} and watch.window.increases() == {}


def test_increments_between_samples_add_up_over_the_window(tmp_path):
    root = build_tree(tmp_path, {"mlx5_0/1": zeros(), "mlx5_1/1": zeros()})
    window = CounterWindow.start(root)
    assert window.step() == []
    bump(root, "mlx5_0/1", "symbol_error", 3)
    moved = window.step()
    assert [(c.port, c.counter, c.before, c.after, c.increase, c.reset) for c in moved] == [
        ("mlx5_0/1", "symbol_error", 0, 3, 3, False)]
    bump(root, "mlx5_0/1", "symbol_error", 10)
    bump(root, "mlx5_1/1", "port_rcv_errors", 1)
    window.step()
    assert window.increases() == {"mlx5_0/1": {"symbol_error": 10}, "mlx5_1/1": {"port_rcv_errors": 1}}
    assert window.readings == 4


def test_a_lower_value_is_a_reset_not_a_negative_increase(tmp_path):
    root = build_tree(tmp_path, {"mlx5_0/1": {**zeros(), "symbol_error": 65535, "port_rcv_errors": 40}})
    window = CounterWindow.start(root)
    bump(root, "mlx5_0/1", "symbol_error", 0)     # cleared (perfquery -R): nothing rose
    bump(root, "mlx5_0/1", "port_rcv_errors", 2)  # cleared, then 2 errors since
    moved = {c.counter: c for c in window.step()}
    assert moved["symbol_error"].reset and moved["symbol_error"].increase == 0
    assert moved["port_rcv_errors"].reset and moved["port_rcv_errors"].increase == 2
    bump(root, "mlx5_0/1", "port_rcv_errors", 5)
    window.step()
    assert window.increases() == {"mlx5_0/1": {"port_rcv_errors": 5}}
    assert window.resets == {"mlx5_0/1": {"symbol_error": 1, "port_rcv_errors": 1}}
    assert window.to_json()["ports"]["mlx5_0/1"]["port_rcv_errors"] == {"start": 40, "end": 5, "increase": 5,
                                                                        "resets": 1}


def test_a_port_seen_in_one_reading_only_is_no_change():
    assert changes({"mlx5_0/1": {"link_downed": 1}}, {"mlx5_1/1": {"link_downed": 9}}) == []


# --------------------------------------------------------------------------------------------------------- monitor
IDENTITY = [GpuIdentity(index=0, bus_id="0000:00:06.0", uuid="GPU-0000", name="NVIDIA H200")]


class RisingSource:
    """One GPU whose samples are steady; each sample first applies the next step's counter writes to the tree."""

    def __init__(self, root: Path, steps: list[list[tuple[str, str, int]]]):
        self.root, self.steps, self.identity, self.lost = root, list(steps), IDENTITY, set()

    def sample(self, index):
        for port, counter, value in (self.steps.pop(0) if self.steps else []):
            bump(self.root, port, counter, value)
        return GpuSample(power_w=300.0, temperature_c=50, clock_event_reasons=0)


def test_monitor_records_increases_in_jsonl_and_prometheus(tmp_path):
    root = build_tree(tmp_path, {"mlx5_0/1": zeros(), "mlx5_3/1": zeros()})
    source = RisingSource(root, [[], [("mlx5_3/1", "symbol_error", 4)],
                                 [("mlx5_3/1", "symbol_error", 6), ("mlx5_0/1", "link_downed", 1)],
                                 [("mlx5_0/1", "link_downed", 0)]])
    exporter = PrometheusExporter(0, IDENTITY, HOST, address="127.0.0.1")
    events = []
    try:
        monitor_loop(source, interval_s=0.01, count=4, jsonl=tmp_path / "m.jsonl", exporter=exporter,
                     emit_event=events.append, ib_window=CounterWindow.start(root))
        body = urllib.request.urlopen(f"http://127.0.0.1:{exporter.server.server_address[1]}/metrics",
                                      timeout=5).read().decode()
    finally:
        exporter.close()
    assert [(e["event"], e["port"], e["counter"], e.get("delta"), e.get("total")) for e in events] == [
        ("ib_counter_increase", "mlx5_3/1", "symbol_error", 4, 4),
        ("ib_counter_increase", "mlx5_0/1", "link_downed", 1, 1),
        ("ib_counter_increase", "mlx5_3/1", "symbol_error", 2, 6),
        ("ib_counter_reset", "mlx5_0/1", "link_downed", None, None)]
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    ib = [record for record in records if record["type"] == "ib_counters"]
    assert len(ib) == 4 and sorted(ib[0]["ports"]) == ["mlx5_0/1", "mlx5_3/1"]
    assert ib[1]["ports"]["mlx5_3/1"]["symbol_error"] == {"value": 4, "increase": 4}
    assert ib[2]["ports"]["mlx5_0/1"]["link_downed"] == {"value": 1, "increase": 1}
    assert ib[3]["ports"]["mlx5_0/1"]["link_downed"] == {"value": 0, "increase": 0, "reset": True}
    assert ib[3]["ports"]["mlx5_3/1"]["port_rcv_errors"] == {"value": 0, "increase": 0}
    assert sum(record["type"] == "event" and record["event"].startswith("ib_counter") for record in records) == 4

    samples = {(s.name, s.labels["device"], s.labels["port"], s.labels["counter"]): s
               for family in text_string_to_metric_families(body) if family.name.startswith("gpuready_ib_")
               for s in family.samples}
    assert samples[("gpuready_ib_port_error_count", "mlx5_3", "1", "symbol_error")].value == 6
    assert samples[("gpuready_ib_port_error_count", "mlx5_0", "1", "link_downed")].value == 0  # after the reset
    assert samples[("gpuready_ib_port_error_increase_total", "mlx5_3", "1", "symbol_error")].value == 6
    assert samples[("gpuready_ib_port_error_increase_total", "mlx5_0", "1", "link_downed")].value == 1
    assert samples[("gpuready_ib_port_error_count", "mlx5_3", "1", "symbol_error")].labels["Hostname"] == HOST


def test_monitor_without_infiniband_writes_no_counter_record(tmp_path):
    source = RisingSource(tmp_path, [])
    events = []
    monitor_loop(source, interval_s=0.01, count=2, jsonl=tmp_path / "m.jsonl", exporter=None,
                 emit_event=events.append, ib_window=CounterWindow.start(tmp_path / "absent"))
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert events == [] and [record["type"] for record in records] == ["sample", "sample"]


@pytest.mark.parametrize("lang, expected", [
    ("en", "RDMA port mlx5_3/1: symbol_error +2 (total 6)"),
    ("zh", "RDMA 端口 mlx5_3/1：symbol_error 增加 2（累计 6）")])
def test_the_event_line_in_both_languages(lang, expected):
    event = {"event": "ib_counter_increase", "port": "mlx5_3/1", "counter": "symbol_error", "delta": 2, "total": 6}
    assert describe(event, lang) == expected
    reset = {"event": "ib_counter_reset", "port": "mlx5_0/1", "counter": "link_downed", "from": 3, "to": 0}
    assert "3 → 0" in describe(reset, lang)


# ------------------------------------------------------------------------------------------------------------ burn
def _judged(window: CounterWindow | None):
    judge = BurnJudge(HOST, [], None, [], ib_window=window)
    judge.judge()
    return [finding for finding in judge.findings if finding.check_id == "burn.ib_counters"]


def _window(tmp_path, writes):
    root = build_tree(tmp_path, {"mlx5_0/1": zeros(), "mlx5_1/1": zeros()})
    window = CounterWindow.start(root)
    for port, counter, value in writes:
        bump(root, port, counter, value)
    window.step()
    return window


def test_burn_fails_on_a_link_that_went_down(tmp_path):
    findings = _judged(_window(tmp_path, [("mlx5_1/1", "link_downed", 2), ("mlx5_1/1", "symbol_error", 30)]))
    assert [(f.status, f.subject.nic) for f in findings] == [(Status.FAIL, "mlx5_1/1")]
    assert findings[0].observed == {"increase": {"link_downed": 2, "symbol_error": 30}, "resets": {}}
    assert "mlx5_1/1 went down 2 time(s)" in findings[0].message and "symbol_error +30" in findings[0].message
    assert "mlxlink -d mlx5_1 -p 1" in findings[0].fix
    assert message(findings[0].message_id, "zh", **findings[0].message_values).startswith("burn 期间 RDMA 端口 mlx5_1/1")


@pytest.mark.parametrize("counter", ["symbol_error", "port_rcv_errors", "link_error_recovery"])
def test_burn_warns_on_rising_error_counters_naming_port_and_increase(tmp_path, counter):
    findings = _judged(_window(tmp_path, [("mlx5_0/1", counter, 5)]))
    assert [(f.status, f.subject.nic, f.observed["increase"]) for f in findings] == [
        (Status.WARN, "mlx5_0/1", {counter: 5})]
    assert f"mlx5_0/1 rose during the burn ({counter} +5)" in findings[0].message


def test_burn_passes_quiet_counters_and_resets_alone(tmp_path):
    root = build_tree(tmp_path, {"mlx5_0/1": {**zeros(), "symbol_error": 900}, "mlx5_1/1": zeros()})
    window = CounterWindow.start(root)
    bump(root, "mlx5_0/1", "symbol_error", 0)  # someone cleared the counters during the run: no error
    window.step()
    findings = _judged(window)
    assert [(f.status, f.message) for f in findings] == [
        (Status.PASS, "No RDMA port error counter rose during the burn (2 port(s), read 2 times).")]


def test_burn_without_rdma_ports_has_no_finding(tmp_path):
    assert _judged(CounterWindow.start(tmp_path / "absent")) == []
    assert _judged(None) == []


class _NoRanks(BurnRun):
    """burn's run on CPU with the ranks' run replaced by counters rising while it lasts (no worker is started)."""

    def __init__(self, options, writes):
        super().__init__(options)
        self.writes = writes

    def start_ranks(self, **kwargs):
        for port, counter, value in self.writes:
            bump(self.options.ib_root, port, counter, value)
        return RunOutcome(wall_s=0.1)


def test_burn_samples_at_start_and_end_and_reports_the_deltas(tmp_path):
    root = build_tree(tmp_path, {"mlx5_0/1": zeros(), "mlx5_1/1": {**zeros(), "symbol_error": 11}})
    options = BurnOptions(device="cpu", duration_s=1, interval_s=60.0, ib_root=root, log_dir=tmp_path / "logs")
    report = _NoRanks(options, [("mlx5_1/1", "symbol_error", 14)]).measure()
    counters = report.facts["burn"]["ib_counters"]
    assert counters["readings"] == 2 and counters["root"] == str(root)
    assert counters["ports"]["mlx5_1/1"]["symbol_error"] == {"start": 11, "end": 14, "increase": 3}
    assert counters["ports"]["mlx5_0/1"]["link_downed"] == {"start": 0, "end": 0, "increase": 0}
    assert [(f.check_id, f.status, f.subject.nic) for f in report.findings if f.check_id == "burn.ib_counters"] == [
        ("burn.ib_counters", Status.WARN, "mlx5_1/1")]
