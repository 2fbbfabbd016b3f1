"""`gpuready collect`: write this machine's raw evidence as a support bundle (a folder or a .tar.gz)."""

from __future__ import annotations

from pathlib import Path


def run_collect(out: Path, *, as_tar: bool, force: bool, fast: bool, redact: bool) -> str:
    """Collect, optionally redact, write; the sentence to print. OutputError: a wrong --out (checked before the slow
    part, so a wrong --out costs nothing) or a bundle that could not be written."""
    from gpuready.bundle.collect import OutputError, collect, plan_output, write_bundle
    from gpuready.bundle.redact import redact_bundle

    plan_output(out, as_tar=as_tar, force=force)
    files, manifest = collect(with_torch=not fast)
    if redact:
        files = redact_bundle(files)
    try:
        target = write_bundle(files, out, as_tar=as_tar, force=force)
    except OSError as error:
        raise OutputError(f"cannot write the bundle to {out}: {error.strerror or error}") from None
    missing = [name for name, entry in manifest["files"].items() if not entry["collected"]]
    return (f"wrote {len(files)} files to {target}"
            + (f"; not collected: {', '.join(missing)} (manifest.json says why)" if missing else ""))
