"""Mutation testing of gpuready's judges on many cores (issue 23): mutation_score.sh's modules, tests and rules, with
every mutant of every module spread over --workers processes instead of one mutmut run per module.

    python benchmarks/mutation_parallel.py --workers 15 --work /tmp/mutpar [MODULE...]   # default: every module
    python benchmarks/mutation_parallel.py --work /tmp/mutpar --report                    # the scores so far
    python benchmarks/mutation_parallel.py --work /tmp/mutpar --recheck [MODULE...]       # survivors vs the tests now

The same mutants as `mutmut run` (mutmut 2.5.1's own list_mutations, so the totals match mutation_score.sh's) and
the same decision: a mutant runs first against the test files that executed its statement (a coverage map with test
files as contexts, built once per test list), and one that survives them runs again against the module's whole test
list; a statement no test runs in-process goes straight to the whole list. A mutant whose tests fail is killed;
one still passing the whole list survived; past --timeout-s it is a timeout (left out of the score, as mutmut does).
With --fast the map is by test (a test's call phase; set-up and module-level work by test file) and follows the
processes tests start (the CLI in a subprocess), and a mutant runs only what ran its statement: many times fewer tests,
and survivors that --recheck then confirms against the whole list.

Each worker mutates its own copy of src/ and tests/ (made from the working tree: a lent machine has no .git), so a
mutant never reaches the checkout. Outcomes are appended to <work>/outcomes.jsonl as they come; a second run skips
what is there, so a run cut by a time limit goes on where it stopped. Needs mutmut 2.5.1 and coverage (mutmut 3
leaves decorated functions unmutated, and every check is one).
"""

from __future__ import annotations

import argparse
import difflib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Empty

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "mutation_score.sh"


def module_table() -> dict[str, tuple[str, list[str]]]:
    """name -> (file to mutate, test files), from mutation_score.sh's table (one table for both drivers)."""
    listed = subprocess.run(["bash", str(SCRIPT), "--list"], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in listed.splitlines():
        name, path, *tests = line.split()
        table[name] = (path, [f"tests/{test}.py" for test in tests if (REPO / "tests" / f"{test}.py").exists()])
    return table


def make_copy(copy: Path) -> None:
    """src/, tests/, benchmarks/, the README and mutation_score.sh's helpers (mutplug, mutrun, mutctx, covmap) in a
    folder of its own."""
    if copy.exists():
        shutil.rmtree(copy)
    copy.mkdir(parents=True)
    for part in ("src", "tests", "benchmarks"):  # tests read benchmarks/ and the README too
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__", "*.bak"))
    for part in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / part, copy)
    subprocess.run(["bash", str(SCRIPT)], env={**os.environ, "HELPERS_ONLY": str(copy)}, check=True)


def environment(copy: Path) -> dict[str, str]:
    inherited = os.environ.get("PYTHONPATH")
    path = f"{copy / 'src'}:{copy}" + (f":{inherited}" if inherited else "")
    return {**os.environ, "PYTHONPATH": path, "MUT_PYTHON": sys.executable}


def deselected() -> list[str]:
    return [arg for test in os.environ.get("MUT_DESELECT", _script_deselect()).split() for arg in ("--deselect", test)]


def _script_deselect() -> str:
    text = SCRIPT.read_text()
    start = text.index('export MUT_DESELECT="') + len('export MUT_DESELECT="')
    return text[start:text.index('"', start)]


