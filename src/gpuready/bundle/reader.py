"""Read a bundle folder, a .tar.gz, or one pasted tool output into {file name: text}.

Files keep their names; build_facts reads a bundle name by its name and any other file by its content.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from gpuready.bundle.layout import BUNDLE_FILES

MAX_FILE_BYTES = 64 * 1024 * 1024
# A bundle holds a few dozen files; a folder with far more is not a bundle (the first ones are read).
MAX_FILES = 256


class BundleError(Exception):
    """The bundle as a whole cannot be read (missing, not a folder or an archive)."""


def read_bundle(path: str | Path) -> dict[str, str]:
    path = Path(path)
    if not path.exists():
        raise BundleError(f"bundle {path} does not exist")
    if path.is_dir():
        names = sorted((entry.name for entry in path.iterdir() if not entry.name.startswith(".")),
                       key=lambda name: (name not in BUNDLE_FILES, name))[:MAX_FILES]
        return {name: _decode(file.read_bytes()[:MAX_FILE_BYTES]) for name in names
                if (file := path / name).is_file()}
    try:
        is_archive = tarfile.is_tarfile(path)
    except OSError as error:
        raise BundleError(f"{path} cannot be read ({error.strerror or error})") from None
    if not is_archive and not path.name.endswith((".tar", ".tar.gz", ".tgz")):
        # One tool output on its own (`topo.txt` pasted from a ticket): read by its content.
        with path.open("rb") as single:
            return {path.name: _decode(single.read(MAX_FILE_BYTES))}
    try:
        with tarfile.open(path, "r:*") as archive:
            files: dict[str, str] = {}
            for member in archive.getmembers():
                name = Path(member.name).name
                if member.isfile() and not name.startswith(".") and member.size <= MAX_FILE_BYTES \
                        and len(files) < MAX_FILES:
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        files[name] = _decode(extracted.read())
            return files
    except (tarfile.TarError, OSError, EOFError) as error:
        raise BundleError(f"{path} is neither a bundle folder nor a readable .tar.gz ({error})") from None


def _decode(data: bytes) -> str:
    # Files pasted from Windows editors may carry a BOM or UTF-16.
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")
