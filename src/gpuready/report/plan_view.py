"""`plan`'s own parts of the document on the console: what it planned for, memory per GPU per strategy (or per
tensor-parallel degree for inference), the chosen strategy and why in at most three lines, batch and learning rate,
power and cooling, cost. `verbose` adds every strategy and all of its reasons; the JSON keeps the sources."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from gpuready.i18n import said_from, text_in
from gpuready.report.document import mapping, number, sequence, text
from gpuready.report.labels import LANGUAGE_KEY
from gpuready.report.paragraph import print_paragraph
from gpuready.safe_text import printable
from gpuready.report.tables import keep_whole, table

STRATEGIES_SHOWN = 8
"""plan: the best-ranked strategies shown on the console (--verbose: all; the JSON has all)."""
WHY_LINES = 2
"""The chosen strategy's reasons fill at most this many lines under its own line (three lines in all)."""
GIB = 2**30


def render_plan(document: dict, console: Console, labels: dict, plain: bool, verbose: bool) -> None:
    """plan's sections after the findings (`render_plan_subject` comes before them)."""
    _render_strategies(document, console, labels, plain, verbose)
    _render_inference(document, console, labels, plain)
    _render_batch(document, console, labels)
    _render_power(document, console, labels)
    cost = mapping(document.get("cost"))
    if cost.get("message"):
        _title(console, labels["cost_title"])
        print_paragraph(console, Text(_said(cost, labels)))


def render_plan_subject(document: dict, console: Console, labels: dict) -> None:
    """What was planned for: the model and the machine (nothing where the document is not a plan)."""
    plan = mapping(mapping(document.get("facts")).get("plan"))
    model, machine = mapping(plan.get("model")), mapping(plan.get("machine"))
    if model:
        parameters = number(model.get("parameters"))
        print_paragraph(console, Text(labels["plan_model"].format(
            name=text(model.get("name")), parameters=f"{parameters / 1e9:,.1f} B" if parameters else "?")))
    if machine:
        memory = number(machine.get("memory_bytes_per_gpu"))
        nodes = number(machine.get("nodes"))
        described = (f"{text(machine.get('gpus_per_node'))}× {text(machine.get('gpu_name'))}"
                     + (labels["plan_nodes"].format(nodes=nodes) if nodes and nodes > 1 else "")
                     + (labels["plan_memory"].format(gib=memory / GIB) if memory else "")
                     + labels["plan_source"].format(source=_source(text(machine.get("source")), labels)))
        print_paragraph(console, Text(labels["plan_machine"].format(machine=described)))


def _render_strategies(document: dict, console: Console, labels: dict, plain: bool, verbose: bool) -> None:
    rows = [mapping(item) for item in sequence(document.get("strategies"))]
    if not rows:
        return
    _title(console, labels["strategies_title"])
    strategies = table(labels["strategy_columns"], plain, numeric=(2, 3))
    shown = rows if verbose else rows[:STRATEGIES_SHOWN]
    keep_whole(strategies, 0, [text(row.get("name")) for row in shown])
    for row in shown:
        name, fits, gib, step, bottleneck = strategy_cells(row, labels)
        strategies.add_row(Text(name), Text(fits, style=_fits_style(row.get("fits"))), Text(gib),
                           Text(step), Text(bottleneck))
    console.print(strategies)
    if verbose:  # each strategy's reasons as a paragraph: in a table column they ran to 175 narrow lines
        _title(console, labels["why"])
        for row in shown:
            reasons = labels["list_separator"].join(_reasons(row, labels))
            print_paragraph(console, Text(f"{text(row.get('name'))}: {reasons}"))
    if not verbose and len(rows) > STRATEGIES_SHOWN:
        print_paragraph(console, Text(labels["more_strategies"].format(n=len(rows) - STRATEGIES_SHOWN), style="dim"))
    logits = text(mapping(mapping(document.get("facts")).get("plan")).get("logits"))
    said_logits = text_in(_lang(labels), f"plan.logits.{logits}", {}) if logits in ("fp32", "bf16") else None
    if said_logits:  # the convention the memory figures assume
        print_paragraph(console, Text(said_logits, style="dim"))
    chosen = chosen_strategy(document)
    if chosen is not None:
        _render_chosen(chosen, console, labels, verbose)


