"""A real one-node Slurm on this host for the tests: Debian's `slurm-wlm` (slurmctld + slurmd) and `munge`.

`start_cluster(folder)` writes a munge key and a `slurm.conf` into `folder`, starts `munged -F`, `slurmctld -D` and
`slurmd -D` as child processes (each with its own socket, ports, spool and state folders under `folder`, so nothing
of the host's own Slurm or munge is used or changed) and waits, bounded, until `sinfo` shows the node idle.
`SlurmCluster.stop()` ends the three processes it started (by their ids) and nothing else.

Where the daemons cannot start here (not installed, not root, a daemon that exits), `SlurmUnavailable` says why, and
the `slurm_cluster` fixture turns that into a skip with that reason.

What the configuration is, and why:
- AuthType=auth/munge with `AuthInfo=socket=…`: the authentication every Slurm supports (auth/none is gone from
  23.11); munged runs with its own key, socket, pid, log and seed files.
- ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, JobAcctGatherType=jobacct_gather/none: no cgroup is needed
  (a container rarely lets a test create one).
- GresTypes=gpu and `Gres=gpu:N`, each GPU a link to /dev/null (see `_gres_text`): the node offers the GPUs that
  `launch slurm`'s `#SBATCH --gpus-per-node=N` asks for, so the script runs exactly as written. No GPU is used: the
  job runs on CPU (`--device cpu`).
- SlurmdParameters=config_overrides with CPUs=CPUS: the node offers what the script asks (`--cpus-per-task`), even on
  a 2-core CI machine; Slurm then shares the real cores (task/none binds nothing).
- No accounting daemon (AccountingStorageType none): a job's end state is read from `scontrol show job`, kept for
  MinJobAge seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

NODE = "gr-node1"
"""The Slurm NodeName: not this machine's host name, so that a report naming it shows it came from SLURMD_NODENAME."""
PARTITION = "debug"
CPUS = 16
GPUS = 8
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "sinfo", "scontrol", "squeue")
START_TIMEOUT_S = 20.0
COMMAND_TIMEOUT_S = 15.0


