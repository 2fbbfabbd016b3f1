"""The package's layout as a graph, read from the source: rooms (a top-level module, a package, or one verb), the
arrows between them (every import, a function-local one too), their layers, and what breaks the rules of
docs/architecture.md. Used by tests/test_layout.py and printed by benchmarks/layout.py.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("gpuready", "i18n", "safe_text", "options", "signals", "busbw", "shapes", "node"),
    ("knowledge",),
    ("facts",),
    ("model",),
    ("evidence",),
    ("checks",),
    ("pipeline", "estimate", "telemetry", "progress"),
    ("devices",),
    ("runner",),
    ("workloads", "report"),
    ("cli",),
    ("measuring",),
    ("verbs",),
    ("__main__",),
)
"""Low to high: a room may import its own layer's rooms and the layers below, never one above. `verbs` stands for
every verb (`verbs/check`, `verbs/plan` …), which never import each other."""

NEVER: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("facts", ("model", "evidence", "checks", "pipeline", "verbs", "workloads", "runner", "report", "cli"),
     "facts/ reads and parses; it never judges nor knows who reads it"),
    ("knowledge", ("facts", "model", "evidence", "checks", "verbs", "report", "cli"), "knowledge/ is data"),
    ("model", ("evidence", "checks", "verbs", "report", "cli"), "the model is the vocabulary every stage shares"),
    ("evidence", ("checks", "pipeline", "verbs", "report", "cli"), "evidence/ reads what is there; it never judges"),
    ("checks", ("evidence", "pipeline", "verbs", "report", "cli", "runner", "workloads", "devices"),
     "a check is a pure function of facts, knowledge and the model"),
    ("workloads", ("verbs", "checks", "report", "cli", "pipeline", "evidence", "measuring"),
     "workloads run inside ranks and know no verb"),
    ("runner", ("verbs", "report", "workloads", "cli", "measuring"), "the runner starts ranks by name"),
    ("report", ("workloads", "runner", "verbs", "measuring", "cli"), "a renderer reads a report document alone"),
    ("cli", ("runner", "workloads", "checks", "measuring"), "the dispatcher finds a verb by name and hands over"),
    ("telemetry", ("verbs", "report", "cli", "runner", "workloads"), "the sampler knows no verb"),
    ("pipeline", ("verbs", "report", "cli", "runner", "workloads", "measuring"), "evidence → facts → checks only"),
    ("devices", ("verbs", "report", "cli", "runner", "workloads", "measuring"), "GPU selection knows no verb"),
    ("estimate", ("verbs", "report", "cli", "runner", "workloads", "measuring", "pipeline"),
     "expected figures are computed from facts and knowledge"),
    ("measuring", ("verbs",), "the measuring-run template knows no verb: each verb fills it in"),
)
"""(room, rooms it never imports, why): the rules the layers imply and a few more."""

HEAVY_LOCAL_IMPORTS = ("torch", "bokeh", "playwright", "kubernetes", "jsonschema", "prometheus_client", "pynvml", "babel",
                       "yaml", "re2", "rich", "psutil", "gpuready.workloads", "gpuready.report.charts",
                       "gpuready.report.html")
"""What a function may import late (with a comment saying why): heavy or optional packages, and modules that import
torch or the chart library when loaded. Anything else is imported at the top of its module."""

MAX_FUNCTION_LINES = 80


@dataclass(frozen=True)
class Import:
    where: str
    """`gpuready/checks/pcie.py:10`."""
    module: str
    """The module imported, or imported from; relative imports resolved."""
    names: tuple[str, ...] = ()
    """What a `from … import` takes; () for a plain `import`."""
    local: bool = False
    """Inside a function (or a class body): run when called, not when the module is loaded."""

    def targets(self) -> list[str]:
        """What is imported, dotted: `from gpuready import knowledge` → gpuready.knowledge, `from gpuready.model
        import Finding` → gpuready.model.Finding (a submodule or a name in the module: either is within it)."""
        return [f"{self.module}.{name}" for name in self.names] if self.names else [self.module]


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, where: str, is_package: bool = False) -> list[Import]:
    """Every import in the module's source, at any depth (functions, classes, `if` blocks)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            at = f"{where}:{getattr(child, 'lineno', 0)}"
            if isinstance(child, ast.Import):
                found.extend(Import(at, alias.name, (), local) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = ".".join(package[:len(package) - child.level + 1] if child.level else [])
                target = ".".join(part for part in (base, child.module or "") if part)
                found.append(Import(at, target, tuple(alias.name for alias in child.names), local))
            visit(child, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(source), False)
    return found


def source_files(src: Path = SRC) -> list[Path]:
    return sorted((src / "gpuready").rglob("*.py"))


def all_module_imports(src: Path = SRC) -> dict[str, list[Import]]:
    """Module → its imports."""
    return {module_name(path, src): imports_of(path.read_text(encoding="utf-8"), module_name(path, src),
                                               str(path.relative_to(src)), path.name == "__init__.py")
            for path in source_files(src)}


def room_of(module: str) -> str | None:
    """`gpuready.verbs.plan.cli` → `verbs/plan`, `gpuready.facts.nvml` → `facts`; None outside gpuready."""
    parts = module.split(".")
    if parts[0] != "gpuready":
        return None
    if len(parts) == 1:
        return "gpuready"
    if parts[1] == "verbs" and len(parts) > 2:
        return f"verbs/{parts[2]}"
    return parts[1]


def level_of(room: str) -> int:
    name = "verbs" if room.startswith("verbs/") else room
    for level, rooms in enumerate(LAYERS):
        if name in rooms:
            return level
    raise KeyError(f"room {room!r} has no layer in LAYERS")


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def existing_module(target: str, modules: set[str]) -> str | None:
    """The module a dotted target names: itself, or its parent when the last part is a name in it."""
    if target in modules:
        return target
    parent = target.rpartition(".")[0]
    return parent if parent in modules else None


@dataclass
class Layout:
    rooms: set[str]
    arrows: dict[tuple[str, str], list[str]]
    """(from room, to room) → where: `file:line`."""
    module_arrows: dict[str, set[str]]
    """Module → the gpuready modules it imports (for circles between files)."""
    local_imports: list[tuple[Import, str]]
    """Function-local imports, with the target, that HEAVY_LOCAL_IMPORTS do not excuse."""


def read_layout(src: Path = SRC) -> Layout:
    imports = all_module_imports(src)
    modules = set(imports)
    rooms = {room for module in modules if (room := room_of(module))}
    arrows: dict[tuple[str, str], list[str]] = defaultdict(list)
    module_arrows: dict[str, set[str]] = defaultdict(set)
    local_imports = []
    for module, found in imports.items():
        for statement in found:
            for target in statement.targets():
                if statement.local and not is_stdlib(target) and not within(target, HEAVY_LOCAL_IMPORTS):
                    local_imports.append((statement, target))
                if (named := existing_module(target, modules)) is None:
                    continue
                if named != module and not module.startswith(named + "."):  # a package's own __init__ is no arrow
                    module_arrows[module].add(named)
                start, end = room_of(module), room_of(named)
                if end is not None and start != end and end != "gpuready":
                    arrows[(start, end)].append(statement.where)
    return Layout(rooms, dict(arrows), dict(module_arrows), local_imports)


def arrows_back_up(layout: Layout) -> list[str]:
    return [f"{start} → {end} ({where[0]})" for (start, end), where in sorted(layout.arrows.items())
            if level_of(end) > level_of(start)]


def nevers_broken(layout: Layout) -> list[str]:
    broken = []
    for (start, end), where in sorted(layout.arrows.items()):
        if start.startswith("verbs/") and end.startswith("verbs/"):
            broken.append(f"{start} → {end} ({where[0]}): a verb never imports another verb")
        for room, forbidden, why in NEVER:
            end_name = "verbs" if end.startswith("verbs/") else end
            if start == room and end_name in forbidden:
                broken.append(f"{start} → {end} ({where[0]}): {why}")
    return broken


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def room_circles(layout: Layout) -> list[list[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for start, end in layout.arrows:
        edges[start].add(end)
    return circles(edges)


def long_functions(src: Path = SRC, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`file:line name (N lines)` for every function longer than `limit` lines, decorators and docstring included."""
    found = []
    for path in source_files(src):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
                lines = node.end_lineno - first + 1
                if lines > limit:
                    found.append(f"{path.relative_to(src)}:{node.lineno} {node.name} ({lines} lines)")
    return found
