import io
import tarfile
from pathlib import Path

from gpuready.evidence.limits import DEFAULT_LIMITS
from gpuready.checks.registry import CheckOptions
from gpuready.evidence.build import build_facts
from gpuready.evidence.reader import read_bundle
from gpuready.pipeline import check_report


def report_for(bundle: Path, limits=DEFAULT_LIMITS, **options):
    return check_report(build_facts(read_bundle(bundle, limits)), CheckOptions(**options))


def judged(*readers, host: str = "ctx", facts=None, **options):
    """What the registry's checks of logs find in what `readers` (facts/*_reader.py, fed already) saw, as `diagnose`
    judges them: the host named `host`, beside the machine's `facts` where given, with CheckOptions(**options)."""
    from gpuready.facts.log_facts import log_facts
    from gpuready.pipeline import log_findings
    return log_findings(log_facts(list(readers)), host=host, facts=facts, options=CheckOptions(**options))


def findings(*paths: Path):
    """What `gpuready diagnose PATHS…` finds."""
    from gpuready.verbs.diagnose.run import diagnose
    return diagnose(list(paths)).findings


def of(found, check_id):
    return [f for f in found if f.check_id == check_id]


def only(found, check_id):
    matches = of(found, check_id)
    assert len(matches) == 1, [(f.check_id, f.status.value) for f in found]
    return matches[0]


def statuses(report, check_id):
    return [finding.status.value for finding in report.findings if finding.check_id == check_id]


def messages(report, check_id):
    return " | ".join(finding.message for finding in report.findings if finding.check_id == check_id)


class FakeStore:
    """A dict with the TCPStore calls the runner uses (set, get, check)."""

    def __init__(self):
        self.values = {}

    def set(self, key, value):
        self.values[key] = value

    def get(self, key):
        return str(self.values[key]).encode()

    def check(self, keys):
        return all(key in self.values for key in keys)


def tar_bytes(members: list[tuple[str, object]]) -> bytes:
    """A plain tar; members: (name, bytes) for a file, (name, None) for a folder, (name, (type, target)) for a link."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            elif isinstance(data, tuple):
                info.type, info.linkname = data
                archive.addfile(info)
            else:
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