class SlurmUnavailable(RuntimeError):
    """Slurm cannot run here; the message says why (the tests skip with it)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _memory_mb() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)


def _conf_text(folder: Path, munge_socket: Path) -> str:
    state = folder / "state"
    return "\n".join([
        "ClusterName=gpuready-test",
        "SlurmctldHost=localhost",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={state / 'ctld'}",
        f"SlurmdSpoolDir={state / 'slurmd'}",
        f"SlurmctldPidFile={state / 'slurmctld.pid'}",
        f"SlurmdPidFile={state / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SlurmdParameters=config_overrides",
        "GresTypes=gpu",
        "MpiDefault=none",
        "ReturnToService=2",
        "MinJobAge=600",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        f"NodeName={NODE} NodeHostname=localhost NodeAddr=127.0.0.1 CPUs={CPUS} Gres=gpu:{GPUS} "
        f"RealMemory={max(_memory_mb() // 2, 500)} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ""])


def _gres_text(dev: Path) -> str:
    """gres.conf: GPUS fake GPU devices. Slurm 22.05 drops a GPU without a device file ("Removing file-less GPU") and
    refuses a file that is not a character device, so each is a link to /dev/null; no job opens them (task/none
    constrains no device, and the jobs run on CPU)."""
    dev.mkdir()
    for index in range(GPUS):
        (dev / f"gpu{index}").symlink_to("/dev/null")
    return f"NodeName={NODE} Name=gpu File={dev}/gpu[0-{GPUS - 1}]\n"


@dataclass
class SlurmCluster:
    """A running one-node Slurm: `env` is what a client command needs (SLURM_CONF); `run` runs one."""

    folder: Path
    env: dict[str, str]
    node: str = NODE
    processes: list[subprocess.Popen] = field(default_factory=list)

    def run(self, *argv: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(list(argv), env=self.env, cwd=cwd, capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}\n{self.logs()}")
        return done

    def node_state(self) -> str:
        """The node's state as `sinfo -N -h -o "%N %T"` prints it (idle, drained, draining, mixed…)."""
        done = self.run("sinfo", "-N", "-h", "-o", "%N %T", check=False)  # not yet up while slurmctld starts
        lines = done.stdout.split() if done.returncode == 0 else []
        return dict(zip(lines[0::2], lines[1::2])).get(self.node, "")

    def wait_node(self, wanted: tuple[str, ...], timeout_s: float = START_TIMEOUT_S) -> str:
        """Waits (bounded) until the node's state is one of `wanted`; the last state seen."""
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            self._check_alive()
            state = self.node_state()
            if state in wanted:
                return state
            time.sleep(0.3)
        return state

    def job_fields(self, job_id: str) -> dict[str, str]:
        """`scontrol show job -o ID` as {field: value} (JobState, ExitCode, NodeList, StdOut…)."""
        text = self.run("scontrol", "show", "job", "-o", job_id).stdout
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def wait_job(self, job_id: str, timeout_s: float) -> dict[str, str]:
        """Waits (bounded) until the job has ended; its fields (JobState COMPLETED, FAILED, TIMEOUT…)."""
        deadline = time.monotonic() + timeout_s
        fields = self.job_fields(job_id)
        while time.monotonic() < deadline and fields.get("JobState") in ("PENDING", "CONFIGURING", "RUNNING",
                                                                         "COMPLETING"):
            time.sleep(0.5)
            fields = self.job_fields(job_id)
        return fields

    def logs(self) -> str:
        """The daemons' log tails, for a failure's message."""
        parts = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munged.out"):
            path = self.folder / name
            if path.exists():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    def _check_alive(self) -> None:
        for process in self.processes:
            if process.poll() is not None:
                raise SlurmUnavailable(f"{Path(process.args[0]).name} exited {process.returncode}:\n{self.logs()}")

    def stop(self) -> None:
        """Ends the daemons this cluster started (slurmd first, munged last), each by its own process id."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)


def _which(name: str) -> str | None:
    """`name` on PATH, or in /usr/sbin and /sbin (where Debian puts the daemons; not on every user's PATH)."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))


def why_not_here() -> str | None:
    """Why Slurm cannot start on this host, or None where it may."""
    missing = [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "slurmd and munged here need root (SlurmUser=root); these tests run as uid %d" % os.geteuid()
    return None


def _start(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    out = open(cluster.folder / f"{name}.out", "wb")
    try:
        cluster.processes.append(subprocess.Popen(argv, env=cluster.env, stdout=out, stderr=subprocess.STDOUT,
                                                  stdin=subprocess.DEVNULL, start_new_session=True))
    finally:
        out.close()


def _start_munge(cluster: SlurmCluster, munge: Path) -> Path:
    """munged -F with its own key, socket, pid, log and seed files; waits for its socket; the socket path."""
    munge.mkdir()
    munge.chmod(0o711)  # munged wants its socket's folder searchable by all (the clients run as any user)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = munge / "munge.socket"
    _start(cluster, "munged", [_which("munged"), "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={munge / 'munged.pid'}", f"--log-file={cluster.folder / 'munged.log'}",
                               f"--seed-file={munge / 'munged.seed'}"])
    deadline = time.monotonic() + 5
    while not sock.exists():
        cluster._check_alive()
        if time.monotonic() > deadline:
            raise SlurmUnavailable(f"munged made no socket in 5 s:\n{cluster.logs()}")
        time.sleep(0.05)
    return sock


def start_cluster(folder: Path, timeout_s: float = START_TIMEOUT_S) -> SlurmCluster:
    """Starts munged, slurmctld and slurmd under `folder` and waits until the node is idle; SlurmUnavailable (with
    the reason and the daemons' logs) where they cannot start. The caller stops it (`stop`)."""
    reason = why_not_here()
    if reason:
        raise SlurmUnavailable(reason)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # job steps run as root but read the job's files here
    conf = folder / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for name in [name for name in env if name.startswith(("SLURM_", "SBATCH_", "SRUN_", "SQUEUE_"))]:
        if name != "SLURM_CONF":
            del env[name]  # a Slurm this test runs inside must not steer the one it starts
    cluster = SlurmCluster(folder=folder, env=env)
    try:
        sock = _start_munge(cluster, folder / "munge")
        for name in ("state", "state/ctld", "state/slurmd"):
            (folder / name).mkdir()
        conf.write_text(_conf_text(folder, sock))
        (folder / "gres.conf").write_text(_gres_text(folder / "dev"))
        _start(cluster, "slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(conf)])
        _start(cluster, "slurmd", [_which("slurmd"), "-D", "-N", NODE, "-f", str(conf)])
        state = cluster.wait_node(("idle",), timeout_s)
        if state != "idle":
            raise SlurmUnavailable(f"node {NODE} not idle after {timeout_s:.0f} s (sinfo: {state or 'nothing'}):\n"
                                   f"{cluster.logs()}")
    except BaseException:
        cluster.stop()
        raise
    return cluster
