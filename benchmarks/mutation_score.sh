#!/usr/bin/env bash
# Mutation testing of gpuready's judges (issue 23). Slow (tens of minutes per module on two cores): NOT for CI.
#
#   bash benchmarks/mutation_score.sh [MODULE...]      # default: every module of the table below
#   BEFORE=1 bash benchmarks/mutation_score.sh ...     # the same without tests/test_mutants_*.py (the score before)
#   bash benchmarks/mutation_score.sh --list           # the module -> test files table
#   AFTER=1 bash benchmarks/mutation_score.sh ...      # an earlier run's survivors against the tests committed now
#
# Tool: mutmut 2.5.1 (`pip install mutmut==2.5.1 coverage==7.6.10`). Not mutmut 3: it leaves every decorated function
# unmutated (mutmut/mutation/file_mutation.py: "ignore decorated functions"), and every check of checks/ is one
# (@check). mutmut 2 rewrites the source file in place, so each module runs in its own copy of the committed tree
# (`git archive HEAD`) under $WORK, never in the checkout; its cache (.mutmut-cache) stays in that copy.
#
# Speed: a mutant first runs only the test files that executed the mutated statement (a coverage map whose contexts
# are test files, built once per module; whole files, so module-scoped fixtures and results a test module computes
# at import still count); a mutant that survives them is run again against the module's whole test list (mutmut
# --rerun-all), so a survivor is a survivor of the whole list. A statement at the module's top level (run once, at
# import) runs the whole list at once; one no test runs (in this process: not in a subprocess) survives at once.
# Outcome codes: pytest 0 -> survived; 4 or 5 (a selected test id not found, none collected) -> treated as survived,
# so --rerun-all decides; anything else (a failure, an error at collection, a crash) -> killed.
#
# RERUN_ALL=0 skips that second run (quicker; a survivor is then a survivor of the tests that ran its statement, and
# a statement no test runs in this process, e.g. only in a `python -m gpuready` subprocess, counts as survived).
# JOBS=2 runs two modules at a time.
#
# Results under $WORK/results/: <module>.counts (killed, survived, timeout, suspicious, skipped, total) and
# <module>.survivors (each survivor's diff); AFTER=1 writes <module>.after (those still alive, with diffs).
# Score = killed / (total - equivalent - timeout); the equivalent mutants are judged by hand (the report of issue 23
# lists them).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/gpuready-mutation}
LIMIT_S=${LIMIT_S:-5400}          # per module
PYTHON=${PYTHON:-python}

CHECKS_TESTS="test_message_ids test_mutants_gpu test_mutants_nvlink test_mutants_registry test_mutants_topology test_mutants_host test_mutants_power test_mutants_software test_mutants_checks test_mutants_network test_mutants_judges test_checks test_pcie_acs_aer test_pcie_power_classes test_partial_evidence test_real_cases
 test_recorded_runs test_container_health test_diagnose_host_software test_diagnose_kernel test_one_judgement
 test_check_order test_evidence_classes test_i18n_health test_nvlink_boards test_odd_values test_diagnose_framework
 test_diagnose_nccl test_diagnose_net test_diagnose_torch test_junit test_console_problems_first test_report_verb
 test_hostile_bundles test_knowledge_tables test_i18n test_markdown test_safe_output test_no_english_left
 test_diagnose_covers_check test_layout"
PLAN_TESTS="test_message_ids test_mutants_plan test_mutants_plan_strategy test_mutants_plan_power test_mutants_plan_cost test_mutants_plan_machine test_plan_memory test_plan_strategy test_plan_batch_power_cost test_plan_machine test_plan_calibration
 test_plan_cli test_console_plan test_i18n_verbs test_bench_judge test_bench_recorded"
BURN_TESTS="test_message_ids test_mutants_burn_judge test_mutants_judges test_validate_judge test_one_judgement test_i18n_runs test_i18n_verbs test_recorded_runs
 test_visible_gpus test_shared_gpu test_burn_monitor"  # the slow ones (processes) last
BENCH_TESTS="test_message_ids test_mutants_bench_judge test_mutants_judges test_bench_judge test_bench_recorded test_i18n_runs test_i18n_verbs test_bench_data
 test_shared_gpu"
CHECKS_TESTS=$(echo $CHECKS_TESTS) PLAN_TESTS=$(echo $PLAN_TESTS)  # one line each: a table row is one line
BURN_TESTS=$(echo $BURN_TESTS) BENCH_TESTS=$(echo $BENCH_TESTS)

# Left out of every run: whole burns in a subprocess (23 s and 4 s on CPU). The judge they end in runs in that
# subprocess, out of the coverage map's sight, and the same judge is tested in-process by the other tests.
export MUT_DESELECT="tests/test_burn_monitor.py::test_burn_on_cpu_is_clean_and_the_self_test_is_caught
 tests/test_shared_gpu.py::test_device_cpu_still_runs"