def coverage_map(work: Path, files: list[str], tests: list[str], key: str) -> dict[str, dict]:
    """One coverage run of a test list over the modules that share it: file -> covmap.py's {first, tests}."""
    copy = work / f"coverage-{key}"
    make_copy(copy)
    shutil.copy(copy / "mutsub.py", copy / "sitecustomize.py")  # the processes tests start are measured too
    include = ",".join(str(copy / file) for file in files)
    rcfile = copy / ".coveragerc-mut"
    rcfile.write_text(f"[run]\ninclude = {include}\nparallel = True\ndata_file = {copy / '.coverage-mut'}\n")
    env = {**environment(copy), "MUT_CONTEXT": "test", "COVERAGE_PROCESS_START": str(rcfile)}
    done = subprocess.run([sys.executable, "-m", "coverage", "run", f"--rcfile={rcfile}", "-m", "pytest", "-q",
                           "-p", "no:cacheprovider", "-p", "mutplug", "-p", "mutctx", *deselected(), *tests],
                          cwd=copy, env=env, capture_output=True, text=True)
    (work / f"baseline-{key}.txt").write_text(done.stdout[-5000:] + done.stderr[-5000:])
    if done.returncode != 0:
        raise SystemExit(f"the tests fail unmutated ({key}); see {work}/baseline-{key}.txt")
    subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={rcfile}", "-q"], cwd=copy, env=env,
                   check=True)
    maps = {}
    for file in files:
        out = copy / f"covmap-{Path(file).stem}.json"
        subprocess.run([sys.executable, "covmap.py", file, ".coverage-mut", str(out)], cwd=copy, env=environment(copy),
                       check=True)
        maps[file] = json.loads(out.read_text())
    return maps


def mutants_of(file: str) -> list[tuple[str, int, int]]:
    from mutmut import Context, list_mutations
    source = (REPO / file).read_text()
    return [(mutant.line, mutant.index, mutant.line_number)
            for mutant in list_mutations(Context(source=source, filename=file))]


def mutated_source(file: str, line: str, index: int, line_number: int) -> str:
    from mutmut import Context, RelativeMutationID, mutate
    source = (REPO / file).read_text()
    mutated, _ = mutate(Context(source=source, filename=file,
                                mutation_id=RelativeMutationID(line=line, index=index, line_number=line_number)))
    return mutated


