"""health.* and nvlink.* findings in the message catalogue (check_health.po, check_nvlink.po, knowledge_xid.po): each
carries a message id, renders whole in Chinese (the Xid's meaning and action from the catalogue, nested in the finding's
sentence, dated and history notes, cascades, the NVLink/NVSwitch parts) and keeps the English it always had."""

from __future__ import annotations

import re

import pytest
from babel.messages.pofile import read_po

from conftest import FIXTURES, PUBLIC
from gpuready.evidence.reader import read_bundle
from gpuready.checks.kernel_judge import judge_sxid, judge_xid, nvml_xid_findings
from gpuready.checks.registry import CheckOptions, run_checks
from gpuready.facts.types import Facts, GpuFacts, HostFacts
from gpuready.i18n import LOCALE_DIR, catalogue, message, said
from gpuready.knowledge import load_table
from gpuready.model import Subject
from gpuready.report.translate import in_language
from gpuready.pipeline import check_files

DOMAINS = ("check_health", "check_nvlink", "knowledge_xid")
CHECKS = ("health.", "nvlink.")
# Texts that are only placeholders and names, the same in both languages.
SAME_IN_BOTH = {"health.xid.what", "health.xid.found.fix", "health.sxid.found.fix", "health.sxid.found_history.fix",
                "nvlink.errors.found.fix", "nvlink.errors.part", "nvlink.errors.seen", "xid.untranslated", "xid.name",
                "xid.blame.gpu", "xid.cause.xid", "sxid.name", "xid.nvml.found.fix", "xid.nvml.found_noted.fix"}
CJK = re.compile(r"[\u4e00-\u9fff]")


def _document(files: dict) -> dict:
    return check_files(files, CheckOptions())[0].to_dict()


def _ours(document: dict, check_id: str | None = None) -> list[dict]:
    return [finding for finding in document["findings"] if finding["check_id"].startswith(CHECKS)
            and (check_id is None or finding["check_id"] == check_id)]


def _in_chinese(document: dict) -> dict:
    """Finding number → the finding in Chinese."""
    return {index: finding for index, finding in enumerate(in_language(document, "zh")["findings"])}


def _pair(document: dict, predicate) -> tuple[dict, dict]:
    """The one English finding `predicate` picks, and the same finding in Chinese."""
    chosen = [index for index, finding in enumerate(document["findings"]) if predicate(finding)]
    assert len(chosen) == 1, chosen
    return document["findings"][chosen[0]], _in_chinese(document)[chosen[0]]


def _leaves(value) -> list[str]:
    """The plain values a message was filled with (names, log lines, times), nested ones too."""
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [str(value)] if value is not None else []


def _english_left(english: str, chinese: str, values: dict) -> list[str]:
    """Runs of three or more English words of `english` that `chinese` still holds, once the values it was filled with
    (names, quoted log lines) and commands in backticks are taken out of both."""
    for text in sorted(_leaves(values), key=len, reverse=True):
        if len(text) > 2:
            english, chinese = english.replace(text, " "), chinese.replace(text, " ")
    english = re.sub(r"`[^`]*`|\b(?:sudo )?gpuready [a-z]+", " ", english)  # commands, backticked or not
    runs = re.findall(r"[A-Za-z][\w'/-]*(?: [A-Za-z][\w'/-]*){2,}", english)
    return [run for run in runs if run in chinese]


# ------------------------------------------------------------------------------------------------- the catalogue


def test_every_xid_row_has_its_meaning_and_action_in_both_languages_and_the_english_is_the_tables():
    english, chinese = catalogue("en"), catalogue("zh")
    for row in load_table("xid")["xid"]:
        code = row["xid"]
        assert english[f"xid.{code}.meaning"] == row["meaning"].rstrip("."), code
        assert english[f"xid.{code}.action"] == row["action"], code
        assert CJK.search(chinese[f"xid.{code}.meaning"]) and CJK.search(chinese[f"xid.{code}.action"]), code
        assert not chinese[f"xid.{code}.meaning"].endswith("。"), code  # a part of a sentence, as in English
    assert message("xid.79.meaning", "zh") == "GPU 已从 PCIe 总线上掉线：驱动无法再与它通信"


