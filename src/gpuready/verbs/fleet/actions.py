"""`fleet --actions slurm|k8s [--apply]`: the scheduler commands that apply the nodes' verdicts, and their undo.

Which report decides: a node's newest report that judged it (verdict ready, ready_with_warnings or not_ready, with a
start time); a report with no verdict (a CPU run, not enough evidence) neither drains nor resumes. It drains the node
where it is not_ready with a failure whose remediation is reset_gpu, reboot_node or drain_replace (read.DRAIN_LEVELS):
the GPU or the node must be taken out of service to clear it. A failure that only restarts the job (restart_job: an
application's Xid 13, a job's NCCL error) leaves the node in. It resumes the node where it is clean (ready or
ready_with_warnings) and strictly newer than a report of that node, given to the same fleet run, that drained it;
never otherwise, so a node drained by someone else, or by a report fleet was not given, stays drained. The pair
tests between nodes (validate --between-nodes) speak for every node they tested: a bad node is drained
(network.node_slow), and a newer run in which it is not bad resumes it, but undoes no drain for another cause (its
GPUs: then that drain stands). A bad link names two nodes and drains neither (`link_notes`). The drain
Reason names the check id, its sentence, and the run id and start time of the report, so an operator sees which run
drained it.

Kubernetes: `kubectl taint nodes NODE gpuready.io/health=<value>:NoSchedule --overwrite`, then `kubectl cordon NODE`;
the undo removes the taint (`gpuready.io/health-`) and uncordons. TAINT_VALUES is the vocabulary; a node without the
taint is `schedulable`.

`--apply` runs each command as an argument list (never a shell), one after the other, each with a timeout, and says
each one's exit code; without `--apply` nothing is run.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from gpuready.i18n import message, said, text_in
from gpuready.model import ExitCode
from gpuready.verbs.fleet.read import Drain, Outcome

SCHEDULERS = ("slurm", "k8s")
TOOLS = {"slurm": "scontrol", "k8s": "kubectl"}
TAINT_KEY = "gpuready.io/health"
TAINT_VALUES = {"reset_gpu": "pending-reset", "reboot_node": "pending-reboot", "drain_replace": "pending-replacement"}
"""Remediation level → the taint's value. `schedulable`: the taint removed."""
SCHEDULABLE = "schedulable"
JUDGED = ("ready", "ready_with_warnings", "not_ready")
CLEAN = ("ready", "ready_with_warnings")
MAX_REASON_BYTES = 255
"""Slurm keeps a node's Reason in slurmdbd's event table, a TINYTEXT column (255 bytes): a longer one is cut there."""
UNSAFE = re.compile(r"[\"'`$\\\x00-\x1f\x7f-\x9f]+")
"""Characters kept out of a Reason: quotes, backquote, `$` and backslash (the printed line stays one shell word),
control characters and newlines."""
SLURM_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
K8S_NODE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""A Kubernetes node name: a DNS subdomain (RFC 1123), at most 253 characters."""
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class Action:
    node: str
    """The scheduler's name of the node."""
    resume: bool
    """False: drain (cordon); True: resume (uncordon)."""
    decided_by: Outcome
    drain: Drain | None
    """The failure that drains (for a drain), or the one that drained it (for a resume)."""


