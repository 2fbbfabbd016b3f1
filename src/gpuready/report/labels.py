"""Every word the console prints around the document's own text, in English and Chinese, in one place.

Readers of Chinese first (`--lang zh`): a Chinese label is followed by the English one, so a pasted console still
matches the English documentation. Ids, units, commands and the findings' messages stay in the field's English (a full
message catalogue replaces this table later: keep every label here, never inline in a view).
"""

from __future__ import annotations

LABELS: dict[str, dict[str, str]] = {
    "en": {
        # verdicts and scopes
        "ready": "READY", "ready_with_warnings": "READY WITH WARNINGS", "not_ready": "NOT READY",
        "unknown": "UNKNOWN (not enough evidence)", "judged_for": "verdict judged for",
        "single_node": "single node", "multi_node": "multi node",
        "verdict_missing": "UNKNOWN (not in this report)",
        "verdict_unrecognised": "UNKNOWN ({value!r} is not a verdict this version knows)",
        "missing": "not in this report", "unrecognised": "{value!r} (not known to this version)",
        "unknown_host": "unknown host",
        # statuses
        "pass": "pass", "warn": "warn", "fail": "fail", "skip": "skip", "error": "error",
        "status_missing": "no status",
        "status_unrecognised": "{n} finding(s) with no status or one this version does not know",
        "summary": "{fail} fail, {warn} warn, {pass_} pass, {skip} skip",
        # findings
        "fix": "fix", "consequence_of": "consequence of", "bus_ids": "bus ids", "gpu_count": "{n} GPUs",
        "evidence_more": "… {n} more quoted line(s) in the JSON report",
        "passed_line": "{category}: {n} passed",
        "skipped_line": "{n} check(s) skipped for lack of facts; --verbose lists them.",
        # verbs that judge no machine
        "plan_title": "plan (an estimate, not a verdict on a machine)",
        "cpu_run_title": "CPU-only run (gloo): a test of the software stack, not a verdict on a machine's GPUs",
        # measurements and inventory
        "inventory": ("GPU", "bus id", "model", "memory", "CC", "PCIe (cur/max)", "power limit", "temp"),
        "measurement_columns": ("measurement", "subject", "value", "expected", "of expected"),
        # plan
        "plan_model": "model: {name} ({parameters} parameters)", "plan_machine": "machine: {machine}",
        "strategies_title": "strategies (best first), memory per GPU",
        "strategy_columns": ("strategy", "fits", "GiB per GPU", "step s", "bottleneck"), "why": "why",
        "more_strategies": "{n} more strategies; --verbose or --json lists them.",
        "chosen": "chosen: {name}, {gib} GiB per GPU", "chosen_step": ", about {step:.3f} s per step ({bottleneck}-bound)",
        "more_reasons": "{n} more reason(s): --verbose",
        "inference_title": "inference, per tensor-parallel degree (memory per GPU)",
        "inference_columns": ("TP", "fits", "GiB per GPU", "weights GiB", "KV cache GiB", "notes"),
        "yes": "yes", "no": "no",
        "batch_title": "batch and learning rate",
        "batch_line": ("global batch {known_batch} on {known_gpus} GPU(s) → {new_batch} on {new_gpus} GPU(s) "
                       "(×{factor:g}; micro-batch {micro} × {steps} accumulation step(s)); learning rate {known_lr:g} → "
                       "{new_lr:.6g} ({rule} rule, {optimizer})"),
        "power_title": "power and cooling",
        "energy_line": "energy ≈ {kwh:,.0f} kWh a month ≈ ${cost:,.0f} at ${price:g}/kWh ({origin})",
        "cost_title": "cost",
        "yes_no_unknown": "?",
    },
    "zh": {
        "ready": "就绪 READY", "ready_with_warnings": "就绪但有警告 READY WITH WARNINGS",
        "not_ready": "未就绪 NOT READY", "unknown": "无法判断 UNKNOWN (not enough evidence)",
        "judged_for": "结论依据 verdict judged for", "single_node": "单机 single node", "multi_node": "多机 multi node",
        "verdict_missing": "无法判断 UNKNOWN (not in this report)",
        "verdict_unrecognised": "无法判断 UNKNOWN ({value!r} is not a verdict this version knows)",
        "missing": "未记录 not in this report", "unrecognised": "无法识别 {value!r} (not known to this version)",
        "unknown_host": "未知主机 unknown host",
        "pass": "通过 pass", "warn": "警告 warn", "fail": "失败 fail", "skip": "跳过 skip", "error": "错误 error",
        "status_missing": "无状态 no status",
        "status_unrecognised": "状态未知 {n} finding(s) with no status or one this version does not know",
        "summary": "失败 {fail}，警告 {warn}，通过 {pass_}，跳过 {skip}",
        "fix": "修复 fix", "consequence_of": "后果于 consequence of", "bus_ids": "总线号 bus ids",
        "gpu_count": "{n} 块 GPU", "evidence_more": "… 另有 {n} 行引文见 JSON 报告",
        "passed_line": "{category}：{n} 项通过",
        "skipped_line": "{n} 项检查因缺少信息而跳过；--verbose 列出它们。",
        "plan_title": "规划 plan（估算，不是对某台机器的结论）",
        "cpu_run_title": "仅 CPU 运行 (gloo)：测试软件栈，不是对机器 GPU 的结论",
        "inventory": ("GPU", "总线号 bus id", "型号 model", "显存 memory", "CC", "PCIe (当前/最大)", "功率上限 power limit",
                      "温度 temp"),
        "measurement_columns": ("测量 measurement", "对象 subject", "数值 value", "预期 expected", "占预期 of expected"),
        "plan_model": "模型 model：{name}（{parameters} 参数）", "plan_machine": "机器 machine：{machine}",
        "strategies_title": "并行策略（最佳在前），每 GPU 显存",
        "strategy_columns": ("策略 strategy", "放得下 fits", "每 GPU GiB", "每步 s", "瓶颈 bottleneck"), "why": "原因 why",
        "more_strategies": "另有 {n} 个策略；--verbose 或 --json 列出它们。",
        "chosen": "选用 chosen：{name}，每 GPU {gib} GiB",
        "chosen_step": "，每步约 {step:.3f} s（{bottleneck}-bound）",
        "more_reasons": "另有 {n} 条原因：--verbose",
        "inference_title": "推理，按张量并行度（每 GPU 显存）",
        "inference_columns": ("TP", "放得下 fits", "每 GPU GiB", "权重 GiB", "KV 缓存 GiB", "说明 notes"),
        "yes": "是 yes", "no": "否 no",
        "batch_title": "批大小与学习率 batch and learning rate",
        "batch_line": ("全局批 {known_batch}（{known_gpus} 块 GPU）→ {new_batch}（{new_gpus} 块 GPU）"
                       "（×{factor:g}；微批 {micro} × 累积 {steps} 步）；学习率 {known_lr:g} → {new_lr:.6g}"
                       "（{rule} 规则，{optimizer}）"),
        "power_title": "电源与散热 power and cooling",
        "energy_line": "电量 ≈ 每月 {kwh:,.0f} kWh ≈ ${cost:,.0f}，电价 ${price:g}/kWh（{origin}）",
        "cost_title": "成本 cost",
        "yes_no_unknown": "?",
    },
}


def labels_for(lang: str) -> dict:
    """The labels of `lang`, English for a language this table does not have."""
    return LABELS.get(lang, LABELS["en"])