def test_every_text_of_these_domains_is_translated():
    for domain in DOMAINS:
        texts = {}
        for lang in ("en", "zh"):
            with open(LOCALE_DIR / lang / "LC_MESSAGES" / f"{domain}.po", "rb") as po_file:
                texts[lang] = {entry.id: entry.string for entry in read_po(po_file) if entry.id}
        same = {msg_id for msg_id, text in texts["en"].items() if texts["zh"][msg_id] == text}
        assert same <= SAME_IN_BOTH, (domain, sorted(same - SAME_IN_BOTH))


# ------------------------------------------------------------------------------------------------- health.xid


def test_xid_79_reads_in_chinese_from_the_catalogue_and_keeps_its_english():
    document = _document({"dmesg.txt": (FIXTURES / "pcie-power" / "dmesg-aer-tesla-oldformat.txt").read_text()})
    english, chinese = _pair(document, lambda finding: finding["check_id"] == "health.xid")
    assert english["message"] == (
        "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS on GPU0 (0000:02:00.0), 1×: The GPU has fallen off the PCIe "
        "bus: the driver can no longer talk to it (last 20.8 h after boot (uptime not in this run); blame: GPU). "
        "Last: [74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.")
    assert english["fix"] == (
        "Drain the node and reboot (a GPU reset is not possible); check power, cooling and PCIe seating (`lspci`, "
        "`dmesg`); if it recurs, run `dcgmi diag -r 3` and contact the vendor (RMA).")
    assert english["message_id"] == "health.xid.found"
    assert english["message_values"]["meaning"] == {"message_id": "xid.79.meaning", "message_values": {}}
    assert chinese["message"] == (
        "GPU0（0000:02:00.0） 上出现 Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS，1 次：GPU 已从 PCIe 总线上掉线"
        "：驱动无法再与它通信（最近一次：开机后 20.8 h（本次运行没有 uptime）；归因：GPU）。"
        "最后一条：[74889.644138] NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.")
    assert chinese["fix"] == message("xid.79.action", "zh") and chinese["fix"].startswith("排空节点并重启机器")


def test_history_cascade_and_application_notes_render_in_chinese():
    """A public capture: GPU0's Xid 31 follows its Xid 79, before a later driver load, and the catalog blames the
    application."""
    document = _document(read_bundle(PUBLIC / "xid"))
    english, chinese = _pair(document, lambda finding: finding["check_id"] == "health.xid"
                             and finding["observed"]["xid"] == 31)
    assert "; before the driver (re)load (NVIDIA 570.158.01) 30.7 min after boot (uptime not in this run), so " \
           "history: the GPU state since then is what counts (ECC and row-remap counters, a new Xid); it follows " \
           "from Xid 79: the GPU had fallen off the bus: later errors on it follow from that; the catalog blames the " \
           "application: check the application first)" in english["message"]
    assert english["fix"].startswith("Check the application first. Debug the application")
    for part in ("归因：应用程序", "早于驱动（重新）加载（NVIDIA 570.158.01）（开机后 30.7 min（本次运行没有 uptime）），属于历史",
                 "它源于 Xid 79：GPU 已从总线上掉线：之后它上面的错误都由此而来", "目录将其归因于应用程序：先检查应用程序"):
        assert part in chinese["message"], part
    assert chinese["fix"].startswith("先检查应用程序。调试应用")


def test_an_xid_outside_the_container_tells_the_operator_in_either_language(make_bundle):
    from helpers import report_for
    from test_container_health import _pod_files

    document = report_for(make_bundle(_pod_files())).to_dict()
    english, chinese = _pair(document, lambda finding: finding["check_id"] == "health.xid")
    assert "the node has a faulty GPU outside this kubernetes container (not allocated to it)" in english["message"]
    assert english["fix"].endswith(" Tell the node's operator: the GPU is not in this container.")
    assert "节点上有一块故障 GPU 不在这个 kubernetes 容器内" in chinese["message"]
    assert chinese["fix"].endswith("请告知节点的运维人员：这块 GPU 不在本容器中。")