def _when(started_at: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(started_at)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def decide(node: str, history: Iterable[Outcome]) -> Action | None:
    """The action one node's reports call for, or None (module docstring)."""
    judged = sorted(((moment, outcome) for outcome in history
                     if outcome.verdict in JUDGED and (moment := _when(outcome.started_at)) is not None),
                    key=lambda item: (item[0], item[1].drain is not None, item[1].path))  # a tie: the drain wins
    if not judged:
        return None
    moment, newest = judged[-1]
    if newest.verdict == "not_ready" and newest.drain is not None:
        return Action(node=node, resume=False, decided_by=newest, drain=newest.drain)
    drained = [outcome for when, outcome in judged if when < moment and outcome.verdict == "not_ready"
               and outcome.drain is not None]
    if newest.verdict not in CLEAN or not drained:
        return None
    outstanding = _outstanding([outcome for _when, outcome in judged])
    if outstanding:  # a clean between-nodes run says nothing of the GPUs: an older drain for them stands
        return Action(node=node, resume=False, decided_by=outstanding[-1], drain=outstanding[-1].drain)
    return Action(node=node, resume=True, decided_by=newest, drain=drained[-1].drain)


def _outstanding(history: list[Outcome]) -> list[Outcome]:
    """The drains no later clean outcome cleared, in time order: a node's own clean report clears every drain, a
    between-nodes run in which it is not bad only the drains of its own check ids (Outcome.clears)."""
    outstanding: list[Outcome] = []
    for outcome in history:
        if outcome.verdict == "not_ready" and outcome.drain is not None:
            outstanding.append(outcome)
        elif outcome.verdict in CLEAN:
            outstanding = [] if outcome.clears is None else [
                drained for drained in outstanding if drained.drain.check_id not in outcome.clears]
    return outstanding


def reason(action: Action) -> str:
    """The drain Reason: `gpuready: <check id>: <sentence> (<level>, run <run_id> <started_at>)`, in English, without
    quotes or control characters, at most MAX_REASON_BYTES bytes (the sentence is cut first)."""
    drain = action.drain
    sentence = (text_in("en", drain.message_id, drain.message_values or {}) if drain.message_id else None) \
        or drain.message
    head = f"gpuready: {_safe(drain.check_id)}: "
    tail = f" ({drain.level}, run {_safe(action.decided_by.run_id) or '?'} {_safe(action.decided_by.started_at)})"
    room = MAX_REASON_BYTES - len(head.encode()) - len(tail.encode())
    body = _safe(sentence)
    if len(body.encode()) > room:
        body = body.encode()[:max(room - 3, 0)].decode(errors="ignore").rstrip() + "..."
    return (head + body + tail)[:MAX_REASON_BYTES]


def _safe(text: str) -> str:
    return " ".join(UNSAFE.sub(" ", text).split())


def commands(action: Action, scheduler: str) -> list[list[str]]:
    """The argument lists that apply `action` with `scheduler` (`slurm` or `k8s`)."""
    if scheduler == "slurm":
        state = ["State=RESUME"] if action.resume else ["State=DRAIN", f"Reason={reason(action)}"]
        return [["scontrol", "update", f"NodeName={action.node}", *state]]
    if action.resume:
        return [["kubectl", "taint", "nodes", action.node, f"{TAINT_KEY}-"], ["kubectl", "uncordon", action.node]]
    value = TAINT_VALUES[action.drain.level]
    return [["kubectl", "taint", "nodes", action.node, f"{TAINT_KEY}={value}:NoSchedule", "--overwrite"],
            ["kubectl", "cordon", action.node]]


def shown(argv: list[str]) -> str:
    """One command as a shell line that runs it as printed: `Reason="…"` in double quotes (its text holds no quote,
    `$`, backquote or backslash), every other word quoted where it needs it."""
    return " ".join(f'Reason="{word[len("Reason="):]}"' if word.startswith("Reason=") else shlex.quote(word)
                    for word in argv)


def node_name_of(name: str, scheduler_names: dict[str, str], scheduler: str) -> str:
    """The node's name for `scheduler`: the one its report carries, else the fleet's name of it (the host)."""
    return scheduler_names.get("slurm_node" if scheduler == "slurm" else "k8s_node") or name


def valid_name(name: str, scheduler: str) -> bool:
    pattern = SLURM_NODE if scheduler == "slurm" else K8S_NODE
    return len(name) <= 253 and pattern.fullmatch(name) is not None


def plan_actions(nodes, scheduler: str) -> tuple[list[Action], list[str]]:
    """The actions for every node (by name), and the names refused (not a valid node name for `scheduler`)."""
    actions, refused = [], []
    for node in sorted(nodes, key=lambda node: node.name):
        if not node.name:
            continue  # a report that names no node: nothing to hand a scheduler
        name = node_name_of(node.name, node.scheduler, scheduler)
        action = decide(name, node.history)
        if action is None:
            continue
        if valid_name(name, scheduler):
            actions.append(action)
        else:
            refused.append(name)
    return actions, refused


def as_rows(actions: list[Action], scheduler: str) -> list[dict]:
    """The actions as the fleet document's `actions` (JSON)."""
    return [{"node": action.node, "action": "resume" if action.resume else "drain",
             "level": action.drain.level if action.drain else None,
             "check_id": action.drain.check_id if action.drain else None,
             "report": {"path": action.decided_by.path, "run_id": action.decided_by.run_id,
                        "started_at": action.decided_by.started_at},
             "commands": commands(action, scheduler)} for action in actions]


def apply(argvs: list[list[str]], lang: str) -> tuple[list[str], int]:
    """Run each argument list (no shell), in order; the lines that say each one's exit code, and fleet's exit code
    for them (3 where a command failed, timed out or its program is absent)."""
    tool = argvs[0][0] if argvs else None
    if tool and shutil.which(tool) is None:
        return [message("fleet.actions.no_tool", lang, tool=tool)], ExitCode.TOOL_ERROR
    lines, code = [], ExitCode.READY
    for argv in argvs:
        try:
            result = subprocess.run(argv, shell=False, timeout=RUN_TIMEOUT_S, check=False,
                                    stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            lines.append(message("fleet.actions.timed_out", lang, command=shown(argv), seconds=RUN_TIMEOUT_S))
            code = ExitCode.TOOL_ERROR
            continue
        except OSError as error:
            lines.append(message("fleet.actions.not_run", lang, command=shown(argv),
                                 error=error.strerror or str(error)))
            code = ExitCode.TOOL_ERROR
            continue
        lines.append(message("fleet.actions.ran", lang, command=shown(argv), code=result.returncode))
        if result.returncode != 0:
            code = ExitCode.TOOL_ERROR
    return lines, code


def refused_sentence(names: list[str], scheduler: str):
    return said("fleet.actions.bad_name", names=", ".join(names), scheduler=scheduler)


def link_notes(pairs: dict | None, lang: str) -> list[str]:
    """`# …` lines for --actions: each bad link between nodes names two nodes and drains neither (a cable or switch
    port between them, not a node); the line says which link to check and its figure."""
    return ["# " + message("fleet.actions.link", lang, a=entry["nodes"][0], b=entry["nodes"][1],
                           value="failed" if figure is None else f"{figure:.3g}",
                           reference=f"{(pairs or {}).get('reference_gb_per_s') or 0:.3g}")
            for entry in (pairs or {}).get("bad_links") or []
            for figure in [min((row["gb_per_s"] for row in entry["pairs"] if row["gb_per_s"] is not None),
                               default=None)]]