def strategy_cells(row: dict, labels: dict) -> tuple[str, str, str, str, str]:
    """A strategy's row as the console and the Markdown summary show it: name, fits, GiB per GPU, step (s),
    bottleneck."""
    step = number(row.get("step_time_s"))
    return (text(row.get("name")), _fits(row.get("fits"), labels), _gib(_total_bytes(row)),
            f"{step:.3f}" if step is not None else "-", _bottleneck(row.get("bottleneck"), labels))


def inference_cells(row: dict, labels: dict) -> tuple[str, str, str, str, str, str]:
    """An inference degree's row: TP, fits, total, weights and KV cache GiB per GPU, notes."""
    return (text(row.get("tp")), _fits(row.get("fits"), labels), _gib(number(row.get("total_bytes"))),
            _gib(number(row.get("weights_bytes"))), _gib(number(row.get("kv_cache_bytes"))),
            labels["list_separator"].join(_texts(row, "notes", labels)))


def chosen_strategy(document: dict) -> dict | None:
    """The first strategy that fits: the one plan recommends."""
    return next((row for row in map(mapping, sequence(document.get("strategies"))) if row.get("fits") is True), None)


def chosen_line(row: dict, labels: dict) -> str:
    """`Use fsdp: 30.0 GiB per GPU; a step takes … (compute-bound)` in the labels' language."""
    line = labels["chosen"].format(name=text(row.get("name")), gib=_gib(_total_bytes(row)))
    step = number(row.get("step_time_s"))
    if step is not None:
        bottleneck = text(row.get("bottleneck"))
        bound = text_in(_lang(labels), f"plan.bound.{bottleneck.replace(' ', '_')}", {}) \
            or text_in(_lang(labels), "plan.bound", {"bottleneck": bottleneck})
        line += labels["chosen_step_bound"].format(step=step, bound=bound)
    return line


def _render_chosen(row: dict, console: Console, labels: dict, verbose: bool) -> None:
    """One line for the strategy, at most `WHY_LINES` for its reasons (all of them under --verbose)."""
    print_paragraph(console, Text(chosen_line(row, labels), style="bold"))
    reasons = _reasons(row, labels)
    if not reasons:
        return
    prefix = f"{labels['why']}: "
    budget = WHY_LINES * console.width - len(prefix) - len(labels["more_reasons"]) - 8  # words wrap early
    shown = reasons if verbose else reasons[:1]
    separator = labels["list_separator"]
    for reason in reasons[len(shown):] if not verbose else []:
        if len(separator.join(shown + [reason])) > budget:
            break
        shown.append(reason)
    why = Text(prefix + separator.join(shown))
    if len(shown) < len(reasons):
        why.append(" (" + labels["more_reasons"].format(n=len(reasons) - len(shown)) + ")", style="dim")
    print_paragraph(console, why)


def _render_inference(document: dict, console: Console, labels: dict, plain: bool) -> None:
    rows = [mapping(item) for item in sequence(document.get("inference"))]
    if not rows:
        return
    _title(console, labels["inference_title"])
    degrees = table(labels["inference_columns"], plain, numeric=(0, 2, 3, 4))
    for row in rows:
        tp, fits, *others = inference_cells(row, labels)
        degrees.add_row(Text(tp), Text(fits, style=_fits_style(row.get("fits"))), *map(Text, others))
    console.print(degrees)


def _render_batch(document: dict, console: Console, labels: dict) -> None:
    batch = mapping(document.get("batch"))
    if not batch:
        if sequence(document.get("strategies")):  # a training plan: say how to get the batch/LR advice
            _title(console, text_in(_lang(labels), "plan.batch.hint", {}) or "")
        return
    known = mapping(batch.get("known"))
    _title(console, labels["batch_title"])
    print_paragraph(console, Text(_format(labels["batch_line"], known_batch=known.get("global_batch"), known_gpus=known.get("gpus"),
                               new_batch=batch.get("new_global_batch"), new_gpus=batch.get("new_gpus"),
                               factor=batch.get("batch_factor"), micro=batch.get("micro_batch"),
                               steps=batch.get("accumulation_steps"), known_lr=known.get("lr"),
                               new_lr=batch.get("new_lr"), rule=batch.get("rule"), optimizer=batch.get("optimizer"))))
    texts = mapping(batch.get("texts"))
    for key in ("verify_message", "notes", "warmup"):
        shown = sequence(batch.get(key)) if key == "notes" else [batch.get(key)]
        said = sequence(texts.get(key)) if key == "notes" else [texts.get(key)]
        for index, note in enumerate(shown):
            if note:
                print_paragraph(console, Text(_in_language(note, said[index] if index < len(said) else None, labels)))