def test_an_xid_not_in_the_catalog():
    judged = judge_xid(201)
    assert (judged.name, judged.meaning, judged.reasons) == (
        "Xid 201 (not in the catalog)", "unknown to gpuready's catalog",
        ("Xid 201 is not in gpuready's catalog: look it up in NVIDIA's Xid catalog",))
    assert judged.action.startswith("Look Xid 201 up in NVIDIA's Xid catalog (https://docs.nvidia.com/")
    assert message(judged.action_text.msg_id, "zh", **judged.action_text.values).startswith(
        "在 NVIDIA 的 Xid 目录（https://docs.nvidia.com/")


# ------------------------------------------------------------------------------------------- NVSwitch and NVLink


def test_sxid_and_nvlink_errors_in_chinese():
    document = _document(read_bundle(FIXTURES / "boards"))
    english, chinese = _pair(document, lambda finding: finding["check_id"] == "health.sxid")
    assert english["message"].startswith(
        "NVSwitch errors on NVSwitch 3 (0000:05:00.0): SXid 12028, 2 line(s) (non-fatal) on link(s) 32. Last: ")
    assert chinese["message"].startswith(
        "NVSwitch 3（0000:05:00.0） 出现 NVSwitch 错误：SXid 12028，2 行（non-fatal，非致命），链路 32。最后一条：")
    assert chinese["fix"] == message("sxid.non_fatal_action", "zh")
    english, chinese = _pair(document, lambda finding: finding["check_id"] == "nvlink.errors"
                             and finding["subject"]["gpu"] is None and "0018:01:00.0" in finding["message"])
    assert english["message"].startswith(
        "NVLink errors on the GPU at 0018:01:00.0: Xid 145 NVLINK_RLW_ERROR ×2 on link(s) 13 (non-fatal). Last: ")
    assert chinese["message"].startswith(
        "位于 0018:01:00.0 的 GPU 出现 NVLink 错误：Xid 145 NVLINK_RLW_ERROR ×2，链路 13（non-fatal，非致命）。最后一条：")
    assert chinese["fix"].startswith("non-fatal 的 NVLink 错误无需立即处理")
    assert judge_sxid(20034, "Fatal").action == (
        "Drain the node and reboot it (a fatal SXid needs the NVSwitch and its GPUs reset); check `journalctl -u "
        "nvidia-fabricmanager` and `nvidia-smi -q | grep -A2 Fabric`; if SXids return on the same switch links, run "
        "`dcgmi diag -r 2` and open an RMA for the NVSwitch tray/baseboard.")


def test_an_nvlink_error_known_only_as_a_later_lines_cause():
    document = _document(read_bundle(PUBLIC / "xid"))
    english, chinese = _pair(document, lambda finding: finding["check_id"] == "nvlink.errors"
                             and "GPU4 (" in finding["message"])
    assert english["message"].startswith(
        "NVLink errors on GPU4 (0000:97:00.0): Xid 145 NVLINK_RLW_ERROR named as the cause by 1 later Xid line(s) "
        "(`caused by previous Xid 145`, the GPU's work torn down); the Xid 145 line itself is not in this log; all "
        "before a later driver load or reset of this GPU: history, watch whether it returns. Last: ")
    assert chinese["message"].startswith(
        "GPU4（0000:97:00.0） 出现 NVLink 错误：Xid 145 NVLINK_RLW_ERROR：1 条后续 Xid 日志行指明它是起因"
        "（`caused by previous Xid 145`，该 GPU 上的工作被拆除）；这条 Xid 145 本身不在本日志中；"
        "全部早于之后的一次驱动加载或该 GPU 的重置：属于历史，关注它是否再次出现。最后一条：")


