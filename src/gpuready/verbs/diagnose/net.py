"""`gpuready diagnose net`: live network triage for multi-node PyTorch jobs, run on every node.

Per peer: name resolution (`network.resolve`), the local interface the kernel routes the peer through, a TCP
connect to the rendezvous port (`network.port`, with `network.firewall` when the connect times out), the interface
NCCL would pick by its own rules and whether it is the one that reaches the peer (`nccl.wrong_interface`), and the
MTU on the way (`network.mtu`). Once per run: this host's own name (`network.hostname`), the firewall rules where
they are readable without root (`network.firewall_rules`), and, with `--shared-path`, a bounded content digest of a
folder (`network.shared_path`) to compare across nodes.

Nothing here changes the machine; every outside program runs with a short timeout; only the given peers are
contacted (one UDP `connect`, which sends no packet, and one TCP connect per peer).

Messages and fixes: the catalogue's `net.*` (locale/<lang>/LC_MESSAGES/diagnose_net.po).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from gpuready import __version__
from gpuready.evidence.folders import walk_folder
from gpuready.i18n import Said, finding_text, said
from gpuready.knowledge import thresholds
from gpuready.checks.nccl_logs import WRONG_INTERFACE, judge_nccl_interface
from gpuready.checks.torch_logs import FIREWALL
from gpuready.model import Finding, Report, Status, Subject
from gpuready.facts.net_interfaces import (IfAddr, interface_of, is_loopback_ip, is_loopback_name, local_interface_entries,
                                          mtu_of, nccl_settings, nccl_socket_interfaces, resolve, route_source)

NCCL_ENV_REF = ("NCCL_SOCKET_IFNAME: "
                "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-socket-ifname")
NCCL_SOCKET_SRC_REF = "NCCL interface selection: ncclFindInterfaces / findInterfaces in NVIDIA/nccl src/misc/socket.cc"
NCCL_NET_TROUBLE_REF = ("NCCL networking troubleshooting: https://docs.nvidia.com/deeplearning/nccl/user-guide/"
                        "docs/troubleshooting.html#networking-issues")
HOSTS_127011_REF = ("Debian/Ubuntu map the hostname to 127.0.1.1 in /etc/hosts (Debian Reference §5.1.1 "
                    "'The hostname resolution'); gloo, and launchers using $(hostname) as MASTER_ADDR, then bind or "
                    "advertise loopback, which other nodes cannot reach")
TORCH_ENV_REF = "torch.distributed env:// init: MASTER_ADDR, MASTER_PORT (pytorch docs/source/distributed.md)"

MIN_MTU = 1500
"""Standard Ethernet MTU (IEEE 802.3 payload; RFC 894). Below it (a tunnel, an overlay) NCCL's socket transport still
works but every segment carries less; jumbo frames (9000) must match on every hop and node."""
MTU_REF = "Ethernet MTU 1500 (RFC 894); jumbo 9000 must match end to end"

SHARED_HASH_BYTES_PER_FILE = 4 * 1024 * 1024
"""Bytes of each file hashed for the shared-path digest (the size is always part of it)."""
SHARED_MAX_FILES = 10_000
"""Files the digest walks at most; the rest are counted as left out (the digest says it is partial)."""
SHARED_MAX_HASHED_BYTES = 512 * 1024 * 1024
"""Bytes hashed in all; past it files enter the digest by name and size only."""

FIREWALL_TIMEOUT_S = 3.0

# --- NCCL's interface choice (a pure function) -----------------------------------------------------------------

# --- resolution, route, port -------------------------------------------------------------------------------------

def tcp_probe(address: str, port: int, timeout_s: float) -> tuple[str, str | None]:
    """('connected' | 'refused' | 'timeout' | 'unreachable', error text)."""
    try:
        connection = socket.create_connection((address, port), timeout=timeout_s)
    except ConnectionRefusedError as error:
        return "refused", str(error)
    except (socket.timeout, TimeoutError) as error:
        return "timeout", str(error) or "timed out"
    except OSError as error:
        return "unreachable", str(error)
    try:
        connection.close()
    except OSError:
        pass
    return "connected", None


# --- firewall rules, shared path ---------------------------------------------------------------------------------

def read_firewall_rules(timeout_s: float = FIREWALL_TIMEOUT_S) -> dict[str, dict[str, Any]]:
    """`nft list ruleset` and `iptables -S` as this user, each with a timeout; never via sudo.

    Per tool: {"readable": bool, "text" | "why": ...}; where not readable, `reason` says which way (not_installed,
    timeout with `timeout_s`, exit_code with `exit_code`; else `why` is the tool's or the system's own words)."""
    results: dict[str, dict[str, Any]] = {}
    for tool, command in (("nft", ["nft", "list", "ruleset"]), ("iptables", ["iptables", "-S"])):
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL, errors="replace")
        except FileNotFoundError:
            results[tool] = {"readable": False, "why": "not installed", "reason": "not_installed"}
            continue
        except subprocess.TimeoutExpired:
            results[tool] = {"readable": False, "why": f"no answer within {timeout_s:g} s", "reason": "timeout",
                             "timeout_s": timeout_s}
            continue
        except OSError as error:
            results[tool] = {"readable": False, "why": str(error)}
            continue
        if done.returncode != 0 and done.stderr.strip():
            results[tool] = {"readable": False, "why": done.stderr.strip().splitlines()[0][:200]}
        elif done.returncode != 0:
            results[tool] = {"readable": False, "why": f"exit code {done.returncode}", "reason": "exit_code",
                             "exit_code": done.returncode}
        else:
            results[tool] = {"readable": True, "text": done.stdout[:200_000]}
    return results


def _unread_why(tool: str, result: dict[str, Any]) -> Said:
    """Why one tool's rules were not read, in the catalogue's words (the tool's own error text as it is)."""
    reason = result.get("reason")
    if reason == "not_installed":
        return said("net.firewall_rules.why.not_installed", tool=tool)
    if reason == "timeout":
        return said("net.firewall_rules.why.timeout", tool=tool, seconds=result.get("timeout_s"))
    if reason == "exit_code":
        return said("net.firewall_rules.why.exit_code", tool=tool, code=result.get("exit_code"))
    return said("net.firewall_rules.why.error", tool=tool, error=str(result.get("why")))


def judge_firewall_rules(rules: dict[str, dict[str, Any]], port: int) -> tuple[Status, Said, dict[str, Any]]:
    """Does inbound traffic get filtered, and does any rule name the port? A heuristic on the rule text."""
    readable = {tool: result["text"] for tool, result in rules.items() if result.get("readable")}
    if not readable:
        why = "; ".join(f"{tool}: {result.get('why')}" for tool, result in rules.items())
        installed = [tool for tool, result in rules.items() if result.get("reason") != "not_installed"]
        reasons = [_unread_why(tool, result) for tool, result in rules.items()]
        return (Status.SKIP, said("net.firewall_rules.unread" + (".root" if installed else ""), why=reasons),
                {"why": why})
    filtering, mentions = [], []
    for tool, text in readable.items():
        for line in text.splitlines():
            stripped = line.strip()
            lowered = stripped.lower()
            if tool == "iptables" and (stripped.startswith("-P INPUT DROP") or stripped.startswith("-P INPUT REJECT")
                                       or (stripped.startswith("-A INPUT") and ("-j DROP" in stripped
                                                                                or "-j REJECT" in stripped))):
                filtering.append(f"{tool}: {stripped}")
            if tool == "nft" and ("hook input" in lowered and "policy drop" in lowered
                                  or lowered.endswith(" drop") or lowered.endswith(" reject")
                                  or " reject with " in lowered):
                filtering.append(f"{tool}: {stripped}")
            if str(port) in stripped.replace(":", " ").replace(",", " ").replace("-", " ").split():
                mentions.append(f"{tool}: {stripped}")
    observed = {"tools": sorted(readable), "filtering": filtering[:10], "port_rules": mentions[:10]}
    if filtering and not mentions:
        return Status.WARN, said("net.firewall_rules.filtered", rule=filtering[0], port=port), observed
    if filtering:
        return Status.PASS, said("net.firewall_rules.port_rules", count=len(mentions), port=port), observed
    return Status.PASS, said("net.firewall_rules.open", tools=", ".join(sorted(readable))), observed


def shared_path_digest(folder: Path, *, hash_bytes_per_file: int = SHARED_HASH_BYTES_PER_FILE,
                       max_files: int = SHARED_MAX_FILES,
                       max_hashed_bytes: int = SHARED_MAX_HASHED_BYTES) -> dict[str, Any]:
    """A digest of a folder's content that is equal on two nodes when they see the same files.

    Each regular file enters as relative path, size and the sha256 of its first `hash_bytes_per_file` bytes;
    a link as its target (never followed); in sorted path order. Bounded: at most `max_files` files and
    `max_hashed_bytes` read in all (beyond it, name and size only). Modification times are left out (they
    differ between copies of the same data). Raises OSError if the folder cannot be listed."""
    import hashlib  # OpenSSL, 3.5 MB: loaded by the digest alone, not by every `diagnose` that imports this verb

    folder = Path(folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder")
    outer = hashlib.sha256()
    files = links = unreadable = left_out = 0
    total_bytes = hashed_bytes = 0
    partial_hash = False
    entries: list[tuple[str, Path]] = []
    parent = ""
    for item in walk_folder(folder, files_first=True):  # a folder's entries, then its subfolders'
        if item.relative.rpartition("/")[0] != parent:  # a folder walked whole: a huge tree stops early
            parent = item.relative.rpartition("/")[0]
            if len(entries) > max_files * 2:  # the sort below keeps it stable
                break
        entries.append((item.relative, Path(item.entry.path)))
    entries.sort()
    if len(entries) > max_files:
        left_out = len(entries) - max_files
        entries = entries[:max_files]
    for relative, path in entries:
        try:
            info = path.lstat()
        except OSError:
            unreadable += 1
            outer.update(f"{relative}\0unreadable\n".encode())
            continue
        if stat.S_ISLNK(info.st_mode):
            links += 1
            try:
                target = os.readlink(path)
            except OSError:
                target = "unreadable"
            outer.update(f"{relative}\0link\0{target}\n".encode(errors="surrogateescape"))
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        files += 1
        total_bytes += info.st_size
        budget = min(hash_bytes_per_file, max(0, max_hashed_bytes - hashed_bytes))
        inner = hashlib.sha256()
        if budget < min(info.st_size, hash_bytes_per_file):
            partial_hash = True
        try:
            with open(path, "rb") as handle:
                remaining = budget
                while remaining > 0:
                    chunk = handle.read(min(1 << 20, remaining))
                    if not chunk:
                        break
                    inner.update(chunk)
                    remaining -= len(chunk)
                    hashed_bytes += len(chunk)
            content = inner.hexdigest()
        except OSError:
            unreadable += 1
            content = "unreadable"
        outer.update(f"{relative}\0{info.st_size}\0{content}\n".encode(errors="surrogateescape"))
    return {"path": str(folder), "digest": outer.hexdigest(), "files": files, "links": links,
            "bytes": total_bytes, "hashed_bytes": hashed_bytes, "unreadable": unreadable, "left_out": left_out,
            "method": {"hash": "sha256", "bytes_per_file": hash_bytes_per_file, "max_files": max_files,
                       "max_hashed_bytes": max_hashed_bytes, "content_limited": partial_hash or left_out > 0}}


# --- the verb ------------------------------------------------------------------------------------------------------

class _Net:
    def __init__(self, host: str, port: int, timeout_s: float, entries: list[IfAddr], settings: dict[str, str]):
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.entries, self.settings = entries, settings
        self.findings: list[Finding] = []
        rank = os.environ.get("RANK")
        self.rank = int(rank) if rank and rank.isdigit() else None

    def add(self, check_id: str, status: Status, text: Said, *, nic: str | None = None, **fields: Any) -> None:
        """A finding whose message and fix are `text`'s (the fix from the catalogue's `<id>.fix`)."""
        self.findings.append(Finding(check_id=check_id, status=status, **finding_text(text),
                                     subject=Subject(host=self.host, nic=nic, rank=self.rank), **fields))

    def hostname(self) -> None:
        try:
            addresses = resolve(self.host)
        except (socket.gaierror, UnicodeError) as error:
            self.add("network.hostname", Status.WARN, said("net.hostname.unresolved", host=self.host, error=str(error)),
                     observed=str(error), expected="resolves to an address peers can reach", refs=[TORCH_ENV_REF])
            return
        if all(is_loopback_ip(address) for address in addresses):
            self.add("network.hostname", Status.WARN,
                     said("net.hostname.loopback", host=self.host, addresses=", ".join(addresses)),
                     observed=addresses, expected="a cluster-network address", refs=[HOSTS_127011_REF, TORCH_ENV_REF])
        else:
            self.add("network.hostname", Status.PASS,
                     said("net.hostname.pass", host=self.host, addresses=", ".join(addresses)), observed=addresses)

    def peer(self, peer: str) -> dict[str, Any]:
        facts: dict[str, Any] = {"peer": peer}
        try:
            addresses = resolve(peer)
        except (socket.gaierror, UnicodeError) as error:
            facts["resolve_error"] = str(error)
            self.add("network.resolve", Status.FAIL, said("net.resolve.fail", peer=peer, error=str(error)),
                     observed={"peer": peer, "error": str(error)}, expected="an address", refs=[TORCH_ENV_REF])
            return facts
        facts["addresses"] = addresses
        address = addresses[0]
        if is_loopback_ip(address) and not is_loopback_name(peer):
            self.add("network.resolve", Status.WARN, said("net.resolve.loopback", peer=peer, address=address),
                     observed={"peer": peer, "addresses": addresses}, expected="a cluster-network address",
                     refs=[HOSTS_127011_REF, TORCH_ENV_REF])
        else:
            self.add("network.resolve", Status.PASS, said("net.resolve.pass", peer=peer, addresses=", ".join(addresses)),
                     observed={"peer": peer, "addresses": addresses})

        source = route_source(address, self.port)
        route_nic = interface_of(source, self.entries)
        facts.update(route_source=source, route_interface=route_nic)
        self._port(peer, address, route_nic, facts)
        self._nccl(peer, address, route_nic, facts)
        self._mtu(peer, route_nic, [] if is_loopback_ip(address) else facts.get("nccl_interfaces", [])[:1], facts)
        return facts

    def _port(self, peer: str, address: str, route_nic: str | None, facts: dict[str, Any]) -> None:
        outcome, error = tcp_probe(address, self.port, self.timeout_s)
        facts["port"] = {"port": self.port, "outcome": outcome, "error": error}
        target = {"peer": peer, "address": address, "port": self.port}
        observed = {"peer": peer, "address": address, "port": self.port, "outcome": outcome, "error": error}
        if outcome == "connected":
            self.add("network.peer_port", Status.PASS, said("net.peer_port.connected", **target), nic=route_nic,
                     observed=observed)
        elif outcome == "refused":
            self.add("network.peer_port", Status.FAIL, said("net.peer_port.refused", **target), nic=route_nic,
                     observed=observed, expected="a listener", refs=[TORCH_ENV_REF])
        elif outcome == "timeout":
            self.add("network.peer_port", Status.FAIL, said("net.peer_port.timeout", **target, seconds=self.timeout_s),
                     nic=route_nic, observed=observed, expected="connected or refused", refs=[NCCL_NET_TROUBLE_REF])
            self.add(FIREWALL, Status.WARN, said("net.firewall.timeout", peer=peer, port=self.port),
                     nic=route_nic, observed=observed, expected="port open within the cluster",
                     refs=[NCCL_NET_TROUBLE_REF])
        else:
            self.add("network.peer_port", Status.FAIL, said("net.peer_port.unreachable", **target, error=error),
                     nic=route_nic, observed=observed, expected="connected", refs=[NCCL_NET_TROUBLE_REF])

    def _nccl(self, peer: str, address: str, route_nic: str | None, facts: dict[str, Any]) -> None:
        ifname = self.settings.get("NCCL_SOCKET_IFNAME")
        picks = nccl_socket_interfaces(self.entries, ifname, self.settings.get("NCCL_SOCKET_FAMILY"),
                                       self.settings.get("NCCL_COMM_ID"))
        facts["nccl_interfaces"] = picks
        source = self.settings.get("NCCL_SOCKET_IFNAME.source")
        setting = (said("net.setting.environment", ifname=ifname) if source == "environment" else
                   said("net.setting.file", ifname=ifname, source=source) if ifname else said("net.setting.default"))
        observed = {"peer": peer, "nccl_interfaces": picks, "route_interface": route_nic,
                    "NCCL_SOCKET_IFNAME": ifname}
        refs = [NCCL_ENV_REF, NCCL_SOCKET_SRC_REF]
        status, text, nic, expected = judge_nccl_interface(peer, address, route_nic, picks, setting,
                                                           this_host=is_loopback_ip(address))
        self.add(WRONG_INTERFACE, status, text, nic=nic, observed=observed, expected=expected, refs=refs)

    def _mtu(self, peer: str, route_nic: str | None, nccl_nics: list[str], facts: dict[str, Any]) -> None:
        """The MTU of the routing interface and, towards another host, of the one NCCL would bootstrap over."""
        names = [name for name in dict.fromkeys([route_nic, *nccl_nics]) if name]
        mtus = mtu_of(names)
        facts["mtu"] = mtus
        for name, mtu in mtus.items():
            observed = {"peer": peer, "interface": name, "mtu": mtu}
            if mtu is None:
                self.add("network.mtu", Status.SKIP, said("net.mtu.unknown", nic=name), nic=name, observed=observed)
            elif mtu < MIN_MTU:
                self.add("network.mtu", Status.WARN, said("net.mtu.low", nic=name, peer=peer, mtu=mtu, min_mtu=MIN_MTU),
                         nic=name, observed=observed, expected=f">= {MIN_MTU}, the same on every node", refs=[MTU_REF])
            else:
                self.add("network.mtu", Status.PASS, said("net.mtu.pass", nic=name, peer=peer, mtu=mtu), nic=name,
                         observed=observed, refs=[MTU_REF])

    def firewall_rules(self) -> dict[str, Any]:
        rules = read_firewall_rules()
        status, text, observed = judge_firewall_rules(rules, self.port)
        self.add("network.firewall_rules", status, text, observed=observed,
                 refs=[NCCL_NET_TROUBLE_REF] if status != Status.SKIP else [])
        return {tool: {key: value for key, value in result.items() if key != "text"} for tool, result in rules.items()}

    def shared(self, folder: Path) -> dict[str, Any] | None:
        try:
            digest = shared_path_digest(folder)
        except OSError as error:
            text = (said("net.shared_path.not_a_folder", path=str(folder)) if isinstance(error, NotADirectoryError)
                    else said("net.shared_path.unreadable", path=str(folder), error=str(error)))
            self.add("network.shared_path", Status.FAIL, text, observed=str(error),
                     expected="a readable folder, the same on every node")
            return None
        under_torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        # the optional parts are nested catalogue text, or "" where they do not apply
        where = said("net.shared_path.rank", rank=os.environ["RANK"], world=os.environ["WORLD_SIZE"]) \
            if under_torchrun else ""
        partial = said("net.shared_path.partial") if digest["method"]["content_limited"] else ""
        self.add("network.shared_path", Status.PASS,
                 said("net.shared_path.digest", path=str(folder), files=digest["files"], bytes=digest["bytes"],
                      digest=digest["digest"][:16], partial=partial, where=where),
                 observed=digest, expected="the same digest on every node")
        return digest


def run_net(peers: list[str], port: int = thresholds("rendezvous")["port"], shared_path: Path | None = None,
            timeout_s: float = 3.0) -> Report:
    """Live network triage towards `peers` on TCP `port`; see the module docstring for the findings."""
    host = socket.gethostname()
    settings = nccl_settings()
    try:
        entries = local_interface_entries()
    except Exception:  # psutil missing a platform call: judge what can be judged
        entries = []
    net = _Net(host, port, timeout_s, entries, settings)
    net.hostname()
    peer_facts = [net.peer(peer) for peer in peers]
    firewall = net.firewall_rules()
    facts: dict[str, Any] = {
        "interfaces": [{"name": e.name, "address": e.address, "netmask": e.netmask} for e in entries],
        "nccl_settings": settings,
        "nccl_interfaces": nccl_socket_interfaces(entries, settings.get("NCCL_SOCKET_IFNAME"),
                                                  settings.get("NCCL_SOCKET_FAMILY"), settings.get("NCCL_COMM_ID")),
        "peers": peer_facts, "port": port, "timeout_s": timeout_s, "firewall": firewall,
    }
    if shared_path is not None:
        facts["shared_path"] = net.shared(Path(shared_path))
    return Report(tool_version=__version__, host=host, findings=net.findings, facts=facts, multi_node=True)
