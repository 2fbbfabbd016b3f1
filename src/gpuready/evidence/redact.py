"""`collect --redact`: replace secrets, serials, ids, user and host names, addresses before a bundle leaves the site.

What is replaced, in every file, by a stable placeholder (same input → same placeholder in every file):

- GPU/MIG UUIDs → a hash of the same shape (unkeyed: a UUID is random, so GPUs keep their identity
  across bundles of any machine); serials → `redacted-<hash10>`.
- Host names → `host-<hash8>`: this machine's (hostname, FQDN, short names), the manifest's `host`, the
  values of host-naming environment variables (MASTER_ADDR, HOSTNAME, SLURM_*NODELIST with hostlists such
  as `node[001-004,010]` expanded, SLURMD_NODENAME, *_HOST, *_ADDR, *_NODE_NAME, *_ENDPOINT, ...), the host
  column of syslog/journal lines, `hostname set to <x>` lines, NCCL log prefixes and NFS/CIFS mount sources.
  Each name is then replaced wherever it appears as a whole token (case-insensitive), except names that
  identify nothing or that are the tools' own words (`localhost`, `gpu`, a word of the GPU's product name):
  those are replaced only where they stand as a host name (manifest, environment, log host column).
- IPv4 → `240.a.b.c`, IPv6 (full or compressed) → `100::a:b:c:d`, MACs (`:` or `-`, 6 or 20 bytes) →
  `02:…`, InfiniBand GUIDs → a hash of the same shape; this machine's own addresses (psutil) also in any
  other spelling. Placeholders keep the shape, so `ip -o addr` still parses. Loopback, unspecified,
  multicast and 255.x masks stay; IPv4-shaped versions (`9.13.0.50-1`, `VERSION=...`, `==...`) stay.

- Secrets → `redacted-secret`: the value of every variable (env.txt, `NAME=value` in any file), JSON key or
  `--flag` whose name holds TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH (any case), or the `_` words
  PAT, PASS, PWD (PATH is no secret); token-shaped values anywhere (`hf_…`, `ghp_…`, `github_pat_…`, `AKIA…`,
  `sk-…`, `nvapi-…`, `glpat-…`, `xox?-…`, `AIza…`, JWTs), `Authorization:`/`Bearer` values, `user:pass@` in URLs.
- User names → `user-<hash8>`: `/home/<user>` and `/Users/<user>` (`/root` stays), USER/LOGNAME values, this
  process's user; then those names as whole words (not root, ubuntu and other generic names).
- Ids → keyed hashes of the same shape: AWS `i-…`, `instance_id=`/`vmId:` values, UUIDs (Azure vmId, Kubernetes
  pod and node UIDs, `pod<uid>` with `_` in systemd slices; a GPU's UUID printed bare keeps its GPU- placeholder),
  64-hex container ids, `ip-10-1-2-3` EC2 names; DMI serial/asset-tag/product_uuid sections and `SerialNumber:`.

Files stay parseable: JSON files are parsed and only string values change (keys never), XML only between
tags. Hashes are keyed (HMAC-SHA256): a dictionary of host names or the 2^32 IPv4 addresses cannot be hashed
to reverse them. The key is GPUREADY_REDACT_KEY where set (one site secret: the same placeholders on every
node, so bundles of one cluster stay comparable), else derived from /etc/machine-id (the same on every bundle
of this machine), else random for this run.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import ipaddress
import json
import os
import re
import socket
import threading
from collections.abc import Iterable
from pathlib import Path

KEY_ENV = "GPUREADY_REDACT_KEY"
# A Slurm hostlist expands to at most this many names; a larger one is replaced whole (bounded work).
MAX_HOSTLIST_NAMES = 10_000
# Seconds allowed for the name lookup behind socket.getfqdn() (a broken resolver can block much longer).
FQDN_TIMEOUT_S = 2.0

# Names that identify no machine: never replaced.
LOOPBACK_NAMES = frozenset({
    "localhost", "localhost.localdomain", "localhost4", "localhost6", "localhost4.localdomain4",
    "localhost6.localdomain6", "ip6-localhost", "ip6-loopback", "localdomain", "(none)", "none", "unknown", "n/a"})
# Words the tools print themselves: a host so named is replaced where it stands as a host name, not in free text.
WORD_NAMES = frozenset({"linux", "kernel", "host", "node", "gpu", "nvidia", "cuda", "default", "version"})

_GPU_UUID = re.compile(r"\b(GPU|MIG)-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\b")
_SERIAL_XML = re.compile(r"(<((?:\w+_)?serial(?:_number)?)>)([^<]+)(</\2>)")
_SERIAL_TEXT = re.compile(r"^([ \t]*(?:Chassis )?Serial Number[ \t]*:[ \t]*)(\S+)[ \t]*$", re.MULTILINE)
# PCIe Device Serial Number capability in `lspci -vv` (8 bytes; NICs derive it from their MAC).
_PCI_DSN = re.compile(r"(Device Serial Number )((?:[0-9a-fA-F]{2}-){7}[0-9a-fA-F]{2})\b")

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*"
_NAME_END = r"(?![A-Za-z0-9_/-]|\.[A-Za-z0-9])"
_HEX = "0-9A-Fa-f"
_ADDRESS = re.compile(
    # MAC (6 bytes) or IPoIB hardware address (20 bytes), `:` or `-` between bytes.
    rf"(?P<mac>(?<![\w:-])[{_HEX}]{{2}}(?P<sep>[:-])(?:[{_HEX}]{{2}}(?P=sep)){{4}}(?:(?:[{_HEX}]{{2}}(?P=sep)){{14}})?"
    rf"[{_HEX}]{{2}}(?![\w:-]))"
    # InfiniBand GUID as ibv_devinfo and sysfs print it.
    rf"|(?P<guid>(?<![\w:])[{_HEX}]{{4}}(?::[{_HEX}]{{4}}){{3}}(?![\w:]))"
    # IPv6 candidate (two colons at least), checked with ipaddress.
    rf"|(?P<ipv6>(?<![\w:.])[{_HEX}]*:[{_HEX}]*:[{_HEX}:.]*)"
    r"|(?P<ipv4>(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\w|\.\d))")
# Host names in known positions: the host column of syslog and `journalctl -k` lines, `hostname set to`,
# NCCL's `host:pid:tid [rank] NCCL` prefix, remote mounts in `df`/`mount` (host:/export, //host/share).
_LOG_HOSTS = [
    re.compile(rf"^\[[ \t]*\d+\.\d+\][ \t]+(?P<name>{_NAME})[ \t]+kernel:", re.MULTILINE),
    re.compile(rf"^[A-Z][a-z]{{2}}[ \t]+\d{{1,2}}[ \t]+\d\d:\d\d:\d\d[ \t]+(?P<name>{_NAME})"
               r"[ \t]+[\w./@-]+(?:\[\d+\])?:", re.MULTILINE),
    re.compile(rf"^\d{{4}}-\d\d-\d\dT[\d:.,+-]+Z?[ \t]+(?P<name>{_NAME})[ \t]+[\w./@-]+(?:\[\d+\])?:", re.MULTILINE),
    re.compile(rf"(?i)\bhost ?name(?: set)? to [<'\"]?(?P<name>{_NAME}){_NAME_END}"),
    re.compile(rf"^(?P<name>{_NAME}):\d+:\d+ \[\d+\] NCCL", re.MULTILINE),
    re.compile(rf"^(?P<name>{_NAME}):/(?!/)", re.MULTILINE),
    re.compile(rf"^//(?P<name>{_NAME})/", re.MULTILINE),
    # sshd/login/audit: `logged in from <host>`, `Accepted publickey for <user> from <host>`.
    re.compile(rf"(?i)\b(?:logged in|session opened|connection|login|accepted [a-z-]{{1,32}} for [^\s]{{1,64}}) "
               rf"from (?P<name>{_NAME}){_NAME_END}"),
]
# Environment variables whose value names hosts (NCCL_SOCKET_IFNAME names an interface: not matched).
_HOST_VARIABLE = re.compile(r"(?:^|_)(?:HOSTNAME|HOSTS?|HOST_NAME|ADDR|ADDRESS|IPADDR|NODELIST|NODE_LIST|NODENAME|"
                            r"NODE_NAME|ENDPOINT|COMM_ID)(?:_|$)")
# A name-shaped token: not inside a longer word; `vm` in `kvm-clock` or `vm_1` is no name.
_NAME_TOKEN = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*(?![A-Za-z0-9_-])")
_MAX_LABELS = 8
_IPV6_PLACEHOLDERS = ipaddress.ip_network("100::/64")
_ENV_LINE = re.compile(r"^(?P<lead>[ \t]*(?:export[ \t]+)?)(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$",
                       re.MULTILINE)
# Secrets. A variable (or JSON key, or `--flag`) whose name says it holds one has its value replaced whole; `PAT`
# and `PASS` only as a whole `_` word (PATH, PASSTHROUGH are no secrets).
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|(?:^|_)(?:PAT|PASS|PWD)(?:_|$)",
                          re.IGNORECASE)
SECRET_PLACEHOLDER = "redacted-secret"
# A quoted value may span lines (`MY_SECRET="line1<newline>line2"`); an unterminated quote reaches to the line's end.
# Only `NAME=` is consumed: the scan goes on inside a value, where another assignment may sit
# (`SLURM_EXPORT_ENV=WANDB_API_KEY=…`, as `sbatch --export` sets it).
_SECRET_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])(?P<name>[A-Za-z_][A-Za-z0-9_]{0,127})=")
# A value: quoted (backslash escapes kept inside; over lines), quoted with escaped quotes inside another quoted value
# (`Z="KEY=\\"…\\""`), unterminated to the line's end, or bare.
_ASSIGNED_VALUE = re.compile(r"\"(?:[^\"\\]|\\.){0,4096}+\"|'[^']{0,4096}'|\\([\"'])(?:[^\"'\\]|\\[^\"'])"
                             r"{0,4096}+\\\1|\\?[\"'][^\n]{0,4096}|[^\s\"',;&|]{1,4096}")
# A PEM private key, whatever holds it (`*_SSH_PRIVATE_KEY=` in env.txt, a pasted file): from its header to its
# footer (a line that starts with `-----` ends the search, so that each line is read once), or, without a footer,
# the header and the lines that can be a key's (base64, `Proc-Type:`-style headers, blank).
_PEM_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----"
    r"(?:[^\n]{0,64}\n(?:(?!-----)[^\n]{0,4096}\n){0,1000}?-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----"
    r"|[ \t\r]*(?:\n(?:[A-Za-z0-9+/=]{0,128}|[A-Za-z-]{1,32}:[^\n]{0,256})[ \t\r]*(?=\n|\Z))*+)")
# env.txt holds `NAME=value` lines, and a value with newlines goes on over the next lines: a line that is not a new
# `NAME=` (or is base64 alone, as a key's line) continues the value before it.
_NEW_VARIABLE = re.compile(r"[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/]+=*[ \t\r]*")
_SECRET_FLAG = re.compile(r"(?<![\w-])(?P<name>--?[A-Za-z][A-Za-z0-9_-]{0,63})(?P<sep>=|[ \t]{1,8})"
                          r"(?P<value>[^\s\"'-][^\s\"']{0,4095})")
_SECRET_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_-])(?:hf_[A-Za-z0-9]{30,4096}"          # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{30,4096}|github_pat_[A-Za-z0-9_]{30,4096}"  # GitHub
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Za-z])"             # AWS access key id
    r"|sk-[A-Za-z0-9_-]{20,4096}"                            # OpenAI and alike
    r"|nvapi-[A-Za-z0-9_-]{20,4096}|glpat-[A-Za-z0-9_-]{20,4096}|xox[abposr]-[A-Za-z0-9-]{10,4096}"
    r"|AIza[0-9A-Za-z_-]{35}"                                # Google API key
    r"|eyJ[A-Za-z0-9_-]{8,8192}\.eyJ[A-Za-z0-9_-]{8,8192}\.[A-Za-z0-9_-]{0,8192})")  # JWT
_BEARER = re.compile(r"(?i)(\bauthorization[\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?(?:(?:bearer|basic|token)[ \t]{1,8})?"
                     r"|\bbearer[ \t]{1,8})([A-Za-z0-9._~+/=-]{8,4096})")
_URL_CREDENTIALS = re.compile(r"(?<=://)[^\s/@:]{1,256}:[^\s/@]{1,256}@")
# User names: home folders (/root stays), then the names themselves as whole tokens.
_HOME = re.compile(r"(?<![\w.-])(?P<lead>/(?:home|Users|export/home|var/home))/(?P<user>[A-Za-z0-9._-]{1,64})"
                   r"(?![A-Za-z0-9._-])")
_USER_VARIABLE = re.compile(r"(?:^|_)(?:USER|USERNAME|LOGNAME|LOGIN)$")
GENERIC_USERS = frozenset({"root", "ubuntu", "ec2-user", "admin", "user", "users", "nobody", "centos", "debian",
                           "azureuser", "opc", "cloud-user", "fedora", "home", "shared", "linuxbrew"})
# Cloud instance ids (AWS i-…), ids given by name (instance_id=…, vmId: …), UUIDs (Azure vmId, Kubernetes pod and
# node UIDs, also as `pod<uid>` with `_` in systemd slice names), container ids (64 hex).
_INSTANCE_ID = re.compile(r"(?<![\w-])i-(?:[0-9a-f]{17}|[0-9a-f]{8})(?![\w-])")
_NAMED_ID = re.compile(r"(?i)(?<!gpu[ _-])(?<!compute[ _-])(?<!mig[ _-])"  # MIG instance ids are no cloud ids
                       r"(\b(?:instance|vm)[_ -]?id[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?)"
                       r"([A-Za-z0-9][A-Za-z0-9_.:/-]{2,255})")
_ID_KEY = re.compile(r"(?i)^(?:(?:ec2|aws|gce|gcp|azure|cloud|k8s|kube)[_-]?)?"
                     r"(?:instance[_-]?id|vm[_-]?id|machine[_-]?id|boot[_-]?id|node[_-]?uid|pod[_-]?uid)$")
_UUID = re.compile(r"(?:(?<=pod)|(?<![0-9A-Za-z]))(?<!GPU-)(?<!MIG-)(?<!gpu-)(?<!mig-)"
                   r"([0-9a-fA-F]{8})([-_])([0-9a-fA-F]{4})\2([0-9a-fA-F]{4})\2([0-9a-fA-F]{4})\2([0-9a-fA-F]{12})"
                   r"(?![0-9A-Za-z])")
_CONTAINER_ID = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{64}(?![0-9A-Za-z])")
_AWS_HOST_IP = re.compile(r"(?<![\w-])ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})(?![\w-])")
# Serials in `head`-style captures (`==> /sys/class/dmi/id/board_serial <==`) and `Serial: X` lines.
_SECTION = re.compile(r"^==> (?P<path>[^\n<]{1,512}) <==\n(?P<value>[^\n]{1,512})$", re.MULTILINE)
_SERIAL_PATH = re.compile(r"serial|asset_tag|product_uuid|machine-id|boot_id")
# `SerialNumber: X`, `serial_no=X`, `serial=X`; not dmesg's `Serial: 8250/16550 driver`.
_SERIAL_WORD = re.compile(r"(?i)(\bserial(?:[ _]?(?:number|no\b)[ \t]{0,4}[:=]|[ \t]{0,4}=)[ \t]{0,4})"
                          r"([^\s,;<]{1,128})")
_PRODUCT_NAMES = [re.compile(r"<product_(?:name|brand|architecture)>([^<]+)</product_"),
                  re.compile(r"^[ \t]*Product (?:Name|Brand|Architecture)[ \t]*:[ \t]*(.+)$", re.MULTILINE)]


@functools.lru_cache(maxsize=1)
def redaction_key() -> bytes:
    """GPUREADY_REDACT_KEY, else a key derived from /etc/machine-id, else random (cached for this process)."""
    secret = os.environ.get(KEY_ENV, "").strip()
    if not secret:
        for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
            try:
                secret = Path(path).read_text(errors="replace").strip()
            except OSError:
                continue
            if secret:
                break
    return hashlib.sha256(b"gpuready-redact\0" + secret.encode()).digest() if secret else os.urandom(32)


def _digest(value: str, length: int) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:length]


def _stable_uuid(match: re.Match[str]) -> str:
    digest = _digest(match.group(2).lower(), 32)
    return f"{match.group(1)}-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def expand_hostlist(expression: str, limit: int = MAX_HOSTLIST_NAMES) -> list[str] | None:
    """`node[001-004,010],gpu7` → the names; None where it is not a hostlist or expands beyond `limit`."""
    parts, depth, current = [], 0, ""
    for char in expression:
        depth += (char == "[") - (char == "]")
        if depth not in (0, 1):
            return None
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    names: list[str] = []
    for part in parts:
        expansions = [""]
        for piece in re.split(r"(\[[^\]]*\])", part):
            if not piece.startswith("["):
                expansions = [prefix + piece for prefix in expansions]
                continue
            values: list[str] = []
            for item in piece[1:-1].split(","):
                bounds = re.fullmatch(r"([0-9]+)(?:-([0-9]+))?", item.strip())
                if not bounds:
                    return None
                low, high = int(bounds.group(1)), int(bounds.group(2) or bounds.group(1))
                if high < low or len(values) + high - low >= limit:
                    return None
                values += [str(number).zfill(len(bounds.group(1))) for number in range(low, high + 1)]
            if len(expansions) * len(values) > limit:
                return None
            expansions = [prefix + value for prefix in expansions for value in values]
        names += expansions
        if len(names) > limit or not all(re.fullmatch(_NAME, name) for name in expansions):
            return None
    return names


class Redactor:
    """Replaces names and addresses by keyed, stable placeholders; one instance per bundle."""

    def __init__(self, key: bytes, names: Iterable[str] = (), addresses: Iterable[str] = (),
                 macs: Iterable[str] = (), protected: Iterable[str] = (), users: Iterable[str] = (),
                 gpu_uuids: Iterable[str] = ()):
        self.key = key
        self.names: set[str] = set()
        self.users: set[str] = set()
        self.gpu_uuids = {uuid.lower() for uuid in gpu_uuids}
        self.hostlists: dict[str, str] = {}
        self.local_addresses = {normal for normal in map(_normal_address, addresses)
                                if normal and not _kept_address(ipaddress.ip_address(normal))}
        self.local_macs = {mac for mac in map(_normal_mac, macs) if mac and mac.strip("0f")}
        self.protected = WORD_NAMES | {word.lower() for word in protected}
        self._local_mac_pattern: re.Pattern[str] | None = None
        self._free_names: frozenset[str] | None = None
        self._all_names: frozenset[str] | None = None
        for name in names:
            self.add_name(name)
        for user in users:
            self.add_user(user)

    # -- what to replace -------------------------------------------------------------------------------
    def add_name(self, name: str) -> None:
        name = name.strip().rstrip(".").lower()
        if not name or name in LOOPBACK_NAMES or name.isdigit() or _normal_address(name) \
                or not re.fullmatch(_NAME, name):
            return
        self.names.add(name)
        if "." in name:  # node17.example.com: node17 is this host's name too
            self.add_name(name.split(".", 1)[0])
        self._free_names = self._all_names = None

    def add_user(self, name: str) -> None:
        name = name.strip().strip("'\"").lower()
        if re.fullmatch(r"[a-z0-9._-]{1,64}", name) and not re.fullmatch(r"user-[0-9a-f]{8}", name):
            self.users.add(name)

    def add_host_value(self, value: str) -> None:
        """A variable's value that names hosts: `trainer-7`, `node[01-04]`, `10.0.0.5:29500`, `tcp://h:1`."""
        for piece in _host_pieces(value):
            if "[" in piece:
                names = expand_hostlist(piece)
                for name in names or []:
                    self.add_name(name)
                self.hostlists[piece] = (",".join(self.host_placeholder(name) for name in names) if names
                                         else f"hostlist-{self._hash('hostlist', piece, 8)}")
            else:
                self.add_name(piece)

    # -- placeholders ----------------------------------------------------------------------------------
    def _hash(self, kind: str, value: str, length: int) -> str:
        return hmac.new(self.key, f"{kind}\0{value}".encode(), hashlib.sha256).hexdigest()[:length]

    def host_placeholder(self, name: str) -> str:
        return "host-" + self._hash("host", name.lower().rstrip("."), 8)

    def serial(self, value: str) -> str:
        if value.strip() in ("N/A", "") or re.fullmatch(r"redacted-[0-9a-f]{10}", value.strip()):
            return value
        return "redacted-" + self._hash("serial", value.strip(), 10)

    def user_placeholder(self, name: str) -> str:
        return "user-" + self._hash("user", name.lower(), 8)

    def _uuid(self, match: re.Match[str]) -> str:
        bare = "".join(match.group(index) for index in (1, 3, 4, 5, 6)).lower()
        # A GPU's UUID printed bare keeps the GPU- form's (unkeyed) placeholder: the GPUs still match up.
        digest = _digest(bare, 32) if bare in self.gpu_uuids else self._hash("uuid", bare, 32)
        separator = match.group(2)
        return separator.join((digest[:8], digest[8:12], digest[12:16], digest[16:20], digest[20:]))

    def identifier(self, value: str) -> str:
        """An instance, VM or container id: a keyed hash of the same length, the `i-` of AWS ids kept."""
        if value.startswith("i-"):
            return "i-" + self._hash("instance", value, len(value) - 2)
        return self._hash("id", value, max(8, min(len(value), 64)))

    def _ip_placeholder(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
        digest = bytes.fromhex(self._hash("ip", address.compressed, 16))
        if address.version == 4:
            return f"240.{digest[0]}.{digest[1]}.{digest[2]}"
        return ipaddress.IPv6Address((0x0100 << 112) | int.from_bytes(digest, "big")).compressed  # 100::/64

    def _mac_placeholder(self, mac: str, separator: str) -> str:
        normal = mac.lower().replace("-", "").replace(":", "").replace(".", "")
        digest = "02" + self._hash("mac", normal, len(normal) - 2)
        return separator.join(digest[i:i + 2] for i in range(0, len(digest), 2)) if separator else digest

    # -- the passes ------------------------------------------------------------------------------------
    def _name_sets(self) -> tuple[frozenset[str], frozenset[str]]:
        if self._all_names is None:
            self._all_names = frozenset(self.names)
            self._free_names = frozenset(name for name in self.names if len(name) >= 2 and name not in self.protected)
        return self._free_names, self._all_names

    def names_in(self, text: str, everywhere: bool = False) -> str:
        """Replace known names: free text (everywhere=False) or a position that holds a host name.

        Text is cut into name-shaped tokens looked up in a set (linear in the text, whatever the number of names);
        within a dotted token any run of up to _MAX_LABELS labels may be a name (`s1.node17`, `node17.example.com`).
        """
        for expression, replacement in sorted(self.hostlists.items(), key=lambda item: -len(item[0])):
            text = text.replace(expression, replacement)
        free, every = self._name_sets()
        known = every if everywhere else free
        users = {user for user in self.users if len(user) >= 3 and user not in GENERIC_USERS | self.protected}
        if not known and not users:
            return text

        def token(match: re.Match[str]) -> str:
            if match.group(0).lower() in users:
                return self.user_placeholder(match.group(0))
            labels = match.group(0).split(".")
            if len(labels) == 1:
                return self.host_placeholder(labels[0]) if labels[0].lower() in known else labels[0]
            out, index = [], 0
            while index < len(labels):
                for stop in range(min(len(labels), index + _MAX_LABELS), index, -1):
                    candidate = ".".join(labels[index:stop])
                    if candidate.lower() in known:
                        out.append(self.host_placeholder(candidate))
                        index = stop
                        break
                else:
                    out.append(labels[index])
                    index += 1
            return ".".join(out)
        return _NAME_TOKEN.sub(token, text)

    def addresses_in(self, text: str) -> str:
        text = _AWS_HOST_IP.sub(self._aws_host_ip, text)  # ip-10-1-2-3: an EC2 host named by its address
        text = _ADDRESS.sub(self._address, text)
        if self.local_macs:  # this machine's MACs in any other spelling: 0242ac110002, 0242.ac11.0002
            if self._local_mac_pattern is None:
                spellings = [f"{mac[:4]}.{mac[4:8]}.{mac[8:]}" for mac in self.local_macs] + sorted(self.local_macs)
                self._local_mac_pattern = re.compile(r"(?<![0-9A-Fa-f.])(?:" + "|".join(map(re.escape, spellings))
                                                     + r")(?![0-9A-Fa-f]|\.[0-9A-Fa-f])", re.IGNORECASE)
            text = self._local_mac_pattern.sub(lambda match: self._dotted_or_bare(match.group(0)), text)
        return text

    def _dotted_or_bare(self, spelling: str) -> str:
        bare = self._mac_placeholder(spelling, "")
        return f"{bare[:4]}.{bare[4:8]}.{bare[8:]}" if "." in spelling else bare

    def _address(self, match: re.Match[str]) -> str:
        found = match.group(0)
        if match.group("mac"):
            if not re.sub(r"[:-]", "", found).strip("0fF"):  # 00:00:00:00:00:00, ff:ff:...: identify nothing
                return found
            return self._mac_placeholder(found, match.group("sep"))
        if match.group("guid"):
            digest = self._hash("guid", found.lower(), 16)
            return ":".join(digest[i:i + 4] for i in range(0, 16, 4))
        if match.group("ipv6"):
            return self._ipv6(found)
        try:
            address = ipaddress.IPv4Address(found)
        except ValueError:
            return found
        if address.compressed in self.local_addresses:
            return self._ip_placeholder(address)
        before, after = match.string[max(0, match.start() - 8):match.start()], match.string[match.end():match.end() + 9]
        version_like = before.endswith(("VERSION=", "==")) or re.match(r"-\d{1,6}(?![\d.])|[+~]", after)
        if version_like or _kept_address(address):
            return found
        return self._ip_placeholder(address)

    def _ipv6(self, candidate: str) -> str:
        # `fd00::2.` at the end of a sentence, `fe80::1:` before a port-like suffix: try shorter tails too.
        for cut in range(0, min(3, len(candidate))):
            head, tail = candidate[:len(candidate) - cut], candidate[len(candidate) - cut:]
            if tail.strip(":."):
                break
            try:
                address = ipaddress.IPv6Address(head)
            except ValueError:
                continue
            if _kept_address(address):
                return candidate
            return self._ip_placeholder(address) + tail
        return candidate

    def text(self, text: str) -> str:
        """A text file: secrets, serials, UUIDs and ids, names in host positions, names anywhere, addresses."""
        text = self.secrets(text)
        text = _GPU_UUID.sub(_stable_uuid, text)
        text = _UUID.sub(self._uuid, text)
        text = _CONTAINER_ID.sub(lambda m: self._hash("container", m.group(0), 64), text)
        text = _INSTANCE_ID.sub(lambda m: self.identifier(m.group(0)), text)
        text = _NAMED_ID.sub(lambda m: m.group(1) + self.identifier(m.group(2)), text)
        text = _HOME.sub(lambda m: f"{m.group('lead')}/{self.user_placeholder(m.group('user'))}"
                         if not re.fullmatch(r"user-[0-9a-f]{8}", m.group("user")) else m.group(0), text)
        text = _SECTION.sub(lambda m: m.group(0) if not _SERIAL_PATH.search(m.group("path")) else
                            f"==> {m.group('path')} <==\n{self.serial(m.group('value'))}", text)
        text = _SERIAL_WORD.sub(lambda m: m.group(1) + self.serial(m.group(2)), text)
        text = _SERIAL_XML.sub(lambda m: m.group(1) + self.serial(m.group(3)) + m.group(4), text)
        text = _SERIAL_TEXT.sub(lambda m: m.group(1) + self.serial(m.group(2)), text)
        text = _PCI_DSN.sub(lambda m: m.group(1) + "-".join(re.findall("..", self._hash("dsn", m.group(2).lower(),
                                                                                        16))), text)
        for pattern in _LOG_HOSTS:
            text = pattern.sub(lambda m: self._replace_group(m, "name", self._host_position(m.group("name"))), text)
        return self.addresses_in(self.names_in(text))

    def secrets(self, text: str) -> str:
        """Token-shaped values anywhere; values of secret-named `NAME=value` and `--secret-flag value`."""
        text = _PEM_PRIVATE_KEY.sub(SECRET_PLACEHOLDER, text)
        text = _SECRET_SHAPES.sub(SECRET_PLACEHOLDER, text)
        text = _URL_CREDENTIALS.sub(f"redacted:{SECRET_PLACEHOLDER}@", text)
        text = _BEARER.sub(lambda m: m.group(1) + SECRET_PLACEHOLDER, text)
        return _SECRET_FLAG.sub(_secret_assignment, _secret_values(text))

    def _aws_host_ip(self, match: re.Match[str]) -> str:
        try:
            address = ipaddress.IPv4Address(".".join(match.groups()))
        except ValueError:
            return match.group(0)
        return "ip-" + self._ip_placeholder(address).replace(".", "-")

    def _host_position(self, name: str) -> str:
        if name.lower().rstrip(".") in LOOPBACK_NAMES or name.startswith("host-") or _normal_address(name):
            return name  # an address in a host column is left to the address pass
        return self.host_placeholder(name)

    @staticmethod
    def _replace_group(match: re.Match[str], group: str, replacement: str) -> str:
        start, end = match.start(group) - match.start(), match.end(group) - match.start()
        return match.group(0)[:start] + replacement + match.group(0)[end:]

    def env(self, text: str) -> str:
        """env.txt: a host variable's value is replaced whole (short and generic-looking names too)."""
        def line(match: re.Match[str]) -> str:
            value = match.group("value")
            if is_secret_name(match.group("name")):
                value = SECRET_PLACEHOLDER if value.strip() else value
            elif _is_host_variable(match.group("name")):
                value = self.names_in(value, everywhere=True)  # addresses: in the whole-text pass below
            return f"{match.group('lead')}{match.group('name')}={value}"
        return self.text(_ENV_LINE.sub(line, _secret_continuations(_PEM_PRIVATE_KEY.sub(SECRET_PLACEHOLDER, text))))

    def xml(self, text: str) -> str:
        """XML: only the text between tags changes, so tag and attribute names survive any host name."""
        text = _SERIAL_XML.sub(lambda m: m.group(1) + self.serial(m.group(3)) + m.group(4), text)
        pieces = re.split(r"(<[^>]*>)", text)
        return "".join(piece if index % 2 else self.text(piece) for index, piece in enumerate(pieces))

    def json_value(self, value, key: str = ""):
        if isinstance(value, dict):
            return {name: self.json_value(item, name) for name, item in value.items()}
        if isinstance(value, list):
            return [self.json_value(item, key) for item in value]
        if isinstance(value, str):
            if is_secret_name(key) and value.strip():
                return SECRET_PLACEHOLDER
            if _ID_KEY.search(key) and value.strip() and not value.startswith(("GPU-", "MIG-")):
                return self.identifier(value.strip())
            if "serial" in key.lower():
                return self.serial(value)
            if key == "host":
                return self.addresses_in(self._host_position(value.strip())) if value.strip() else value
            return self.text(value)
        return value


def _secret_assignment(match: re.Match[str]) -> str:
    """A secret-named `--flag value` with its value replaced."""
    if not is_secret_name(match.group("name")):
        return match.group(0)
    start, end = match.start("value") - match.start(), match.end("value") - match.start()
    return match.group(0)[:start] + SECRET_PLACEHOLDER + match.group(0)[end:]


def _secret_values(text: str) -> str:
    """`text` with the value of every secret-named `NAME=value` replaced, those inside another value included: one
    scan that steps over each `NAME=` and reads a value only where the name is a secret's (linear time)."""
    pieces, position = [], 0
    for match in _SECRET_ASSIGNMENT.finditer(text):
        if match.start() < position or not is_secret_name(match.group("name")):
            continue
        value = _ASSIGNED_VALUE.match(text, match.end())
        if value is not None:
            pieces += [text[position:value.start()], SECRET_PLACEHOLDER]
            position = value.end()
    return "".join(pieces) + text[position:]


def _secret_continuations(text: str) -> str:
    """env.txt with each line that continues a secret-named variable's value (a line that is no new `NAME=`, or is
    base64 alone) replaced too: only the first line of a multi-line value matched `NAME=value`. A variable whose
    value assigns a secret counts as one."""
    lines = text.split("\n")
    secret = False
    for number, line in enumerate(lines):
        starts = _NEW_VARIABLE.match(line) is not None and _BASE64_LINE.fullmatch(line) is None
        if starts:  # a secret's value, or a value that holds one (SLURM_EXPORT_ENV=WANDB_API_KEY=…)
            secret = any(is_secret_name(match.group("name")) for match in _SECRET_ASSIGNMENT.finditer(line))
        elif secret and line.strip():
            lines[number] = SECRET_PLACEHOLDER
    return "\n".join(lines)


def is_secret_name(name: str) -> bool:
    """A variable, key or flag whose name says it holds a secret (HF_TOKEN, NVIDIA_API_KEY, GITHUB_PAT, --password)."""
    return bool(_SECRET_NAME.search(name.strip("-").replace("-", "_")))


def _is_host_variable(name: str) -> bool:
    return bool(_HOST_VARIABLE.search(name.upper())) and not name.upper().endswith(("_PATTERN", "_PORT"))


def _host_pieces(value: str) -> list[str]:
    """Split a variable's value into host names: commas outside brackets, spaces, `;`; drop scheme, user, port."""
    pieces, depth, current = [], 0, ""
    for char in value.strip().strip("'\""):
        depth += (char == "[") - (char == "]")
        if depth <= 0 and (char in ",; \t"):
            pieces.append(current)
            current = ""
        else:
            current += char
    pieces.append(current)
    hosts = []
    for piece in pieces:
        piece = re.sub(r"^[A-Za-z][\w+.-]*://", "", piece.strip())
        piece = piece.split("@", 1)[-1].split("/", 1)[0]
        if piece.startswith("[") and "]" in piece and ":" in piece.split("]")[0]:  # [fd00::2]:29500
            continue
        if piece.count(":") == 1:
            piece = piece.split(":", 1)[0]
        if piece:
            hosts.append(piece)
    return hosts


def _kept_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Addresses that identify nothing (loopback, unspecified, multicast, masks) or are placeholders already."""
    if address.is_loopback or address.is_unspecified or address.is_multicast:
        return True
    if address.version == 4:
        return address.packed[0] in (0, 240, 255)
    return address in _IPV6_PLACEHOLDERS


def _normal_address(text: str) -> str | None:
    try:
        return ipaddress.ip_address(text.split("%", 1)[0].strip()).compressed
    except ValueError:
        return None


def _normal_mac(text: str) -> str | None:
    bare = re.sub(r"[:.-]", "", text).lower()
    return bare if re.fullmatch(r"[0-9a-f]{12}", bare) else None


def _fqdn(timeout_s: float = FQDN_TIMEOUT_S) -> str:
    """socket.getfqdn() asks the resolver, which may hang: give it a few seconds, in a daemon thread."""
    found: list[str] = []
    worker = threading.Thread(target=lambda: found.append(socket.getfqdn()), daemon=True)
    worker.start()
    worker.join(timeout_s)
    return found[0] if found else ""


def local_identity() -> tuple[set[str], set[str], set[str]]:
    """This machine's host names, IP addresses and MAC addresses."""
    names = {socket.gethostname(), os.uname().nodename, _fqdn()}
    addresses: set[str] = set()
    macs: set[str] = set()
    try:
        import psutil
        for entries in psutil.net_if_addrs().values():
            for entry in entries:
                if entry.family in (socket.AF_INET, socket.AF_INET6):
                    addresses.add(entry.address)
                elif entry.address and _normal_mac(entry.address):
                    macs.add(entry.address)
    except Exception:  # psutil missing or the interface list unreadable: names still go
        pass
    return {name for name in names if name}, addresses, macs


def local_users() -> set[str]:
    """This process's user name and the owner of its home folder (root and generic names identify nobody)."""
    users = {os.environ.get(name, "") for name in ("USER", "LOGNAME", "SUDO_USER")}
    try:
        import pwd
        users.add(pwd.getpwuid(os.getuid()).pw_name)
    except (ImportError, KeyError, OSError):
        pass
    try:
        home = Path.home()
        users.add(home.name if str(home).startswith(("/home/", "/Users/")) else "")
    except (RuntimeError, KeyError, OSError):
        pass
    return {user for user in users if user and user not in GENERIC_USERS}


def product_words(files: dict[str, str]) -> set[str]:
    """Words of the GPUs' product names (NVIDIA, H200, SXM5): a host named like them keeps them in free text."""
    products: list[str] = []
    for text in files.values():
        for pattern in _PRODUCT_NAMES:
            products += pattern.findall(text[:4_000_000])
    try:
        products += [gpu.get("name", "") for gpu in json.loads(files.get("nvml.json", "{}")).get("gpus", [])
                     if isinstance(gpu, dict) and isinstance(gpu.get("name"), str)]
    except (ValueError, AttributeError):
        pass
    return {word.lower() for product in products for word in product.split()}


def redactor_for(files: dict[str, str], key: bytes | None = None, names: Iterable[str] = (),
                 addresses: Iterable[str] = (), macs: Iterable[str] = (), users: Iterable[str] = ()) -> Redactor:
    """Every name and address the bundle itself reveals, plus the ones given (this machine's)."""
    gpu_uuids = {"".join(match.group(2).split("-")) for text in files.values() for match in _GPU_UUID.finditer(text)}
    redactor = Redactor(redaction_key() if key is None else key, names, addresses, macs, product_words(files),
                        users, gpu_uuids)
    try:
        manifest = json.loads(files.get("manifest.json", "{}"))
        if isinstance(manifest, dict) and isinstance(manifest.get("host"), str):
            redactor.add_name(manifest["host"])
    except ValueError:
        pass
    for match in _ENV_LINE.finditer(files.get("env.txt", "")):
        if _is_host_variable(match.group("name")):
            redactor.add_host_value(match.group("value"))
        elif _USER_VARIABLE.search(match.group("name").upper()):
            redactor.add_user(match.group("value"))
    for text in files.values():
        for match in _HOME.finditer(text):
            redactor.add_user(match.group("user"))
    for text in files.values():
        for pattern in _LOG_HOSTS:
            for match in pattern.finditer(text):
                redactor.add_name(match.group("name"))
    return redactor


def redact_text(text: str, hostnames: Iterable[str] = (), key: bytes | None = None) -> str:
    """One text with the given host names (and any address) replaced; see redact_bundle for whole bundles."""
    return Redactor(redaction_key() if key is None else key, hostnames).text(text)


def redact_bundle(files: dict[str, str], key: bytes | None = None, local: bool = True) -> dict[str, str]:
    """The bundle with names, addresses, serials and UUIDs replaced (module docstring); file names unchanged."""
    names, addresses, macs = local_identity() if local else (set(), set(), set())
    redactor = redactor_for(files, key, names, addresses, macs, local_users() if local else ())
    # Names first met in host positions of manifest/env are in place before any file is rewritten.
    redacted = {}
    for name, text in files.items():
        redacted[name] = _redact_file(redactor, name, text)
    return redacted


def _redact_file(redactor: Redactor, name: str, text: str) -> str:
    stripped = text.lstrip()
    if name.endswith(".json") or stripped.startswith(("{", "[")):
        try:
            document = json.loads(text)
        except ValueError:
            document = None
        if isinstance(document, (dict, list)):
            redacted = redactor.json_value(document)
            return text if redacted == document else json.dumps(redacted, indent=1)
    if name.endswith(".xml") or stripped.startswith("<?xml") or "<nvidia_smi_log" in stripped[:4096]:
        return redactor.xml(text)
    if name == "env.txt":
        return redactor.env(text)
    return redactor.text(text)
