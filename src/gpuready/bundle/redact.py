"""`collect --redact`: replace serials, UUIDs, host names and addresses before a bundle leaves the site.

UUIDs and serials become stable hashes of the same shape, so GPUs keep their identity across
files (and across bundles of the same machine) without revealing it.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket

_GPU_UUID = re.compile(r"\b(GPU|MIG)-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\b")
_SERIAL_XML = re.compile(r"(<serial>)([^<]+)(</serial>)")
_SERIAL_TEXT = re.compile(r"^(\s*Serial Number\s*:\s*)(\S+)\s*$", re.MULTILINE)
_IPV4 = re.compile(r"\b(?!127\.0\.0\.1\b)(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b")
_IPV6 = re.compile(r"\b(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}\b")
_MAC = re.compile(r"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b")


def _digest(value: str, length: int) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:length]


def _stable_uuid(match: re.Match[str]) -> str:
    digest = _digest(match.group(2).lower(), 32)
    return f"{match.group(1)}-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _serial(value: str) -> str:
    return "redacted-" + _digest(value, 10) if value.strip() not in ("N/A", "") else value


def redact_text(text: str, hostnames: set[str]) -> str:
    text = _GPU_UUID.sub(_stable_uuid, text)
    text = _SERIAL_XML.sub(lambda m: m.group(1) + _serial(m.group(2)) + m.group(3), text)
    text = _SERIAL_TEXT.sub(lambda m: m.group(1) + _serial(m.group(2)), text)
    text = _MAC.sub("xx:xx:xx:xx:xx:xx", text)
    text = _IPV4.sub(lambda m: m.group(0) if m.group(0).startswith("0.") else "x.x.x.x", text)
    text = _IPV6.sub("x:x:x:x", text)
    for name in sorted(hostnames, key=len, reverse=True):
        if len(name) >= 3:
            text = re.sub(rf"\b{re.escape(name)}\b", "host-" + _digest(name, 6), text)
    return text


def redact_bundle(files: dict[str, str]) -> dict[str, str]:
    hostnames = {socket.gethostname(), socket.gethostname().split(".")[0]}
    manifest = files.get("manifest.json")
    if manifest:
        try:
            hostnames.add(json.loads(manifest).get("host", ""))
        except json.JSONDecodeError:
            pass
    redacted = {}
    for name, text in files.items():
        redacted[name] = redact_text(text, {name for name in hostnames if name})
        if name == "nvml.json":
            redacted[name] = _redact_nvml_serials(redacted[name])
    return redacted


def _redact_nvml_serials(text: str) -> str:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return text
    for gpu in document.get("gpus", []):
        if isinstance(gpu.get("serial"), str):
            gpu["serial"] = _serial(gpu["serial"])
    return json.dumps(document, indent=1)
