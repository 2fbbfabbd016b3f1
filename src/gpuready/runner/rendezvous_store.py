"""The c10d rendezvous store of a multi-node run, hosted by gpuready on the endpoint's address only (torchrun
itself would listen on every interface)."""

from __future__ import annotations

import errno
import ipaddress
import socket

from gpuready.i18n import Sentence, said, sentence
from gpuready.options import UsageError
from gpuready.runner.local import listening_store
from gpuready.runner.progress import RDZV_BIND_KEY


def host_rendezvous_store(endpoint: str, timeout_s: float) -> tuple[object | None, bool | None, Sentence]:
    """Host the c10d rendezvous store where the endpoint is this machine, listening on that address only.

    Returns (the store or None, what torchrun's `is_host` should be: False where another process hosts it,
    None to let torchrun decide, and the sentence to log: a `Sentence`). torchrun itself would listen on every
    interface.
    """
    host, _, port_text = endpoint.rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise UsageError(said("error.rdzv.not_host_port", endpoint=repr(endpoint)))
    port = int(port_text)
    try:
        addresses = [info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
    except (socket.gaierror, UnicodeError) as error:
        raise UsageError(said("error.rdzv.unresolved", endpoint=endpoint, host=host,
                              reason=str(getattr(error, "strerror", None) or error))) from None
    address = addresses[0]
    literal = _is_ip_literal(host)
    if not literal and host != "localhost" and all(_is_loopback(item) for item in addresses):
        # /etc/hosts often maps the machine's own name to 127.0.1.1: the other nodes could not reach that
        return None, None, sentence("runner.rdzv.loopback", host=host, address=address)
    try:
        store = listening_store(address, port, timeout_s)
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:
            return None, False, sentence("runner.rdzv.elsewhere", host=host)
        if error.errno == errno.EADDRINUSE:
            return None, False, sentence("runner.rdzv.in_use", address=address, port=port)
        raise UsageError(said("error.rdzv.cannot_listen", endpoint=endpoint, address=address, port=port,
                              reason=str(error.strerror or error))) from None
    shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    where = f"{shown} only (hosted by gpuready on {socket.gethostname()})"  # the report's facts keep it in English
    store.set(RDZV_BIND_KEY, where)
    return store, False, sentence("runner.rdzv.hosting", address=shown, host=socket.gethostname())


def _is_ip_literal(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False
