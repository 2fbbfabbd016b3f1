"""Read a bundle folder or .tar.gz into {file name: text}."""

from __future__ import annotations

import tarfile
from pathlib import Path

from gpuready.bundle.layout import BUNDLE_FILES

MAX_FILE_BYTES = 64 * 1024 * 1024


class BundleError(Exception):
    """The bundle as a whole cannot be read (missing, not a folder or an archive)."""


def read_bundle(path: str | Path) -> dict[str, str]:
    path = Path(path)
    if not path.exists():
        raise BundleError(f"bundle {path} does not exist")
    if path.is_dir():
        return {name: _decode(file.read_bytes()[:MAX_FILE_BYTES]) for name in BUNDLE_FILES
                if (file := path / name).is_file()}
    try:
        with tarfile.open(path, "r:*") as archive:
            files: dict[str, str] = {}
            for member in archive.getmembers():
                name = Path(member.name).name
                if member.isfile() and name in BUNDLE_FILES and member.size <= MAX_FILE_BYTES:
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