# name | file to mutate | test files (tests/<name>.py; a name with no file is left out)
MODULES=(
  "checks.pcie|src/gpuready/checks/pcie.py|$CHECKS_TESTS"
  "checks.kernel_judge|src/gpuready/checks/kernel_judge.py|$CHECKS_TESTS"
  "checks.health|src/gpuready/checks/health.py|$CHECKS_TESTS"
  "checks.gpu|src/gpuready/checks/gpu.py|$CHECKS_TESTS"
  "checks.nvlink|src/gpuready/checks/nvlink.py|$CHECKS_TESTS"
  "checks.power|src/gpuready/checks/power.py|$CHECKS_TESTS"
  "checks.host|src/gpuready/checks/host.py|$CHECKS_TESTS"
  "checks.network|src/gpuready/checks/network.py|$CHECKS_TESTS"
  "checks.software|src/gpuready/checks/software.py|$CHECKS_TESTS"
  "checks.topology|src/gpuready/checks/topology.py|$CHECKS_TESTS"
  "checks.registry|src/gpuready/checks/registry.py|$CHECKS_TESTS"
  "facts.kernel_log|src/gpuready/facts/kernel_log.py|$CHECKS_TESTS test_parsers"  # not test_linear_readers: timed, fails under load
  "plan.memory|src/gpuready/estimate/memory.py|$PLAN_TESTS"
  "plan.strategy|src/gpuready/verbs/plan/strategy.py|$PLAN_TESTS"
  "plan.batch|src/gpuready/verbs/plan/batch.py|$PLAN_TESTS"
  "plan.power|src/gpuready/estimate/power.py|$PLAN_TESTS"
  "plan.cost|src/gpuready/verbs/plan/cost.py|$PLAN_TESTS"
  "plan.machine|src/gpuready/estimate/machine.py|$PLAN_TESTS"
  "burn.judge|src/gpuready/verbs/burn/judge.py|$BURN_TESTS"
  "burn.run|src/gpuready/verbs/burn/run.py|test_mutants_burn $BURN_TESTS"
  "bench.judge|src/gpuready/verbs/bench/judge.py|$BENCH_TESTS"
)

if [ "${1:-}" = --list ]; then
  for row in "${MODULES[@]}"; do IFS='|' read -r name file tests <<<"$row"; echo "$name  $file  $(echo $tests)"; done
  exit 0
fi

[ -n "${HELPERS_ONLY:-}" ] || mkdir -p "$WORK/results"

