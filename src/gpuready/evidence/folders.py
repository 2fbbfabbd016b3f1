"""Walking a folder tree someone named: the one walk of gpuready over folders it is given (evidence for `diagnose`,
report folders for `fleet`, `diagnose net --shared-path`, `bench --data-path`). Links are never followed, each folder
is listed in name order, and a folder that cannot be listed is said, never a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator


@dataclass(frozen=True, kw_only=True)
class TreeEntry:
    """One entry met in the walk."""

    entry: os.DirEntry
    """The entry as the folder listed it (its `path`, `name`, and `is_symlink()` … without a second look)."""
    relative: str
    """Its path below the folder walked, parts joined with `/`."""
    depth: int
    """How many folders down it is: 0 for an entry of the folder walked itself."""


def walk_folder(folder: str | os.PathLike[str], *, files_first: bool = False,
                descend: Callable[[TreeEntry], bool] | None = None,
                on_error: Callable[[OSError, str], None] | None = None) -> Iterator[TreeEntry]:
    """Every entry under `folder` that is not itself a folder: files, links (never followed, a link to a folder
    included) and devices. Each folder's entries come in name order; a subfolder is walked where `descend` says so
    (always, without it), at its place in that order, or with `files_first` after the folder's other entries (the
    order of `os.walk`). `on_error(error, relative)`: a folder that cannot be listed (`relative` is "" for `folder`);
    without it such a folder is passed over."""
    listings = [_listing(Path(folder), "", 0, files_first, on_error)]  # one per folder being walked, deepest last
    while listings:
        item = next(listings[-1], None)
        if item is None:
            listings.pop()
        elif not _is_folder(item.entry):
            yield item
        elif descend is None or descend(item):
            listings.append(_listing(Path(item.entry.path), item.relative, item.depth + 1, files_first, on_error))


def _listing(folder: Path, relative: str, depth: int, files_first: bool,
             on_error: Callable[[OSError, str], None] | None) -> Iterator[TreeEntry]:
    """The folder's entries in name order (with `files_first`, its subfolders after the rest); listed when first
    asked for, as a recursive walk would."""
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        if on_error is not None:
            on_error(error, relative)
        return
    items = [TreeEntry(entry=entry, relative=f"{relative}/{entry.name}" if relative else entry.name, depth=depth)
             for entry in entries]
    if files_first:
        items.sort(key=lambda item: _is_folder(item.entry))  # stable: name order within each part
    yield from items


def _is_folder(entry: os.DirEntry) -> bool:
    """A folder itself, not a link to one (an entry that cannot be looked at is not one)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False