def _render_power(document: dict, console: Console, labels: dict) -> None:
    power = mapping(document.get("power"))
    if not power:
        return
    _title(console, labels["power_title"])
    if power.get("kwh_per_month") is not None:
        origin = _in_language(power.get("price_per_kwh_origin"), power.get("price_per_kwh_origin_text"), labels)
        print_paragraph(console, Text(_format(labels["energy_line"], kwh=power.get("kwh_per_month"),
                                   cost=power.get("cost_per_month"), price=power.get("price_per_kwh"),
                                   origin=origin)))
    # Full load, PSU and cooling are plan's power findings: a warning or failure is among the problems above
    for entry in map(mapping, sequence(power.get("findings"))):
        if entry.get("status") == "pass" and entry.get("message"):
            print_paragraph(console, Text(_said(entry, labels)))


def _lang(labels: dict) -> str:
    return labels[LANGUAGE_KEY]


def _in_language(english: Any, said: Any, labels: dict) -> str:
    """A text of plan's document in the labels' language: its catalogue form (`{message_id, message_values}`) where
    the document keeps one and the catalogue can say it, else the English it holds."""
    said = said_from(said)
    rendered = text_in(_lang(labels), said.msg_id, said.values) if said is not None else None
    return rendered if rendered is not None else text(english)


def _said(entry: dict, labels: dict) -> str:
    """A power finding's or the cost's `message` in the labels' language (its `message_id`, `message_values`)."""
    return _in_language(entry.get("message"), {"message_id": entry.get("message_id"),
                                               "message_values": entry.get("message_values")}, labels)


def _reasons(row: dict, labels: dict) -> list[str]:
    """A strategy's reasons in the labels' language (`reasons_text` beside the English `reasons`)."""
    return _texts(row, "reasons", labels)


def _texts(row: dict, key: str, labels: dict) -> list[str]:
    """`row[key]`, a list of English texts, in the labels' language (`<key>_text` holds their catalogue forms)."""
    said = sequence(row.get(f"{key}_text"))
    return [printable(_in_language(item, said[index] if index < len(said) else None, labels))
            for index, item in enumerate(sequence(row.get(key)))]


def _bottleneck(value: Any, labels: dict) -> str:
    """The table's bottleneck cell in words (`label.bottleneck.*`), or as the document has it."""
    word = text(value, "-")
    return labels.get(f"bottleneck.{word.replace(' ', '_')}", word)


def _source(source: str, labels: dict) -> str:
    """Where plan's machine came from (`description TEXT`, `bundle PATH`, `live`), in words."""
    kind, _, rest = source.partition(" ")
    label = labels.get(f"plan_source.{kind}")
    return label.format(rest=rest) if label and (rest or kind == "live") else source


def _format(template: str, **values: Any) -> str:
    """`template` with the document's values (text escaped); where a value is missing or of another type, the values
    listed as `name=value` instead of a traceback."""
    safe = {name: printable(value) if isinstance(value, str) else value for name, value in values.items()}
    try:
        return template.format(**safe)
    except (ValueError, TypeError):
        return ", ".join(f"{name}={text(value)}" for name, value in values.items())


def _title(console: Console, title: str) -> None:
    console.print()  # piped, where nothing is bold, a blank line tells the sections apart
    print_paragraph(console, Text(title, style="bold"))


def _fits_style(value: Any) -> str:
    return ("green" if value else "red") if isinstance(value, bool) else ""


def _fits(value: Any, labels: dict) -> str:
    if value is None or not isinstance(value, bool):
        return labels["yes_no_unknown"]
    return labels["yes"] if value else labels["no"]


def _total_bytes(row: dict) -> float | int | None:
    return number(mapping(row.get("memory_bytes")).get("total"))


def _gib(value: float | int | None) -> str:
    return f"{value / GIB:,.1f}" if value is not None else "?"