# --- helpers written into each copy (outside the repository) ---------------------------------------------------
write_helpers() {  # $1: the copy
  cat >"$1/mutplug.py" <<'EOF'
"""Imports every module of checks/ before the tests, as the whole suite does: a test file run alone
(tests/test_nvlink_boards.py) otherwise finds the registry empty."""
import importlib
import pathlib

for path in sorted(pathlib.Path("src/gpuready/checks").glob("*.py")):
    if path.stem != "__init__":
        importlib.import_module(f"gpuready.checks.{path.stem}")
EOF
  cat >"$1/mutrun.py" <<'EOF'
"""mutmut's runner: pytest on the given test ids (less $MUT_DESELECT); exit 0 = survived, 1 = killed."""
import sys

import pytest

import os

deselect = [arg for test in os.environ.get("MUT_DESELECT", "").split() for arg in ("--deselect", test)]
code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-p", "mutplug", *deselect, *sys.argv[1:]])
sys.exit(0 if code in (0, 4, 5) else 1)
EOF
  cat >"$1/mutctx.py" <<'EOF'
"""Coverage contexts by test file: a test's setup, call and teardown are its file's, and so is the collection of the
file (module-level work of a test file). Mutants then run whole test files, which holds with module-scoped fixtures
and results computed at a test module's import. MUT_CONTEXT=test: a test's call phase is its own context."""
import os

import coverage
import pytest


def _switch(name):
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(name)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    module = isinstance(collector, pytest.Module)
    if module:
        _switch(f"file:{collector.nodeid.split('::')[0]}")
    yield
    if module:
        _switch("")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _switch(f"file:{item.nodeid.split('::')[0]}")
    yield
    _switch("")


if os.environ.get("MUT_CONTEXT") == "test":  # mutation_parallel.py: the call phase by test, set-up and teardown by
    # file (a module-scoped fixture is made in the first test's set-up and read by the others)
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        _switch(f"test:{item.nodeid}")
        yield
        _switch(f"file:{item.nodeid.split('::')[0]}")
EOF
  cat >"$1/mutsub.py" <<'EOF'
"""Copied as sitecustomize.py into mutation_parallel.py's coverage copy: a Python process a test starts (the CLI in a
subprocess) is measured too, in the context of the test that started it (pytest's PYTEST_CURRENT_TEST)."""
import os

if os.environ.get("COVERAGE_PROCESS_START"):
    import coverage

    _measured = coverage.process_startup()
    _test = os.environ.get("PYTEST_CURRENT_TEST", "")
    if _measured is not None and " " in _test:
        nodeid, phase = _test.rsplit(" ", 1)
        _measured.switch_context(f"test:{nodeid}" if phase == "(call)" else f"file:{nodeid.split('::')[0]}")
EOF
  cat >"$1/covmap.py" <<'EOF'
"""Statement -> test files (or test ids) that ran it (coverage contexts of mutctx.py); "*" for a statement of the module's top level
(run once, at its import: any test may depend on it) or one run outside any test file."""
import ast
import json
import sys
from pathlib import Path

from coverage import CoverageData
from coverage.python import PythonParser

target, data_file, out = sys.argv[1], sys.argv[2], sys.argv[3]
source = Path(target).read_text()
parser = PythonParser(text=source, filename=target)
parser.parse_source()
in_function = set()
for node in ast.walk(ast.parse(source)):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        body = node.body if isinstance(node.body, list) else [node.body]
        for statement in body:
            in_function.update(range(statement.lineno, statement.end_lineno + 1))
data = CoverageData(basename=data_file)
data.read()
measured = next(name for name in data.measured_files() if name.endswith(target))
by_statement: dict[int, set[str]] = {}
for line, contexts in data.contexts_by_lineno(measured).items():
    files = by_statement.setdefault(parser.first_line(line), set())
    for context in contexts:  # file:<test file>, test:<test id> (MUT_CONTEXT=test); anything else: the whole list
        kind, _, name = context.partition(":")
        files.add(name if kind in ("file", "test") and name else "*")
lines = len(source.splitlines())
first = {number: parser.first_line(number) for number in range(1, lines + 1)}
for number in range(1, lines + 1):
    if number not in in_function and first[number] in by_statement:
        by_statement[first[number]].add("*")
json.dump({"first": first, "tests": {line: sorted(files) for line, files in by_statement.items()}}, open(out, "w"))
EOF
  cat >"$1/mutmut_config.py" <<'EOF'
"""mutmut 2 hook: run a mutant against the tests that executed its statement first (mutation_score.sh)."""
import json
import os
import shlex

_MAP = json.load(open("covmap.json"))


def pre_mutation(context):
    if os.environ.get("MUT_FULL"):
        return
    line = context.current_line_index + 1
    tests = _MAP["tests"].get(str(_MAP["first"].get(str(line), line)))
    if not tests:  # no test runs this statement: survived (--rerun-all: the whole list decides)
        context.config.test_command = "true"
        return
    if "*" in tests:
        return  # the whole list
    order = os.environ["MUT_TESTS"].split()  # the list's order: the closest tests first
    tests = sorted(tests, key=lambda test: order.index(test) if test in order else len(order))
    context.config.test_command = f"{os.environ['MUT_PYTHON']} mutrun.py " + " ".join(map(shlex.quote, tests))
EOF
  cat >"$1/mutafter.py" <<'EOF'
"""AFTER=1: each mutant an earlier run left alive, applied again and run against the tests as committed now (the
new tests/test_mutants_*.py of the list first, then the files the coverage map selects); prints each one still alive
with its diff, then a summary line."""
import difflib
import json
import os
import shlex
import sqlite3
import subprocess
import sys

from mutmut import Context, RelativeMutationID, mutate

target, tests = sys.argv[1], sys.argv[2:]
new = [test for test in tests if os.path.basename(test).startswith("test_mutants_")]
coverage = json.load(open("covmap.json"))
rows = sqlite3.connect(".mutmut-cache").execute(
    'select m.id, l.line, l.line_number, m."index" from Mutant m join Line l on m.line = l.id '
    'where m.status = "bad_survived" order by m.id').fetchall()
pristine = open(target).read()
alive = []
for mutant_id, line, number, index in rows:
    selected = coverage["tests"].get(str(coverage["first"].get(str(number + 1), number + 1))) or []
    files = tests if "*" in selected else new + [test for test in tests if test in selected and test not in new]
    mutated, _ = mutate(Context(source=pristine, filename=target,
                                mutation_id=RelativeMutationID(line=line, index=index, line_number=number)))
    try:
        open(target, "w").write(mutated)
        command = f"{os.environ['MUT_PYTHON']} mutrun.py " + " ".join(map(shlex.quote, files))
        try:
            survived = subprocess.run(command, shell=True, capture_output=True, timeout=600).returncode == 0
        except subprocess.TimeoutExpired:
            survived = False
    finally:
        open(target, "w").write(pristine)
    if survived:
        alive.append(mutant_id)
        print(f"=== mutant {mutant_id} (line {number + 1})")
        for change in difflib.unified_diff(pristine.split("\n"), mutated.split("\n"), lineterm="", n=0):
            if change[:1] in "+-" and change[:3] not in ("---", "+++"):
                print("   " + change)
print(f"# after: {len(rows)} survivors of the earlier run, {len(rows) - len(alive)} killed now, {len(alive)} alive:",
      " ".join(map(str, alive)))
EOF
}

