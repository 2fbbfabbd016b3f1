"""burn's judge and monitor's events on replayed telemetry; burn on CPU with the self-test; Prometheus."""

import dataclasses
import json
import subprocess
import sys
import urllib.request

import pytest

from gpuready.verbs.burn import parse_duration
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge
from gpuready.facts.clock_reasons import REASON_BITS
from gpuready.facts.nvml_records import GpuIdentity, GpuSample
from gpuready.model import Status
from gpuready.verbs.monitor import PrometheusExporter, detect_events, monitor_loop
from gpuready.telemetry import Sampler, Telemetry
from gpuready.runner.watchdog import RankFailure

IDENTITY = [GpuIdentity(index=0, bus_id="0000:00:06.0", uuid="GPU-0000", name="NVIDIA H200")]


def _sample(power=690.0, temperature=60, clock=1755, reasons=REASON_BITS["sw_power_cap"], ecc=(0, 0), width=16):
    return GpuSample(power_w=power, power_limit_w=700.0, temperature_c=temperature, memory_temperature_c=55,
                     sm_clock_mhz=clock, memory_clock_mhz=3201, utilization_pct=100, clock_event_reasons=reasons,
                     ecc_corrected=ecc[0], ecc_uncorrected=ecc[1], pcie_replay=0, pcie_width=width)




def _telemetry(samples):
    return Telemetry(started_at=1000.0, samples={0: list(enumerate(samples))}, xid_source="NVML event API")


def _gpu(tflops=656.0, errors=(), window=(1002.0, 1059.0)):
    result = {"iterations": 12000, "dtype": "bf16", "n": 8192, "errors": list(errors), "tolerance_abs": 5.0,
              "reference_checksum": 1.5, "tflops": tflops, "window_start": window[0], "window_end": window[1],
              "intervals": [], "memory": {"bytes": 2**33, "wrong_words": 0}}
    return BurnGpu(rank=0, nvml_index=0, identity=dataclasses.asdict(IDENTITY[0]), result=result, slowdown_c=89.0)


def _judge(samples, gpu=None, failures=(), xids=()):
    telemetry = _telemetry(samples)
    telemetry.xid_events = list(xids)
    judge = BurnJudge("h200", [gpu or _gpu()], telemetry, list(failures))
    judge.judge()
    return {f.check_id: f.status for f in judge.findings}, judge


def test_healthy_power_capped_burn_is_clean():
    # clocks swing under the power cap (as shared/fixtures/h200-1gpu/peaks.json shows): not a fault
    samples = [_sample(clock=1755 if t % 2 else 1600) for t in range(60)]
    statuses, judge = _judge(samples)
    assert all(status in (Status.PASS, Status.SKIP) for status in statuses.values()), statuses
    power = next(m for m in judge.measurements if m.name == "burn_power_w")
    assert power.value == pytest.approx(690.0) and power.method["sw_power_cap_share"] == 1.0


def test_thermal_throttle_hot_gpu_and_clock_step():
    thermal = REASON_BITS["hw_thermal_slowdown"]
    samples = [_sample(temperature=80 + t // 10, clock=1755 if t < 30 else 1300,
                       reasons=thermal if t >= 30 else REASON_BITS["sw_power_cap"]) for t in range(60)]
    statuses, _ = _judge(samples)
    assert statuses["burn.throttle_thermal"] == Status.FAIL  # ~48 % of the window
    assert statuses["burn.temperature"] == Status.WARN  # 85 °C: within 5 °C of 89
    assert statuses["burn.clock_instability"] == Status.WARN


def test_errors_xid_ecc_and_lost_gpu():
    samples = [_sample(ecc=(0, 0 if t < 20 else 2)) for t in range(60)]
    gpu = _gpu(errors=[{"iteration": 60, "elements": 1, "max_abs_error": 21.0, "t": 1010.0}])
    statuses, judge = _judge(samples, gpu, failures=[RankFailure(rank=0, kind="hang", detail="stopped advancing")],
                             xids=[(30.0, 0, 79)])
    assert statuses["burn.errors"] == Status.FAIL and statuses["burn.xid"] == Status.FAIL
    assert statuses["burn.ecc"] == Status.FAIL and statuses["burn.gpu_lost"] == Status.FAIL
    assert "GEMM 60" in next(f.message for f in judge.findings if f.check_id == "burn.errors")


def test_straggler():
    slow = _gpu(tflops=560.0)
    slow.rank, slow.nvml_index = 1, None
    judge = BurnJudge("h", [_gpu(), slow], None, [])
    judge.judge()
    warned = [(f.check_id, f.subject.rank) for f in judge.findings if f.status == Status.WARN]
    assert warned == [("burn.throughput_low", 1), ("burn.straggler", 1)]  # 560 is 86 % of the 652.7 expected


def test_monitor_events():
    base = _sample(reasons=0)
    assert detect_events(0, base, _sample(reasons=REASON_BITS["hw_slowdown"])) == [
        {"gpu": 0, "event": "throttle_start", "reason": "hw_slowdown"}]
    events = detect_events(0, base, _sample(reasons=0, ecc=(3, 0), width=8))
    assert {event["event"] for event in events} == {"ecc_increment", "pcie_width_drop"}
    assert detect_events(0, base, None)[0]["event"] == "gpu_lost"


