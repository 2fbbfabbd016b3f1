"""Tables that never cut: the GPU inventory, the measurements, and the factory every console table comes from.

rich ellipsizes a `no_wrap` cell that does not fit: here every cell may wrap (at spaces; a word longer than its column
folds), so a bus id, a model name or a figure is always printed whole, at 80 columns and when piped. Piped output has
no box-drawing characters (`plain`): a log or an e-mail shows them as mojibake.
"""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuready.i18n import text_in
from gpuready.report.document import mapping, number, sequence, text
from gpuready.report.labels import LANGUAGE_KEY
from gpuready.report.figures import measurement_cells, shown_measurements
from gpuready.report.paragraph import is_wide, print_paragraph


def table(columns: tuple[str, ...] | list[str], plain: bool, *, numeric: tuple[int, ...] = (), frame: bool = True) -> Table:
    """A table whose cells wrap instead of being cut; boxed on a terminal when `frame`, bare when `plain`."""
    shape = None if plain or not frame else box.SIMPLE_HEAD
    result = Table(box=shape, expand=False, pad_edge=False, show_edge=False)
    for position, column in enumerate(columns):
        result.add_column(bilingual_header(column), overflow="fold", no_wrap=False,
                          justify="right" if position in numeric else "left")
    return result


def bilingual_header(label: str) -> str:
    """`温度 temp` as two lines, Chinese above English: rich measures a wrapped header of double-width characters
    short and crops the table's last column at 80 columns (measured with rich 13); two lines never need wrapping."""
    for position, character in enumerate(label):
        if character == " " and position and is_wide(label[position - 1]):
            return f"{label[:position]}\n{label[position + 1:]}"
    return label


def keep_whole(target: Table, position: int, cells: list[str]) -> None:
    """The column at `position` is never narrower than its longest cell: a bus id or a strategy name never folds."""
    target.columns[position].min_width = max((len(cell) for cell in cells), default=0)


def render_inventory(document: dict, console: Console, labels: dict, plain: bool) -> None:
    """The GPUs of the machine, or of each machine where the files came from several (`facts.machines`)."""
    facts = mapping(document.get("facts"))
    machines = [mapping(machine) for machine in sequence(facts.get("machines"))]
    if len(machines) < 2:
        _render_gpus(facts, console, labels, plain)
        return
    for machine in machines:
        console.print()
        print_paragraph(console, Text(text(machine.get("machine")), style="bold"))
        _render_gpus(machine, console, labels, plain)


def _render_gpus(facts: dict, console: Console, labels: dict, plain: bool) -> None:
    """One row per GPU; a model all the GPUs share is said once above the table (a DGX's `NVIDIA H100 80GB HBM3` in
    each row took two lines per GPU at 80 columns)."""
    gpus = [mapping(gpu) for gpu in sequence(facts.get("gpus"))]
    if not gpus:
        return
    names = [gpu.get("name") for gpu in gpus]
    shared_model = names[0] if isinstance(names[0], str) and names.count(names[0]) == len(gpus) else None
    if shared_model is not None:
        print_paragraph(console, Text(labels["gpu_models"].format(count=len(gpus), model=text(shared_model))))
    columns = [label for position, label in enumerate(labels["inventory"])
               if position != _MODEL_COLUMN or shared_model is None]
    inventory = table(columns, plain, frame=False)
    bus_ids = [text(gpu.get("bus_id")) for gpu in gpus]
    keep_whole(inventory, 1, bus_ids)
    for gpu, bus_id in zip(gpus, bus_ids):
        memory = number(gpu.get("memory_total_bytes"))
        power = number(gpu.get("power_limit_w"))
        temperature = number(gpu.get("temperature_c"))
        cells = [text(gpu.get("index")), bus_id, text(gpu.get("name")),
                 f"{memory / 2**30:,.0f} GiB" if memory else "?", text(gpu.get("compute_capability")),
                 text(gpu.get("pcie")), f"{power:.0f} W" if power else "?",
                 f"{temperature:.0f} °C" if temperature is not None else "?"]
        if shared_model is not None:
            del cells[_MODEL_COLUMN]
        inventory.add_row(*(Text(cell) for cell in cells))
    console.print(inventory)


_MODEL_COLUMN = 2


def render_measurements(document: dict, console: Console, labels: dict, plain: bool, verbose: bool) -> None:
    # figures.py builds the cells the Markdown summary shows too; it imports format_value from here
    shown = shown_measurements(document, verbose)
    if not shown:
        return
    console.print()
    figures = table(labels["measurement_columns"], plain, numeric=(2, 3, 4))
    for measurement in shown:
        figures.add_row(*(Text(cell) for cell in measurement_cells(measurement, labels)))
    console.print(figures)
    logits = {mapping(measurement.get("method")).get("logits") for measurement in shown} & {"fp32", "bf16"}
    if len(logits) == 1:  # the loss convention the figures assume (bench --logits)
        console.print(Text(text_in(labels[LANGUAGE_KEY], f"plan.logits.{logits.pop()}", {}) or "", style="dim"))


