"""Tests that kill the mutants of the judges that survived the suite (issue 23, mutation testing; the run and its
module → test-file table are in benchmarks/mutation_score.sh): the one Xid/SXid judge (checks/kernel_judge.py), the
burn judge (verbs/burn/judge.py) and the bench judge (verbs/bench/judge.py).

Expected values come from recordings (tests/fixtures, each README names its source), NVIDIA's Xid catalog
(tests/fixtures/nvidia-xid-catalog/catalog.tsv) or are worked out by hand in the docstring.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import FIXTURES
from gpuready.checks import kernel_judge
from gpuready.checks.kernel_judge import XidGroup, judge_sxid, judge_xid, root_causes, xid_text
from gpuready.i18n import catalogue, message
from gpuready.model import Status
from gpuready.telemetry import Telemetry
from gpuready.verbs.burn.judge import BurnGpu, BurnJudge

BOARDS = FIXTURES / "boards"
NVLINK5_NON_FATAL = "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)"
"""The detail of tests/fixtures/boards/xid145-nonfatal-dmesg.txt (leptonai/gpud PR #1174): Xid 145 … Nonfatal."""
NVLINK5_FATAL = "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"
"""The detail of tests/fixtures/boards/xid149-fatal-dmesg.txt (same PR): Xid 149 … Fatal."""


def _catalog_row(code: int) -> list[str]:
    """NVIDIA's catalog row: code, mnemonic, immediate action, investigatory action, description."""
    for line in (FIXTURES / "nvidia-xid-catalog" / "catalog.tsv").read_text().splitlines():
        cells = line.split("\t")
        if cells[0] == str(code):
            return cells
    raise KeyError(code)


# ------------------------------------------------------------------------------------------- the Xid judge

def test_a_gpu_fallen_off_the_bus_without_a_number_is_judged_as_xid_79():
    """`code` None is the kernel's 'GPU has fallen off the bus' without an Xid number: NVIDIA's catalog row 79 is
    ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS, immediate action RESTART_BM (a reboot: critical, so it fails), and the
    GPU is to blame."""
    row = _catalog_row(79)
    judged = judge_xid(None)
    assert judged.name == f"Xid 79 {row[1]}" == "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert row[2] == "RESTART_BM"
    assert (judged.status, judged.blame, judged.reasons) == (Status.FAIL, "GPU", ("catalog severity critical",))


@pytest.mark.parametrize("code", [38, 61, 119, 120])
def test_driver_and_firmware_xids_blame_the_driver(code):
    """NVIDIA's catalog: 38 'Driver firmware error' (FECS watchdog), 61 PMU_BREAKPOINT (the PMU firmware's internal
    breakpoint), 119 'GSP RPC Timeout' and 120 'GSP Error' (the GSP firmware the driver runs; investigatory action
    INVESTIGATE_SW): the driver's, not the GPU's."""
    assert _catalog_row(38)[4] == "Driver firmware error" and _catalog_row(119)[3] == "INVESTIGATE_SW"
    assert judge_xid(code).blame == "driver"


@pytest.mark.parametrize("code, blame", [(13, "application"), (74, "fabric"), (48, "GPU")])
def test_other_xids_blame_the_application_the_fabric_or_the_gpu(code, blame):
    """13 is an application fault (catalog RESTART_APP), 74 NVLINK_ERROR the fabric's, 48 (ECC DBE) the GPU's."""
    assert judge_xid(code).blame == blame


def test_an_application_xid_warns_and_says_to_check_the_application_first():
    """Xid 13 (catalog immediate action RESTART_APP, severity info in gpuready's table): a warning whose one reason
    is that the catalog blames the application, and whose action starts with 'Check the application first.'."""
    assert _catalog_row(13)[2] == "RESTART_APP"
    judged = judge_xid(13, "Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address")
    assert judged.status == Status.WARN
    assert judged.reasons == ("the catalog blames the application: check the application first",)
    assert judged.action == ("Check the application first. Treat as an application bug first: rerun the job with "
                             "`CUDA_LAUNCH_BLOCKING=1` or under `compute-sanitizer`; only if it recurs with known-good "
                             "code on one GPU, run `dcgmi diag -r 3` on that GPU.")


@pytest.mark.parametrize("code, detail, status, reason", [
    (149, NVLINK5_FATAL, Status.FAIL, "the line says fatal"),
    (145, NVLINK5_NON_FATAL, Status.WARN, "the line says non-fatal"),
    (145, "RLW_RXPIPE XC0 i0 Link 13", Status.FAIL,
     "catalog severity error (the line does not say fatal or non-fatal)"),
])
def test_nvlink5_xids_are_judged_by_the_word_on_their_line(code, detail, status, reason):
    """Xid 144-150 (NVLink5): NVIDIA's 'XID 144-150 Decode' marks each status Fatal (reset) or Non-fatal (ignore);
    the line carries the word, so it decides. A line without the word falls back to the table's severity (error:
    fail), saying the line did not state it."""
    judged = judge_xid(code, detail)
    assert (judged.status, judged.reasons, judged.blame) == (status, (reason,), "fabric")


def test_an_unknown_xid_is_a_warning_and_not_an_nvlink_error():
    """Xid 201 is not in NVIDIA's catalog (codes 1-172): warn, say to look it up, and it is no NVLink error."""
    judged = judge_xid(201)
    assert (judged.status, judged.blame, judged.nvlink) == (Status.WARN, "unknown", False)
    assert judge_xid(145, NVLINK5_NON_FATAL).nvlink is True and judge_xid(13).nvlink is False


def test_each_judgement_cites_its_source():
    """An unknown Xid cites NVIDIA's Xid catalog (the page tests/fixtures/nvidia-xid-catalog/README.md names), an
    SXid the Fabric Manager user guide, a known Xid its row's own source."""
    catalog_url = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
    assert catalog_url in (FIXTURES / "nvidia-xid-catalog" / "README.md").read_text()
    assert judge_xid(201).ref == f"NVIDIA Xid catalog, {catalog_url}"
    sxid_ref = judge_sxid(12028, "Non-fatal").ref
    assert sxid_ref.startswith("NVIDIA Fabric Manager User Guide, SXid errors: ")
    assert sxid_ref.endswith("https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/")
    assert judge_xid(13).ref.startswith("NVIDIA Xid catalog https://docs.nvidia.com/deploy/xid-errors/")


def test_a_judgement_is_a_value_that_cannot_be_changed():
    judged = judge_xid(13)
    with pytest.raises(dataclasses.FrozenInstanceError):
        judged.status = Status.PASS  # type: ignore[misc]


def test_an_xids_texts_come_from_the_catalogue_in_every_language():
    """Xid 13's meaning is the catalogue's `xid.13.meaning` (so it renders in Chinese), not its English row."""
    text = xid_text(13, "meaning")
    assert text.msg_id == "xid.13.meaning"
    assert message(text.msg_id, "zh", **text.values) == catalogue("zh")["xid.13.meaning"]


def test_a_row_added_without_a_translation_says_its_english(monkeypatch):
    """A row in xid.toml that the catalogue does not have yet (an invented code 999): its meaning is its English
    without the closing full stop (it is a part of a sentence), its action keeps the full stop; a code in neither
    says nothing."""
    row = {"xid": 999, "name": "INVENTED", "meaning": "An invented error on the link's TX.",
           "action": "Do the invented thing."}
    monkeypatch.setattr(kernel_judge, "xid_entry", lambda code: row if code == 999 else None)
    assert "xid.999.meaning" not in catalogue("en")
    meaning, action = xid_text(999, "meaning"), xid_text(999, "action")
    assert (meaning.msg_id, meaning.english(), action.english()) == (
        "xid.untranslated", "An invented error on the link's TX", "Do the invented thing.")
    assert xid_text(998, "meaning").english() == xid_text(998, "action").english() == ""


def test_the_status_of_an_sxid_line_that_does_not_say_is_the_tables(monkeypatch):
    """xid.toml `[sxid] unstated` decides a line without Fatal/Non-fatal; a line that says Non-fatal warns whatever
    it says (here the table set to fail for the test)."""
    table = kernel_judge.load_table("xid")
    monkeypatch.setattr(kernel_judge, "load_table", lambda name: {**table, "sxid": {**table["sxid"], "unstated": "fail"}})
    assert judge_sxid(11004, "Link 32 ingress invalid ACL").status == Status.FAIL
    assert judge_sxid(12028, "Non-fatal, Link 32 egress non-posted PRIV error").status == Status.WARN


def test_sxid_status_follows_the_lines_word():
    """An NVSwitch SXid: fatal as its line says, non-fatal or unstated warn; the reason names which."""
    fatal, non_fatal, unstated = (judge_sxid(20034, "Fatal, Link 32 LTSSM Fault Up"),
                                  judge_sxid(12028, "Non-fatal, Link 32 egress non-posted PRIV error"),
                                  judge_sxid(11004, "Link 32 ingress invalid ACL"))
    assert (fatal.status, fatal.reasons) == (Status.FAIL, ("the line says fatal",))
    assert (non_fatal.status, non_fatal.reasons) == (Status.WARN, ("the line says non-fatal",))
    assert (unstated.status, unstated.reasons) == (Status.WARN, ("the line does not say fatal",))
    assert fatal.name == "SXid 20034" and fatal.blame == "fabric" and fatal.nvlink
    assert fatal.meaning == "an NVSwitch error"


# ----------------------------------------------------------------------------------- cascades: which Xid caused which

def _group(code: int, first: int, bus: str = "0000:19:00.0", epoch: int = 0, clock=None) -> XidGroup:
    return XidGroup(bus_id=bus, code=code, epoch=epoch, first=first, first_clock=clock)


def _causes(groups, first_sxid=None) -> dict[int, tuple[str, str]]:
    """Xid code → (its root cause, why), in English."""
    return {group.code: (cause.english(), why.english())
            for group, (cause, why) in root_causes(groups, first_sxid).items()}


DBE_WHY = "the uncorrectable memory error (Xid 48, DBE) causes the row remap, the containment and the recovery action"
CONTAINED_WHY = "the uncorrectable memory error (Xid 94/95) causes the row remap and the recovery action"


def test_the_memory_chain_follows_the_double_bit_error_wherever_it_is_logged():
    """NVIDIA's catalog: Xid 48 'Double Bit ECC Error' → 63 'GPU memory remapping event' / 64 'remapping failure' →
    94/95 'Contained/Uncontained memory error' → 154 'GPU Recovery Action Changed' ('Informational only regarding
    another Xid'). The driver may log the 63 before the 48 (one driver load): every one of them follows from the 48."""
    assert _catalog_row(48)[4] == "Double Bit ECC Error" and _catalog_row(154)[3].startswith("N/A Informational")
    groups = [_group(63, 0), _group(48, 1), _group(64, 2), _group(95, 3), _group(154, 4)]
    assert _causes(groups) == {code: ("Xid 48", DBE_WHY) for code in (63, 64, 95, 154)}


def test_a_contained_or_uncontained_error_causes_the_remap_without_a_dbe():
    """Without a 48, the 94/95 starts the chain: the remap (63, or 64 failed) and the recovery action follow it."""
    assert _causes([_group(95, 0), _group(63, 1)]) == {63: ("Xid 95", CONTAINED_WHY)}
    assert _causes([_group(64, 0), _group(94, 1)]) == {64: ("Xid 94", CONTAINED_WHY)}
    assert _causes([_group(95, 0), _group(154, 1)]) == {154: ("Xid 95", CONTAINED_WHY)}


def test_a_channel_teardown_after_an_nvlink_error_follows_from_it():
    """NVIDIA's catalog row 45 'Preemptive cleanup, due to previous errors': after an NVLink5 Xid 145 on the same GPU
    the 45 is the NVLink error's doing (the kernel line itself says `caused by previous Xid 145`,
    tests/fixtures/public/xid/xid45-after-145-149-kernlog.txt); a 45 logged before the 145 is not."""
    assert _catalog_row(45)[4].startswith("Preemptive cleanup, due to previous errors")
    assert _causes([_group(145, 0), _group(45, 1)]) == {45: ("Xid 145", "the NVLink error tore down the job's channels")}
    assert _causes([_group(45, 0), _group(145, 1)]) == {}
    assert _causes([_group(145, 0), _group(154, 1)]) == {
        154: ("Xid 145", "the NVLink error tore down the job's channels")}


EARLIER_WHY = "the catalog says it follows an earlier error on the GPU"


def test_a_cleanup_or_recovery_xid_follows_the_latest_earlier_error_on_its_gpu():
    """Catalog row 45 ('Preemptive cleanup, due to previous errors') and 154 ('Informational only regarding another
    Xid') follow whatever error came before them on the GPU: the latest earlier one; never one logged after them."""
    assert _causes([_group(13, 0), _group(45, 1)]) == {45: ("Xid 13", EARLIER_WHY)}
    assert _causes([_group(13, 0), _group(31, 1), _group(154, 2)]) == {154: ("Xid 31", EARLIER_WHY)}
    assert _causes([_group(45, 0), _group(13, 1)]) == {}
    assert _causes([_group(154, 0), _group(31, 1)]) == {}


def test_a_chain_names_its_first_cause():
    """48 (DBE) → 95 (uncontained, the DBE rule) → 45 (cleanup after the 95, the earlier-error rule): the 45's root
    cause is the 48; with both 94 and 95 before a 63 the contained rule names the 94 (listed first, and first here)."""
    assert _causes([_group(48, 0), _group(95, 1), _group(45, 2)]) == {
        95: ("Xid 48", DBE_WHY), 45: ("Xid 48", EARLIER_WHY)}
    assert _causes([_group(94, 0), _group(95, 1), _group(63, 2)]) == {63: ("Xid 94", CONTAINED_WHY)}


SXID_WHY = "it follows an NVSwitch error on the fabric"


def test_an_xid_shortly_after_an_nvswitch_sxid_follows_from_it():
    """tests/fixtures/public/xid/xid79-sxid-dmesg.txt logs the SXids 12 s after the Xid 79; an Xid up to 60 s after
    the first SXid (kernel_judge.SXID_WINDOW_S, gpuready's choice) on the same clock follows from it, an application
    fault (13, 31) never does, and with no comparable clock the log's order decides."""
    sxid = (0, ("boot", 6781741.5))

    def after(code: int, seconds: float | None, clock: str = "boot"):
        stamp = None if seconds is None else (clock, 6781741.5 + seconds)
        return _causes([_group(code, 1, clock=stamp)], sxid).get(code)
    assert after(32, 0.0) == after(32, 12.0) == after(32, 60.0) == ("an NVSwitch SXid", SXID_WHY)
    assert after(32, 60.5) is None and after(32, -1.0) is None
    assert after(31, 12.0) is None and after(13, 12.0) is None
    assert after(32, None) == ("an NVSwitch SXid", SXID_WHY)  # the Xid has no clock
    assert after(32, 600.0, clock="wall") == ("an NVSwitch SXid", SXID_WHY)  # clocks of different kinds
    no_clock = (0, None)
    assert _causes([_group(32, 1, clock=("boot", 5.0))], no_clock) == {32: ("an NVSwitch SXid", SXID_WHY)}
    assert _causes([_group(32, 0, clock=("boot", 5.0))], (1, ("boot", 4.0))) == {}  # the Xid was logged first


def test_xids_nvml_reported_during_a_run_are_judged_and_worded_as_in_a_log():
    """NVML's event API gave Xid 13 at 3 s and Xid 79 at 12 s into a run: each is one finding with the same status as
    the kernel judge gives the number (13 warns: the application; 79 fails), `expected` 'no Xid', the Xid as observed,
    and no note added where none was given."""
    from gpuready.checks.kernel_judge import nvml_xid_findings
    from gpuready.model import Subject
    found = nvml_xid_findings("bench.xid", [(3.0, 1, 13), (12.0, 0, 79)], lambda index: Subject(host="h"), "the run")
    assert [(f.status, f.observed, f.expected) for f in found] == [(Status.WARN, 13, "no Xid"),
                                                                   (Status.FAIL, 79, "no Xid")]
    assert found[0].message == (
        "Xid 13 ROBUST_CHANNEL_GR_EXCEPTION at 3 s into the run: Graphics/compute engine exception, usually an illegal "
        "memory access or other fault raised by the application's kernel (the catalog blames the application: check "
        "the application first).")
    assert found[1].refs == [judge_xid(79).ref]


def test_the_cascade_table_cannot_be_changed_by_a_caller():
    with pytest.raises(dataclasses.FrozenInstanceError):
        kernel_judge.CASCADES[0].later_only = False  # type: ignore[misc]


def test_a_cascade_stays_on_its_gpu_and_in_its_driver_load():
    """The same 48 and 63 on two GPUs, or before and after a driver reload: nothing follows from the other."""
    assert _causes([_group(48, 0, bus="0000:19:00.0"), _group(63, 1, bus="0000:3b:00.0")]) == {}
    assert _causes([_group(48, 0, epoch=1), _group(63, 1, epoch=2)]) == {}


# ------------------------------------------------------------------------------------------------ the burn judge

BURN_60S = json.loads((FIXTURES / "h200-burn" / "burn-60s-report.json").read_text())
"""`gpuready burn --duration 60s` on one H200 (tests/fixtures/h200-burn/README.md): 66 telemetry samples a second
apart, idle until t = 4 s, 60 s of bf16 8192³ GEMMs, 36,300 GEMMs at 664.85 TFLOP/s, 8 GiB memory pattern."""


def _recorded_burn_samples() -> list[tuple[float, dict]]:
    series = {s["metric"]: s for s in BURN_60S["series"]}
    return [(t, {metric: s["values"][i] for metric, s in series.items()}) for i, t in enumerate(series["power_w"]["t_s"])]


def _recorded_burn_gpu(**changes) -> BurnGpu:
    result = {"iterations": 36300, "dtype": "bf16", "n": 8192, "errors": [], "tolerance_abs": 5.0,
              "reference_checksum": 1.5, "tflops": 664.85, "window_start": 4.3, "window_end": 64.3,
              "intervals": [], "memory": {"bytes": 2**33, "wrong_words": 0}, **changes}
    return BurnGpu(rank=0, nvml_index=0, identity={"bus_id": "0000:00:06.0", "uuid": "GPU-0000", "name": "NVIDIA H200"},
                   result=result, slowdown_c=89.0)


def test_the_recorded_h200_burn_replayed_gives_the_recorded_findings():
    """The recorded series replayed through the judge with the run's result (its GEMM window: 60 s from t = 4.3 s,
    between the last idle sample at 4.005 s and the first busy one at 5.006 s) give every finding the recorded report
    holds, word for word: errors, Xid, thermal and HW throttling, temperature (peak 63 °C of 89), power (691 W = 99 %
    of 700, capped), ECC, clocks (median 1,500 → 1,508 MHz), and its two measurements (664.85 TFLOP/s, 691.4 W)."""
    telemetry = Telemetry(started_at=0.0, samples={0: _recorded_burn_samples()}, xid_source="NVML event API")
    judge = BurnJudge("h200", [_recorded_burn_gpu()], telemetry, [])
    judge.judge()
    recorded = [(f["check_id"], f["status"], f["message"]) for f in BURN_60S["findings"]]
    replayed = [(f.check_id, f.status.value, f.message) for f in judge.findings if f.check_id != "burn.throughput_low"]
    assert replayed == recorded
    recorded_measurements = {m["name"]: (m["value"], m["expected"]) for m in BURN_60S["measurements"]}
    assert {m.name: m.value for m in judge.measurements} == {name: value for name, (value, _)
                                                             in recorded_measurements.items()}
    power = next(m for m in judge.measurements if m.name == "burn_power_w")
    recorded_power = next(m for m in BURN_60S["measurements"] if m["name"] == "burn_power_w")
    assert (power.expected, power.samples, power.method) == (700.0, recorded_power["samples"], recorded_power["method"])


def test_the_recorded_burn_against_the_datasheet():
    """664.85 TFLOP/s against the H200's dense bf16 989 × 0.66 sustained (DESIGN.md §3: 655-665 measured at the 700 W
    cap) = 652.74: 664.85 / 652.74 = 1.019, '102%': a pass with no next step."""
    telemetry = Telemetry(started_at=0.0, samples={0: _recorded_burn_samples()}, xid_source="NVML event API")
    judge = BurnJudge("h200", [_recorded_burn_gpu()], telemetry, [])
    judge.judge()
    finding = next(f for f in judge.findings if f.check_id == "burn.throughput_low")
    assert (finding.status, finding.fix, finding.observed, finding.expected) == (Status.PASS, None, 664.9, 652.7)
    assert finding.message == ("664.9 bf16 TFLOP/s sustained, 102% of the 652.7 expected (989.0 dense × 0.66 "
                               "sustained).")
    measured = next(m for m in judge.measurements if m.name == "burn_tflops_bf16")
    assert (measured.value, measured.expected, measured.method["window_s"]) == (664.85, 652.7, 60.0)


def _replay(edit=None, gpu: BurnGpu | None = None, failures=(), xids=(), xid_source="NVML event API"):
    """The recorded burn replayed, each sample passed with its position in the GEMM window (t = 5.006 … 64.006 s:
    0 … 59; negative before, 60 after) to `edit(position, sample)`; findings by check id, and the judge."""
    samples = []
    for t, sample in _recorded_burn_samples():
        sample = dict(sample)
        if edit:
            edit(round(t - 5.006), sample)
        samples.append((t, sample))
    telemetry = Telemetry(started_at=0.0, samples={0: samples}, xid_source=xid_source, xid_events=list(xids))
    judge = BurnJudge("h200", [gpu or _recorded_burn_gpu()], telemetry, list(failures))
    judge.judge()
    found: dict[str, list] = {}
    for finding in judge.findings:
        found.setdefault(finding.check_id, []).append(finding)
    return found, judge


@pytest.mark.parametrize("bit, check_id", [("hw_thermal_slowdown", "burn.throttle_thermal"),
                                           ("hw_slowdown", "burn.throttle_hw"),
                                           ("hw_power_brake_slowdown", "burn.throttle_hw")])
@pytest.mark.parametrize("throttled, status, share", [(3, Status.PASS, "5%"), (4, Status.WARN, "7%"),
                                                      (15, Status.WARN, "25%"), (16, Status.FAIL, "27%")])
def test_throttle_shares_of_the_recorded_window(bit, check_id, throttled, status, share):
    """The recorded window holds 60 samples; the burn thresholds (thresholds.toml [burn]) warn above 5 % and fail
    above 25 % of them: 3/60 = 5 % passes, 4/60 = 6.7 % warns, 15/60 = 25 % warns, 16/60 = 26.7 % fails."""
    from gpuready.facts.clock_reasons import REASON_BITS

    def edit(position, sample):
        if 0 <= position < throttled:
            sample["clock_event_reasons"] = int(sample["clock_event_reasons"]) | REASON_BITS[bit]
    found, _ = _replay(edit)
    finding = found[check_id][0]
    assert (finding.status, finding.observed) == (status, round(throttled / 60, 3))
    assert f" in {share} of the GEMM window's samples." in finding.message
    assert finding.expected == "<= 5%" and (finding.fix is None) == (status == Status.PASS)


@pytest.mark.parametrize("peak, slowdown, status, why", [
    (89, 89.0, Status.FAIL, "reached its slowdown temperature 89 °C"),
    (88, 89.0, Status.WARN, "came within 5 °C of its slowdown temperature or above 90 °C"),
    (84, 89.0, Status.WARN, "came within 5 °C of its slowdown temperature or above 90 °C"),
    (83, 89.0, Status.PASS, "stayed clear of its slowdown temperature (89 °C)"),
    (90, None, Status.WARN, "came within 5 °C of its slowdown temperature or above 90 °C"),
    (89, None, Status.PASS, "stayed clear of its slowdown temperature"),
])
def test_peak_temperature_against_the_gpus_slowdown_and_the_rule_of_thumb(peak, slowdown, status, why):
    """The recorded peak (63 °C) raised to `peak` at one sample: at or above the GPU's own slowdown (89 °C for the
    H200, NVML) fails, within 5 °C of it warns; without a slowdown figure the 90 °C rule of thumb decides."""
    def edit(position, sample):
        if position == 30:
            sample["temperature_c"] = peak
    gpu = _recorded_burn_gpu()
    gpu.slowdown_c = slowdown
    found, _ = _replay(edit, gpu=gpu)
    finding = found["burn.temperature"][0]
    assert (finding.status, finding.message) == (status, f"Peak {peak} °C under full load: {why}.")
    assert finding.expected == ("< 84 °C" if slowdown else "< 90 °C")


def test_power_far_below_the_limit_without_the_cap_warns():
    """The recorded power (691 W of 700) cut to 500 W and the SW power cap bit cleared over the whole window: 500/700
    = 71 % < 80 % uncapped warns; at 570 W (81 %) it passes; capped at 500 W it passes (the cap explains it)."""
    from gpuready.facts.clock_reasons import REASON_BITS
    cap = REASON_BITS["sw_power_cap"]

    def uncapped(watts):
        def edit(position, sample):
            sample["power_w"] = watts
            sample["clock_event_reasons"] = int(sample["clock_event_reasons"]) & ~cap
        return edit
    found, judge = _replay(uncapped(500.0))
    finding = found["burn.power"][0]
    assert (finding.status, finding.observed, finding.expected) == (Status.WARN, 500.0, 700.0)
    assert finding.message == "Sustained 500 W = 71% of the 700 W limit; not power-capped"
    assert next(m for m in judge.measurements if m.name == "burn_power_w").method["sw_power_cap_share"] == 0.0
    assert _replay(uncapped(570.0))[0]["burn.power"][0].status == Status.PASS

    def capped(position, sample):
        sample["power_w"] = 500.0
    assert _replay(capped)[0]["burn.power"][0].status == Status.PASS


def test_new_ecc_errors_during_the_burn():
    """The recorded ECC counters are flat; 2 more uncorrectable errors from the 20th window sample fail, 3 corrected
    ones are noted as a pass."""
    def uncorrected(position, sample):
        if position >= 20:
            sample["ecc_uncorrected"] = sample["ecc_uncorrected"] + 2

    def corrected(position, sample):
        if position >= 20:
            sample["ecc_corrected"] = sample["ecc_corrected"] + 3
    finding = _replay(uncorrected)[0]["burn.ecc"][0]
    assert (finding.status, finding.observed, finding.message) == (
        Status.FAIL, 2, "2 new uncorrectable ECC error(s) during the burn.")
    finding = _replay(corrected)[0]["burn.ecc"][0]
    assert (finding.status, finding.observed, finding.message) == (
        Status.PASS, 3, "3 new corrected ECC error(s) during the burn (corrected by ECC; noted, not a fault).")


@pytest.mark.parametrize("last_mhz, capped, status", [(1274, False, Status.WARN), (1275, False, Status.PASS),
                                                      (1274, True, Status.PASS)])
def test_a_lasting_clock_step_not_explained_by_the_power_cap(last_mhz, capped, status):
    """Clocks are judged after the window's first 10 s (t = 15.006 … 64.006: 50 samples, thirds of 16); the recorded
    first third's median is 1,500 MHz. A step is a last-third median more than 15 % lower (thresholds.toml [burn]
    clock_step_fraction): below 1,500 × 0.85 = 1,275 MHz. The last 16 samples set to 1,274 MHz without the SW power
    cap warn; 1,275 is no step; 1,274 under the power cap is the cap's doing."""
    from gpuready.facts.clock_reasons import REASON_BITS
    cap = REASON_BITS["sw_power_cap"]

    def edit(position, sample):
        if position >= 60 - 16:
            sample["sm_clock_mhz"] = last_mhz
            if not capped:
                sample["clock_event_reasons"] = int(sample["clock_event_reasons"]) & ~cap
    finding = _replay(edit)[0]["burn.clock_instability"][0]
    assert finding.status == status
    assert finding.observed == {"first_third_mhz": 1500.0, "last_third_mhz": float(last_mhz)}
    if status == Status.WARN:
        assert finding.message == ("SM clock stepped down from a median 1,500 MHz to 1,274 MHz over the run, not "
                                   "explained by the power cap.")
        assert finding.expected == ">= 1,275 MHz"
    else:
        assert finding.message == (f"SM clock median 1,500 → {last_mhz:,} MHz" + (
            " (swings under the power cap are normal)." if capped else "."))



@pytest.mark.parametrize("error, cause", [
    # CUDA runtime's cudaGetErrorString texts, as PyTorch raises them ("CUDA error: <text>")
    ("RuntimeError: CUDA error: out of memory", "out_of_memory"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB", "out_of_memory"),
    ("cudaErrorMemoryAllocation", "out_of_memory"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "illegal_address"),
    ("RuntimeError: CUDA error: misaligned address", "illegal_address"),
    ("CUDA Exception: Warp Illegal Address", "illegal_address"),  # cuda-gdb's name for the fault
    ("RuntimeError: CUDA error: unspecified launch failure", "launch_failure"),
    ("RuntimeError: CUDA error: the launch timed out and was terminated", "launch_failure"),
    ("RuntimeError: CUDA error: too many resources requested for launch", "launch_failure"),
    ("RuntimeError: CUDA error: GPU has fallen off the bus", "device_lost"),
    ("RuntimeError: device lost", "device_lost"),  # the classifier's own wording (VK_ERROR_DEVICE_LOST's)
    ("RuntimeError: CUDA error: GPU is lost", "device_lost"),
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", "device_lost"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "device_lost"),  # kohya-ss/sd-scripts#1434
    ("GPU 0: double-bit ECC error", "device_lost"),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "device_lost"),
    ("RuntimeError: CUDA error: device not ready", "device_lost"),
    ("RuntimeError: CUDA error: unknown error", "device_lost"),
    ("cudaErrorDevicesUnavailable", "device_lost"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "other"),
    ("", "other"),
])
def test_a_workers_exception_is_classified_by_its_cause(error, cause):
    """Every pattern the classifier knows, in the texts CUDA (cudaGetErrorString) and PyTorch print where they have
    one; anything else is `other`."""
    from gpuready.verbs.burn.judge import classify_failure
    assert classify_failure(error) == cause
    assert classify_failure(error.upper()) == cause  # CUDA's and PyTorch's capitals do not matter


def test_a_gpu_without_a_slowdown_figure_or_power_limit():
    """A burned GPU built without its slowdown temperature or power limits (NVML gave none): the temperature is held
    to the 90 °C rule of thumb, the expectation is not power-scaled and names no limit."""
    gpu = _recorded_burn_gpu()
    bare = BurnGpu(rank=gpu.rank, nvml_index=gpu.nvml_index, identity=gpu.identity, result=gpu.result)
    found, judge = _replay(gpu=bare)
    assert found["burn.temperature"][0].expected == "< 90 °C"
    basis = next(m for m in judge.measurements if m.name == "burn_tflops_bf16").method["expected_basis"]
    assert (basis["power_scale"], basis["default_power_limit_w"]) == (1.0, None)


def test_no_throttle_reasons_in_the_window_is_no_throttling():
    """Samples without clock-event reasons (a driver that does not report them): 0 % throttled, not 100 %."""
    def edit(position, sample):
        del sample["clock_event_reasons"]
    found, _ = _replay(edit)
    assert [(found[c][0].status, found[c][0].observed) for c in ("burn.throttle_thermal", "burn.throttle_hw")] == [
        (Status.PASS, 0.0), (Status.PASS, 0.0)]