class Replay:
    """Replays samples as an NVML source would return them."""

    def __init__(self, samples):
        self.samples, self.identity, self.lost, self.position = samples, IDENTITY, set(), 0

    def sample(self, index):
        sample = self.samples[min(self.position, len(self.samples) - 1)]
        self.position += 1
        return sample

    def wait_xid(self, timeout_ms):
        return [(0, 48)] if self.position == 3 else []


def test_monitor_loop_jsonl_and_prometheus_over_loopback(tmp_path):
    samples = [_sample(reasons=0), _sample(reasons=0), _sample(reasons=REASON_BITS["sw_thermal_slowdown"]),
               _sample(reasons=0, ecc=(1, 0))]
    exporter = PrometheusExporter(0, IDENTITY, "node-1", address="127.0.0.1")
    port = exporter.server.server_address[1]
    events = []
    try:
        taken = monitor_loop(Replay(samples), interval_s=0.01, count=4, jsonl=tmp_path / "m.jsonl", exporter=exporter,
                             emit_event=events.append)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    finally:
        exporter.close()
    assert taken == 4
    assert [event["event"] for event in events] == ["throttle_start", "xid", "throttle_stop", "ecc_increment"]
    assert 'gpuready_power_usage_watts{Hostname="node-1",UUID="GPU-0000",gpu="0",modelName="NVIDIA H200"} 690.0' in body
    assert 'gpuready_sm_clock_hertz{' in body and "1.755e+09" in body
    assert 'gpuready_xid_events_total{' in body and 'xid="48"' in body
    lines = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert sum(line["type"] == "sample" for line in lines) == 4 and sum(line["type"] == "event" for line in lines) == 4


def test_sampler_with_a_source_that_dies():
    class Dying(Replay):
        def sample(self, index):
            self.position += 1
            return None if self.position > 2 else _sample()
    source = Dying([])
    with Sampler(source, [0], interval_s=0.01, watch_xid=False) as sampler:
        import time
        time.sleep(0.2)
    assert len(sampler.telemetry.samples[0]) == 2 and 0 in sampler.telemetry.lost_at


def test_parse_duration():
    assert parse_duration("30m") == 1800 and parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    with pytest.raises(ValueError):
        parse_duration("soon")


def _burn_cli(tmp_path, *args):
    out = tmp_path / "burn.json"
    result = subprocess.run([sys.executable, "-m", "gpuready", "burn", "--device", "cpu", "--duration", "3s",
                             "--json", "--out", str(out), *args], capture_output=True, text=True, timeout=120)
    return result, json.loads(out.read_text())


def test_burn_on_cpu_is_clean_and_the_self_test_is_caught(tmp_path):
    result, report = _burn_cli(tmp_path)
    assert result.returncode == 0 and report["verdict"] == "no_verdict"
    assert [f["status"] for f in report["findings"] if f["check_id"] == "burn.errors"] == ["pass"]
    result, report = _burn_cli(tmp_path, "--self-test")
    assert result.returncode == 1
    errors = [f for f in report["findings"] if f["check_id"] == "burn.errors"]
    assert errors[0]["status"] == "fail" and "GEMM 60" in errors[0]["message"]


def test_burn_bad_duration(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gpuready", "burn", "--duration", "soon"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "duration" in result.stderr


RECORDED = json.loads((__import__("conftest").FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())


def _recorded_samples():
    series = {s["metric"]: s for s in RECORDED["series"]}
    times = series["power_w"]["t_s"]
    return [(t, GpuSample.from_values({metric: s["values"][i] for metric, s in series.items()}))
            for i, t in enumerate(times)]


def test_recorded_h200_burn_series_judge_clean():
    samples = _recorded_samples()
    telemetry = Telemetry(started_at=0.0, samples={0: samples}, xid_source="NVML event API")
    busy = [t for t, sample in samples if sample.utilization_pct >= 90]  # the GEMM window
    gpu = _gpu(window=(busy[0], busy[-1]))
    judge = BurnJudge("h200", [gpu], telemetry, [])
    judge.judge()
    statuses = {f.check_id: f.status for f in judge.findings}
    assert all(status == Status.PASS for status in statuses.values()), statuses
    power = next(m for m in judge.measurements if m.name == "burn_power_w")
    assert power.value >= 0.97 * 700 and power.method["sw_power_cap_share"] > 0.9
    recorded = {f["check_id"]: f["status"] for f in RECORDED["findings"]}
    assert recorded["burn.power"] == "pass" and recorded["burn.clock_instability"] == "pass"


def test_recorded_series_replayed_through_monitor():
    samples = [sample for _, sample in _recorded_samples()]
    events = [event for previous, current in zip(samples, samples[1:]) for event in detect_events(0, previous, current)]
    kinds = [(event["event"], event.get("reason")) for event in events]
    assert ("throttle_start", "sw_power_cap") in kinds  # the load reaches the power cap
    assert not [event for event in events if event["event"] in ("ecc_increment", "pcie_width_drop", "gpu_lost")]


def test_recorded_burn_report_matches_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    from importlib import resources
    schema = json.loads(resources.files("gpuready").joinpath("schema/report.schema.json").read_text())
    jsonschema.validate(RECORDED, schema)


def test_monitor_without_a_driver_says_so():
    result = subprocess.run([sys.executable, "-m", "gpuready", "monitor", "--count", "1"], capture_output=True,
                            text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""})
    if result.returncode == 0:
        pytest.skip("this machine has an NVIDIA driver")
    assert result.returncode == 1 and "no NVIDIA GPU or driver" in result.stderr and "Traceback" not in result.stderr
