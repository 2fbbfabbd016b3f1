"""The pipeline's layout rules (DESIGN.md §1, §4), read from the source: which folder may import what.

facts/ reads and never judges, checks/ judges facts alone, workloads/ run inside ranks and know no verb. Every import
counts, a function-local one too: it is the same dependency, only later.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpuready.checks.registry import CHECKS, registered_in_order

SRC = Path(__file__).resolve().parents[1] / "src"

CHECKS_MAY_IMPORT = ("gpuready.checks", "gpuready.facts.types", "gpuready.facts.log_facts", "gpuready.facts.units",
                     "gpuready.knowledge", "gpuready.model", "gpuready.i18n")
"""Besides the standard library: a check is a pure function of the facts (the machine's, facts.types, and the log
readers', facts.log_facts), the knowledge tables and the model; its sentences come from the message catalogue (i18n,
a leaf: it imports nothing of gpuready)."""
FACTS_MUST_NOT_IMPORT = ("gpuready.checks", "gpuready.verbs", "gpuready.workloads", "gpuready.runner",
                         "gpuready.model")
"""The model is the judges' vocabulary (Finding, Report, Status): facts/ builds none of it."""
WORKLOADS_MUST_NOT_IMPORT = ("gpuready.verbs", "gpuready.checks")


@dataclass(frozen=True)
class Import:
    where: str
    """`src/gpuready/checks/pcie.py:10`."""
    module: str
    """The module imported, or imported from; relative imports resolved."""
    names: tuple[str, ...] = ()
    """What a `from … import` takes; () for a plain `import`."""

    def targets(self) -> list[str]:
        """What is imported, dotted: `from gpuready import knowledge` → gpuready.knowledge, `from gpuready.model
        import Finding` → gpuready.model.Finding (a submodule or a name in the module: either is within it)."""
        return [f"{self.module}.{name}" for name in self.names] if self.names else [self.module]


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, where: str, is_package: bool = False) -> list[Import]:
    """Every import in the module's source, at any depth (functions, classes, `if` blocks)."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        at = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [Import(at, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] if node.level else [])
            target = ".".join(part for part in (base, node.module or "") if part)
            found.append(Import(at, target, tuple(alias.name for alias in node.names)))
    return found


def all_imports(src: Path = SRC) -> dict[str, list[Import]]:
    """Folder under gpuready (`checks`, `facts` …, `` for top-level modules) → the imports of its modules."""
    by_folder: dict[str, list[Import]] = {}
    for path in sorted((src / "gpuready").rglob("*.py")):
        relative = path.relative_to(src / "gpuready")
        folder = relative.parts[0] if len(relative.parts) > 1 else ""
        where = str(path.relative_to(src.parent))
        by_folder.setdefault(folder, []).extend(
            imports_of(path.read_text(encoding="utf-8"), module_name(path, src), where, path.name == "__init__.py"))
    return by_folder


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def is_stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


def offences(imports: list[Import], breaks: Callable[[str], bool], rule: str) -> list[str]:
    """`file:line imports …: rule` per import statement that takes something the rule forbids."""
    found = []
    for statement in imports:
        if bad := [target for target in statement.targets() if breaks(target)]:
            found.append(f"{statement.where} imports {', '.join(bad)}: {rule}")
    return found


def checks_offences(imports: list[Import]) -> list[str]:
    return offences(imports, lambda target: not is_stdlib(target) and not within(target, CHECKS_MAY_IMPORT),
                    f"checks/ may import only the standard library and {', '.join(CHECKS_MAY_IMPORT)}")


def facts_offences(imports: list[Import]) -> list[str]:
    return offences(imports, lambda target: within(target, FACTS_MUST_NOT_IMPORT),
                    f"facts/ reads and parses, it never imports {', '.join(FACTS_MUST_NOT_IMPORT)}")


def workloads_offences(imports: list[Import]) -> list[str]:
    return offences(imports, lambda target: within(target, WORKLOADS_MUST_NOT_IMPORT),
                    f"workloads/ run inside ranks and never import {', '.join(WORKLOADS_MUST_NOT_IMPORT)}")


def test_checks_import_only_facts_types_units_knowledge_model():
    offences = checks_offences(all_imports()["checks"])
    assert not offences, "\n".join(offences)


def test_facts_never_import_judges_verbs_workloads_or_runner():
    offences = facts_offences(all_imports()["facts"])
    assert not offences, "\n".join(offences)


def test_workloads_never_import_verbs_or_checks():
    offences = workloads_offences(all_imports()["workloads"])
    assert not offences, "\n".join(offences)


def test_the_reader_sees_local_relative_and_package_imports():
    source = ("import re\n"
              "from gpuready import knowledge, model\n"
              "def judge():\n"
              "    from ..facts import lspci, types\n"
              "    from .registry import check\n")
    found = imports_of(source, "gpuready.checks.pcie", "pcie.py")
    assert [(i.where, target) for i in found for target in i.targets()] == [
        ("pcie.py:1", "re"), ("pcie.py:2", "gpuready.knowledge"), ("pcie.py:2", "gpuready.model"),
        ("pcie.py:4", "gpuready.facts.lspci"), ("pcie.py:4", "gpuready.facts.types"),
        ("pcie.py:5", "gpuready.checks.registry.check")]
    assert checks_offences(found) == ["pcie.py:4 imports gpuready.facts.lspci: checks/ may import only the standard "
                                      f"library and {', '.join(CHECKS_MAY_IMPORT)}"]
    in_package = imports_of("from .types import Facts\n", "gpuready.facts", "facts/__init__.py", is_package=True)
    assert in_package[0].module == "gpuready.facts.types"


def test_facts_build_no_finding_however_the_model_is_imported():
    for source in ("def refuse():\n    from gpuready.model import Report\n", "import gpuready.model\n",
                   "from gpuready import model\n", "from ..model import Finding\n"):
        assert facts_offences(imports_of(source, "gpuready.facts.gpu_users", "gpu_users.py")), source


# --------------------------------------------------------------------------------- one rule, one place (issue 30)

CHECK_IDS_OUTSIDE_CHECKS: dict[tuple[str, str], str] = {}
"""The places outside checks/ that still write a registry check id, each with why: what is left to move. The list may
only shrink: a new place fails the test below, and one moved away must be taken off the list."""


def check_id_literals(src: Path = SRC) -> dict[str, set[str]]:
    """Registry check id → the modules (`gpuready/checks/host.py`) where it is a string constant."""
    registered_in_order()  # imports every module of checks/: each registers its checks
    found: dict[str, set[str]] = {check_id: set() for check_id in CHECKS}
    for path in sorted((src / "gpuready").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in found:
                found[node.value].add(str(path.relative_to(src)))
    return found


def test_every_check_id_is_a_literal_in_exactly_one_module_under_checks():
    """A rule lives in one place (issue 30): each registry check id is written as a string in one module, under
    checks/, and every other module that names it imports it from there."""
    offences = []
    for check_id, modules in sorted(check_id_literals().items()):
        in_checks = sorted(module for module in modules if module.startswith("gpuready/checks/"))
        outside = sorted(module for module in modules if not module.startswith("gpuready/checks/")
                         and (check_id, module) not in CHECK_IDS_OUTSIDE_CHECKS)
        if len(in_checks) != 1:
            offences.append(f"{check_id}: written in {len(in_checks)} modules of checks/ ({', '.join(in_checks)})")
        offences += [f"{check_id}: written in {module}, outside checks/" for module in outside]
    assert not offences, "\n".join(offences)
    found = check_id_literals()
    moved = {key for key in CHECK_IDS_OUTSIDE_CHECKS if key[1] not in found[key[0]]}
    assert not moved, f"no longer there, take them off CHECK_IDS_OUTSIDE_CHECKS: {sorted(moved)}"


def test_the_id_rule_sees_an_id_written_twice(tmp_path):
    """The test above on a made-up tree: an id of the registry written in two checks modules and in a verb is found."""
    for module, text in (("checks/a.py", 'ID = "gpu.present"\n'), ("checks/b.py", 'x = {"gpu.present": 1}\n'),
                         ("verbs/v.py", 'def f():\n    return "gpu.present"\n'), ("verbs/w.py", '"gpu.present.fix"\n')):
        path = tmp_path / "gpuready" / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert check_id_literals(tmp_path)["gpu.present"] == {"gpuready/checks/a.py", "gpuready/checks/b.py",
                                                          "gpuready/verbs/v.py"}


# --------------------------------------------------------------------------------- one evidence reader (issue 30)

ARCHIVE_MODULES = ("tarfile", "zipfile", "gzip", "lzma", "bz2")
FOLDER_WALKS = ("walk", "fwalk", "scandir", "listdir")
"""`os.<name>`: a walk over a folder; `Path.rglob` and `Path.iterdir` are the others."""


def _walks_and_archives(node: ast.AST) -> list[str]:
    """What this node does that only evidence/ may: import an archive module, or walk a folder."""
    if isinstance(node, ast.Import):
        return [f"imports {alias.name}" for alias in node.names if alias.name.split(".")[0] in ARCHIVE_MODULES]
    if isinstance(node, ast.ImportFrom):
        if (node.module or "").split(".")[0] in ARCHIVE_MODULES:
            return [f"imports {node.module}"]
        return [f"imports os.{alias.name}" for alias in node.names
                if node.module == "os" and alias.name in FOLDER_WALKS]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        called, name = node.func.value, node.func.attr
        if name in FOLDER_WALKS and isinstance(called, ast.Name) and called.id == "os":
            return [f"calls os.{name}"]
        if name in ("rglob", "iterdir"):
            return [f"calls .{name}"]
    return []


def walks_and_archives(src: Path = SRC) -> list[str]:
    """`gpuready/verbs/x.py:12 calls os.walk` for each archive module imported and each folder walked outside
    evidence/ (function-local imports too)."""
    found = []
    for path in sorted((src / "gpuready").rglob("*.py")):
        module = str(path.relative_to(src))
        if module.startswith("gpuready/evidence/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found += [f"{module}:{node.lineno} {what}" for what in _walks_and_archives(node)]
    return found


def test_archives_and_folder_walks_only_in_the_evidence_reader():
    """One evidence reader (issue 30): what gpuready is given is walked and unpacked by evidence/ alone (its limits,
    its notes, links never followed); a verb that reads a folder (fleet's reports, `diagnose net --shared-path`,
    bench's --data-path) walks it with evidence/folders.py."""
    offences = walks_and_archives()
    assert not offences, "\n".join(offences)


def test_the_walk_rule_sees_each_way_to_walk_or_unpack(tmp_path):
    """The rule above on a made-up tree: every spelling is found outside evidence/, none inside it."""
    sources = {"verbs/a.py": "import os\nfor x in os.walk('.'):\n    pass\n",
               "verbs/b.py": "def f(p):\n    import tarfile\n    return list(p.rglob('*')), list(p.iterdir())\n",
               "report/c.py": "from os import scandir\nimport gzip as g\nfrom lzma import open\n",
               "evidence/d.py": "import os, zipfile\nos.scandir('.')\n"}
    for module, text in sources.items():
        path = tmp_path / "gpuready" / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert walks_and_archives(tmp_path) == [
        "gpuready/report/c.py:1 imports os.scandir", "gpuready/report/c.py:2 imports gzip",
        "gpuready/report/c.py:3 imports lzma", "gpuready/verbs/a.py:2 calls os.walk",
        "gpuready/verbs/b.py:2 imports tarfile", "gpuready/verbs/b.py:3 calls .rglob",
        "gpuready/verbs/b.py:3 calls .iterdir"]