if [ -n "${HELPERS_ONLY:-}" ]; then write_helpers "$HELPERS_ONLY"; exit 0; fi  # mutation_parallel.py's copies

after_module() {  # name file tests...: the survivors of an earlier run against the tests committed now
  local name=$1 file=$2; shift 2
  local copy="$WORK/tree-$name" tests=() test
  if [ ! -f "$copy/.mutmut-cache" ]; then echo "$name: no earlier run in $copy"; return 0; fi
  rm -rf "$copy/tests"
  git -C "$REPO" archive HEAD tests | tar -x -C "$copy"
  for test in "$@"; do [ -f "$copy/tests/$test.py" ] && tests+=("tests/$test.py"); done
  write_helpers "$copy"
  (
    cd "$copy"
    export PYTHONPATH="$copy/src:$copy" MUT_PYTHON="$PYTHON"
    "$PYTHON" mutafter.py "$file" "${tests[@]}" >"$WORK/results/$name.after" 2>&1
    echo "$name $(tail -1 "$WORK/results/$name.after")"
  )
}

run_module() {  # name file tests...
  local name=$1 file=$2; shift 2
  local copy="$WORK/tree-$name" tests=() test rerun=--rerun-all
  if [ "${RERUN_ALL:-1}" = 0 ]; then rerun=; fi
  rm -rf "$copy"; mkdir -p "$copy"
  git -C "$REPO" archive HEAD | tar -x -C "$copy"
  if [ -n "${BEFORE:-}" ]; then rm -f "$copy"/tests/test_mutants_*.py; fi
  for test in "$@"; do [ -f "$copy/tests/$test.py" ] && tests+=("tests/$test.py"); done
  write_helpers "$copy"
  (
    cd "$copy"
    export PYTHONPATH="$copy/src:$copy" MUT_PYTHON="$PYTHON"
    export MUT_TESTS="${tests[*]}"
    printf '[run]\ninclude = %s\n' "$copy/$file" >.coveragerc-mut
    local deselect=() test_id
    for test_id in $MUT_DESELECT; do deselect+=(--deselect "$test_id"); done
    "$PYTHON" -m coverage run --rcfile=.coveragerc-mut --data-file=.coverage-mut -m pytest -q -p no:cacheprovider \
      -p mutplug -p mutctx "${deselect[@]}" "${tests[@]}" >"$WORK/results/$name.baseline" 2>&1 \
      || { echo "$name: tests fail unmutated"; exit 1; }
    "$PYTHON" covmap.py "$file" .coverage-mut covmap.json
    timeout "$LIMIT_S" mutmut run --paths-to-mutate "$file" --tests-dir tests $rerun --simple-output \
      --no-progress --runner "$PYTHON mutrun.py ${tests[*]}" >"$WORK/results/$name.log" 2>&1 || true
    for bak in $(find src -name '*.bak'); do mv "$bak" "${bak%.bak}"; done  # a run cut by the time limit
    "$PYTHON" - "$name" >"$WORK/results/$name.counts" <<'EOF'
import sqlite3, sys
rows = dict(sqlite3.connect(".mutmut-cache").execute(
    "select status, count(*) from Mutant group by status").fetchall())
total = sum(rows.values())
print(sys.argv[1], " ".join(f"{key}={rows.get(key, 0)}" for key in
      ("ok_killed", "bad_survived", "bad_timeout", "ok_suspicious", "skipped", "untested")), f"total={total}")
EOF
    : >"$WORK/results/$name.survivors"
    for id in $(mutmut result-ids survived); do
      { echo "=== mutant $id"; mutmut show "$id"; } >>"$WORK/results/$name.survivors" 2>&1
    done
    cat "$WORK/results/$name.counts"
  )
}

selected=("$@")
for row in "${MODULES[@]}"; do
  IFS='|' read -r name file tests <<<"$row"
  if [ ${#selected[@]} -gt 0 ] && [[ ! " ${selected[*]} " == *" $name "* ]]; then continue; fi
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-1}" ]; do sleep 5; done
  # shellcheck disable=SC2086
  if [ -n "${AFTER:-}" ]; then after_module "$name" "$file" $tests & else run_module "$name" "$file" $tests & fi
done
wait