def run_tests(copy: Path, tests: list[str], timeout_s: float) -> str:
    command = [sys.executable, "mutrun.py", *tests]
    try:
        done = subprocess.run(command, cwd=copy, env=environment(copy), capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return "timeout"
    return "survived" if done.returncode == 0 else "killed"


def worker(number: int, work: Path, tasks: "multiprocessing.Queue", results: "multiprocessing.Queue",
           timeout_s: float) -> None:
    copy = work / f"worker-{number}"
    make_copy(copy)
    os.environ["MUT_DESELECT"] = os.environ.get("MUT_DESELECT", _script_deselect())
    while True:
        task = tasks.get()
        if task is None:
            return
        target = copy / task["file"]
        pristine = target.read_text()
        try:
            target.write_text(mutated_source(task["file"], task["line"], task["index"], task["line_number"]))
            started = time.monotonic()
            outcome = run_tests(copy, task["selected"], timeout_s) if task["selected"] else "survived"
            if outcome == "survived" and task.get("confirm", True):
                outcome = run_tests(copy, task["all_tests"], timeout_s)
            task["outcome"], task["seconds"] = outcome, round(time.monotonic() - started, 2)
        finally:
            target.write_text(pristine)
        results.put(task)


SOURCE_READERS = ("tests/test_message_ids.py", "tests/test_layout.py")
"""Tests that read the source as text (catalogue ids, imports): they run no mutated statement, so no coverage map
selects them; every mutant of a module whose list has them runs them."""


def recheck_tasks(outcomes: Path, names: list[str], table: dict, confirm: bool) -> list[dict]:
    """--recheck: each mutant whose last outcome is `survived`, against the tests as they are now: the module's
    tests/test_mutants_*.py and source readers first, then what its first run selected, then (unless --fast) its
    whole list."""
    tasks = []
    for row in current_outcomes(outcomes, {name: table[name] for name in names}).values():
        if row["outcome"] == "survived":
            tests = table[row["module"]][1]
            row = {key: value for key, value in row.items() if key not in ("outcome", "seconds")}
            new = [test for test in tests if Path(test).name.startswith("test_mutants_") or test in SOURCE_READERS]
            # by file: a test id of the first run may be gone since (a changed parameter), and pytest then runs
            # nothing and exits 4, which mutrun.py counts as "survived"
            earlier = list(dict.fromkeys(test.split("::")[0] for test in row.get("selected", [])
                                         if test.split("::")[0] not in new))
            tasks.append({**row, "selected": new + earlier, "all_tests": tests, "confirm": confirm})
    return tasks


def selected_tests(ran: list[str], tests: tuple[str, ...]) -> list[str]:
    """What a mutant of a statement runs: the test ids (or files) that ran it, in the list's order (its own tests
    first: with -x a killed mutant stops at the first failure), and the source readers; the whole list for "*"."""
    if "*" in ran:
        return list(tests)
    position = {test: number for number, test in enumerate(tests)}
    chosen = sorted(ran, key=lambda test: (position.get(test.split("::")[0], len(tests)), test))
    files = {test for test in chosen if "::" not in test}
    chosen = [test for test in chosen if test.split("::")[0] not in files or "::" not in test]
    return [test for test in tests if test in SOURCE_READERS and test not in files] + chosen


def schedule(work: Path, outcomes: Path, names: list[str], table: dict, confirm: bool) -> list[dict]:
    done = set(current_outcomes(outcomes, {name: table[name] for name in names}))
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        groups.setdefault(tuple(table[name][1]), []).append(name)
    pending = {name: [m for m in mutants_of(table[name][0]) if (name, m[2], m[1], m[0]) not in done]
               for name in names}
    wanted = [(number, tests, members) for number, (tests, members) in enumerate(groups.items())
              if any(pending[name] for name in members)]
    with ThreadPoolExecutor(max_workers=len(wanted) or 1) as pool:  # each test list's coverage run at once
        maps = dict(zip([number for number, _, _ in wanted], pool.map(
            lambda group: coverage_map(work, [table[name][0] for name in group[2]], list(group[1]),
                                       f"group{group[0]}"), wanted)))
    tasks = []
    for name in names:  # in the order asked for: a module's mutants together, so modules finish one by one
        number, tests = next((number, tests) for number, tests, members in wanted if name in members) \
            if pending[name] else (None, ())
        for line, index, line_number in pending[name]:
            covmap = maps[number][table[name][0]]
            statement = covmap["first"].get(str(line_number + 1), line_number + 1)
            ran = covmap["tests"].get(str(statement)) or []
            tasks.append({"module": name, "file": table[name][0], "line": line, "index": index,
                          "line_number": line_number, "selected": selected_tests(ran, tests) if ran else [],
                          "all_tests": list(tests), "confirm": confirm})
    return tasks


def drain(queue: "multiprocessing.Queue") -> int:
    drained = 0
    while True:
        try:
            queue.get_nowait()
        except Empty:
            return drained
        drained += 1


def current_outcomes(outcomes: Path, table: dict) -> dict[tuple, dict]:
    """The latest outcome of each mutant the source of `table`'s modules has now, at its line number now. A mutant is
    its line's text and index: a line moved by an edit above it keeps its outcomes. Where the same text stands on k
    lines now, the k places last recorded for it are paired with them in order; a mutant of an edited line has none."""
    rows = [json.loads(line) for line in outcomes.read_text().splitlines() if line.strip()] if outcomes.exists() else []
    recorded: dict[tuple, dict[int, dict]] = {}
    for row in rows:  # in the order written: a place recorded again moves to the end
        places = recorded.setdefault((row["module"], row["line"], row["index"]), {})
        places.pop(row["line_number"], None)
        places[row["line_number"]] = row
    now: dict[tuple, list[int]] = {}
    for name in table:
        for line, index, line_number in mutants_of(table[name][0]):
            now.setdefault((name, line, index), []).append(line_number)
    found = {}
    for (name, line, index), places in now.items():
        last = list(recorded.get((name, line, index), {}).items())[-len(places):]
        for (_old, row), new in zip(sorted(last), sorted(places)):
            found[(name, new, index, line)] = {**row, "line_number": new}
    return found


def report(outcomes: Path, table: dict) -> None:
    rows: dict[str, dict[str, int]] = {}
    latest = current_outcomes(outcomes, table)
    for row in latest.values():
        rows.setdefault(row["module"], {}).setdefault(row["outcome"], 0)
        rows[row["module"]][row["outcome"]] += 1
    print(f"{'module':22} {'mutants':>8} {'killed':>7} {'survived':>9} {'timeout':>8} {'score':>7}")
    for name in table:
        if name not in rows:
            continue
        counts = rows[name]
        total = len(mutants_of(table[name][0]))
        judged = counts.get("killed", 0) + counts.get("survived", 0)
        score = counts.get("killed", 0) / judged if judged else 0.0
        not_run = total - judged - counts.get("timeout", 0)
        note = f"  ({not_run} not run)" if not_run else ""
        print(f"{name:22} {total:8} {counts.get('killed', 0):7} {counts.get('survived', 0):9} "
              f"{counts.get('timeout', 0):8} {score:7.1%}{note}")
    survivors = outcomes.with_name("survivors.txt")
    with survivors.open("w") as out:
        for row in sorted(latest.values(), key=lambda row: (row["module"], row["line_number"], row["index"])):
            if row["outcome"] != "survived":
                continue
            source = (REPO / row["file"]).read_text().split("\n")
            mutated = mutated_source(row["file"], row["line"], row["index"], row["line_number"]).split("\n")
            out.write(f"=== {row['module']} line {row['line_number'] + 1} index {row['index']}\n")
            for change in difflib.unified_diff(source, mutated, lineterm="", n=0):
                if change[:1] in "+-" and change[:3] not in ("---", "+++"):
                    out.write(f"   {change}\n")
    print(f"survivors with their diffs: {survivors}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="names from `bash benchmarks/mutation_score.sh --list`")
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpuready-mutation-parallel"))
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--budget-s", type=float, default=None, help="stop handing out mutants after this long")
    parser.add_argument("--report", action="store_true", help="print the scores of what has run and stop")
    parser.add_argument("--outcomes", type=Path, help="the outcomes file (default: <work>/outcomes.jsonl)")
    parser.add_argument("--recheck", action="store_true", help="run the survivors again against the tests now")
    parser.add_argument("--fast", action="store_true",
                        help="a mutant runs only the tests that ran its statement (in-process or in a process they "
                             "started): its survivors are a bound from above until --recheck runs them on the whole "
                             "list")
    args = parser.parse_args()
    outcomes = args.outcomes or args.work / "outcomes.jsonl"
    table = module_table()
    names = args.modules or list(table)
    unknown = [name for name in names if name not in table]
    if unknown:
        raise SystemExit(f"not in mutation_score.sh's table: {', '.join(unknown)}")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.report:
        report(outcomes, {name: table[name] for name in names})
        return
    started = time.monotonic()
    if args.recheck:
        tasks = recheck_tasks(outcomes, names, table, confirm=not args.fast)
    else:
        tasks = schedule(args.work, outcomes, names, table, confirm=not args.fast)
    print(f"{len(tasks)} mutants to run on {args.workers} workers", flush=True)
    queue: multiprocessing.Queue = multiprocessing.Queue()
    results: multiprocessing.Queue = multiprocessing.Queue()
    for task in tasks:
        queue.put(task)
    processes = [multiprocessing.Process(target=worker, args=(number, args.work, queue, results, args.timeout_s))
                 for number in range(args.workers)]
    for process in processes:
        process.start()
    expected, received = len(tasks), 0
    with outcomes.open("a") as out:
        while received < expected:
            if args.budget_s is not None and time.monotonic() - started > args.budget_s:
                expected -= drain(queue)  # no new mutants: those running finish, the rest wait for the next run
            try:
                row = results.get(timeout=30)
            except Empty:
                continue
            received += 1
            out.write(json.dumps(row) + "\n")
            out.flush()
            if received % 50 == 0:
                print(f"{received}/{len(tasks)} after {time.monotonic() - started:.0f} s", flush=True)
    for _ in processes:
        queue.put(None)
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()
    report(outcomes, {name: table[name] for name in names})


if __name__ == "__main__":
    main()