def test_a_pair_with_fewer_nvlinks_in_both_languages():
    document = _document({"nvidia-smi-topo.txt": (FIXTURES / "boards" / "hgx-a100-4gpu-pair-nv3-topo.txt").read_text()})
    found = _ours(document, "nvlink.link_down")
    assert [finding["message"] for finding in found] == [
        "GPU0-GPU1 is NV3, fewer links than the NV4 of the other GPU pairs (models not named). Bandwidth to its peers "
        "drops and NCCL may route around it."] * 2
    assert found[0]["fix"].startswith("Look at `nvidia-smi nvlink -s -i 0` and the error counters in ")
    chinese = [finding for finding in in_language(document, "zh")["findings"]
               if finding["check_id"] == "nvlink.link_down"]
    assert chinese[1]["message"] == ("GPU0-GPU1 是 NV3，链路少于其他 GPU 对（未给出型号） 的 NV4。"
                                     "它到对端的带宽下降，NCCL 可能会绕开它。")
    assert chinese[1]["fix"].startswith("查看 `nvidia-smi nvlink -s -i 1` 以及 `nvidia-smi nvlink -e -i 1` 中的错误计数")


def test_several_link_problems_of_one_gpu_read_as_sentences_in_either_language():
    from gpuready.checks.nvlink import _sentences

    none, fewer = said("nvlink.link_down.switched_none", index=2), \
        said("nvlink.link_down.switched_fewer", index=2, nv=16, expected=18)
    text = said("nvlink.link_down.flagged", problems=_sentences([none, fewer, none]), index=2)
    assert text.english() == (
        "GPU2 has no NVLink to any peer, on an NVSwitch board where the other GPUs reach each other. GPU2 reaches its "
        "peers over NV16, fewer than the NV18 of the other GPUs on this NVSwitch board. Bandwidth to its peers drops "
        "and NCCL may route around it.")
    assert message(text.msg_id, "zh", **text.values) == (
        "GPU2 与任何对端之间都没有 NVLink，而在这块 NVSwitch 板卡上其他 GPU 彼此相通。GPU2 通过 NV16 连到对端，少于这块 "
        "NVSwitch 板卡上其他 GPU 的 NV18。它到对端的带宽下降，NCCL 可能会绕开它。")


# ------------------------------------------------------------------------------- counters: ECC, remap, PCIe, infoROM


@pytest.mark.parametrize("gpu, message_id, chinese", [
    (dict(ecc_uncorrected_volatile=3), "health.ecc_uncorrected.volatile",
     "GPU0 自上次驱动加载以来有 3 个不可纠正的 ECC 错误：计算结果可能出错，上面的作业会崩溃。"),
    (dict(remap_failure=True), "health.row_remap_failure.failed", "GPU0 显存行重映射失败：备用行已用完。"),
    (dict(retired_pages_sbe=70, retired_pages_dbe=0, retired_pages_pending=False), "health.retired_pages.at_limit",
     "GPU0 已 retire 70 个页面，达到 DCGM 的上限 {fail_at}。".format(**load_table("thresholds")["retired_pages"])),
    (dict(pcie_replay_count=120_000), "health.pcie_replay.high",
     "GPU0 开机以来有 120,000 次 PCIe replay（平均 2000.0/min）：链路在重传数据。"),
    (dict(inforom_valid=False), "health.inforom.corrupted",
     "GPU0 的 infoROM 已损坏：ECC 和错误历史既不可信，也无法记录。"),
])
def test_a_counters_finding_in_chinese(gpu, message_id, chinese):
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:01:00.0", name="NVIDIA A100-SXM4-80GB", **gpu)],
                  host=HostFacts(uptime_s=3600.0))
    found = [finding for finding in run_checks(facts) if finding.message_id == message_id]
    assert len(found) == 1
    assert message(message_id, "zh", **found[0].message_values) == chinese
    assert found[0].fix is not None and CJK.search(message(f"{message_id}.fix", "zh", **found[0].message_values))


def test_a_uptime_that_is_not_a_number_leaves_no_odd_number_in_the_values():
    facts = Facts(gpus=[GpuFacts(index=0, bus_id="0000:01:00.0", pcie_replay_count=5)],
                  host=HostFacts(uptime_s=float("nan")))
    found = [finding for finding in run_checks(facts) if finding.check_id == "health.pcie_replay"]
    assert [(finding.status.value, finding.message_id) for finding in found] == [
        ("skip", "health.pcie_replay.odd_uptime")]


# ------------------------------------------------------------------------------------------------- every fixture


def _fixture_inputs():
    for folder in sorted(path for path in FIXTURES.rglob("*") if path.is_dir()):
        yield str(folder.relative_to(FIXTURES)), lambda folder=folder: dict(read_bundle(folder))
    for log in sorted(FIXTURES.rglob("*")):
        if log.is_file() and ("dmesg" in log.name or "kern" in log.name) and log.stat().st_size < 3_000_000:
            yield f"{log.relative_to(FIXTURES)}", lambda log=log: {"dmesg.txt": log.read_text(errors="replace")}


def test_every_health_and_nvlink_finding_of_the_fixtures_has_an_id_and_no_english_sentence_in_chinese():
    judged = 0
    for name, files in _fixture_inputs():
        try:
            document = _document(files())
        except Exception:  # a folder that is not a bundle (fuzz crashers, archives): other tests hold those
            continue
        chinese = _in_chinese(document)
        for index, finding in enumerate(document["findings"]):
            if not finding["check_id"].startswith(CHECKS):
                continue
            judged += 1
            assert finding["message_id"], (name, finding["message"])
            translated = chinese[index]
            for key in ("message", "fix"):
                if finding[key] is None:
                    continue
                assert CJK.search(translated[key]), (name, key, translated[key])
                assert not _english_left(finding[key], translated[key], finding["message_values"] or {}), (
                    name, key, translated[key])
    assert judged > 500


# ----------------------------------------------------------------------------------- Xids NVML reports during a verb


def test_xids_nvml_reports_keep_their_english_and_render_in_chinese():
    note = (" The application here is gpuready's own GEMM loop: if it repeats on this GPU only, treat it as the "
            "GPU's.")
    found = nvml_xid_findings("burn.xid", [(12.0, 0, 79), (3.0, 1, 13)], lambda index: Subject(host="h"), "the burn",
                              application_note=note)
    assert [finding.message for finding in found] == [
        "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS at 12 s into the burn: The GPU has fallen off the PCIe bus: "
        "the driver can no longer talk to it (catalog severity critical).",
        "Xid 13 ROBUST_CHANNEL_GR_EXCEPTION at 3 s into the burn: Graphics/compute engine exception, usually an "
        "illegal memory access or other fault raised by the application's kernel (the catalog blames the "
        "application: check the application first)." + note]
    assert found[1].fix.startswith("Check the application first. Treat as an application bug first")
    during = said("bench.xid.during", run="ddp-8")  # bench's text for its run: a nested part
    catalogued = nvml_xid_findings("bench.xid", [(12.0, 0, 79), (3.0, 1, 13)], lambda index: Subject(host="h"),
                                   during, application_note=said("burn.xid.application"))
    assert catalogued[1].message.endswith(note)
    run = message(during.msg_id, "zh", **during.values)
    assert [message(finding.message_id, "zh", **finding.message_values) for finding in catalogued] == [
        run + " 开始后 12 s 出现 Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS：GPU 已从 PCIe 总线上掉线："
        "驱动无法再与它通信（目录严重级别 critical（严重））。",
        run + " 开始后 3 s 出现 Xid 13 ROBUST_CHANNEL_GR_EXCEPTION：图形/计算引擎异常，通常是应用的 kernel 非法访问"
        "内存或引发了其他错误（目录将其归因于应用程序：先检查应用程序）。" + message("burn.xid.application", "zh")]
