"""Walking what `diagnose` is given: files, folders (to limits.max_depth), archives and the archives and compressed
files inside them, each member named as the user would write it (`ticket/node2/out`, `logs.tar.gz/b/rank0.log`).

The walk decides what is read and names what is not (links, devices, names that leave an archive, what lies past a
limit); reading a file is its sink's (evidence/stream.py `Scanner`: `add_stream`, `note`, `note_last`, `files`).
"""

from __future__ import annotations

import dataclasses
import functools
import tarfile
from pathlib import Path
from typing import BinaryIO, Protocol

from gpuready.evidence.archive import (READ_ERRORS, CappedReader, MemberWalk, format_of, inflated_name, member_parts,
                                       nested_format, open_compressed, open_tar, open_tar_stream)
from gpuready.evidence.files import open_regular
from gpuready.evidence.folders import TreeEntry, walk_folder
from gpuready.evidence.limits import InputLimits, size_text
from gpuready.facts.bad_input import Sentence, sentence
from gpuready.i18n import Said, said


class InputError(Exception):
    """A path given on the command line cannot be read at all (exit 2, one sentence): a `Said` (`diagnose.input.*`),
    whose English `str()` gives."""

    def __init__(self, sentence: Said):
        super().__init__(sentence)
        self.sentence = sentence

    def __str__(self) -> str:
        return self.sentence.english()


class Sink(Protocol):
    """Where the walk hands each file it reads, and the name of each it does not."""

    files: list

    def note(self, name: str, note: Sentence) -> None: ...

    def note_last(self, note: Sentence) -> None: ...

    def add_stream(self, name: str, raw: BinaryIO, path: Path | None = None, *, base: str | None = None,
                   size: int | None = None) -> None: ...


class InputWalk:
    """One walk over the inputs of a run, within `limits` (files, depth, archive members and inflated bytes)."""

    def __init__(self, sink: Sink, limits: InputLimits) -> None:
        self.sink, self.limits = sink, limits

    def add(self, path: Path) -> None:
        """A file, a folder (walked) or an archive (its members); InputError where it cannot be read at all."""
        if path.is_dir():
            self._folder(path, path.name or str(path))
        elif path.is_file():
            self._file(path, str(path), given=True)
        elif path.exists():
            self.sink.note(str(path), _note("reader.note.special"))
        else:
            raise InputError(said("diagnose.input.missing", path=str(path)))

    def _folder(self, folder: Path, label: str) -> None:
        """Every file under the folder, in name order, to limits.max_depth folders down; links are named, not
        followed."""
        def enter(item: TreeEntry) -> bool:
            name = f"{label}/{item.relative}"
            if self._at_max_files(name):
                return False
            if item.depth + 1 >= self.limits.max_depth:
                self.sink.note(name, _note("reader.note.too_deep", depth=self.limits.max_depth))
                return False
            return True

        def unlisted(error: OSError, relative: str) -> None:
            self.sink.note(f"{label}/{relative}" if relative else label,
                           _note("reader.note.cannot_list", error=error.strerror or str(error)))

        for item in walk_folder(folder, descend=enter, on_error=unlisted):
            name = f"{label}/{item.relative}"
            if self._at_max_files(name):
                continue
            if item.entry.is_symlink():
                self.sink.note(name, _note("reader.note.link"))
            elif item.entry.is_file(follow_symlinks=False):
                self._file(Path(item.entry.path), name, given=False, depth=item.depth)

    def _at_max_files(self, name: str) -> bool:
        """Whether limits.max_files inputs are listed already: then `name` is counted, not read."""
        if len(self.sink.files) < self.limits.max_files:
            return False
        self.sink.note(name, _note("reader.note.max_files", count=self.limits.max_files))
        return True

    def _file(self, path: Path, name: str, *, given: bool, depth: int = 0) -> None:
        """One file: an archive (its members), a compressed file (inflated as it is read) or a text file."""
        try:
            file_format = format_of(path)
            if file_format is not None and file_format.startswith("tar"):
                self._archive(open_tar(path, file_format), path, name, given=given, depth=depth)
            elif file_format is not None:
                self._compressed(open_compressed(path, file_format), name, inflated_name(path),
                                 self.limits.max_archive_bytes)
            else:
                raw, size = open_regular(path, follow=given)
                with raw:
                    self.sink.add_stream(name, raw, path, size=size)
        except READ_ERRORS as error:
            if given and not self.sink.files:
                raise InputError(said("diagnose.input.unreadable", path=str(path),
                                      reason=str(getattr(error, "strerror", None) or error))) from None
            self.sink.note(name, _note("reader.unreadable.error", error=str(getattr(error, "strerror", None) or error)))

    def _compressed(self, raw: BinaryIO, name: str, base: str, budget: int) -> None:
        """One compressed file, inflated as it is read, at most `budget` bytes."""
        with CappedReader(raw, budget) as capped:
            self.sink.add_stream(name, capped, base=base)
            if capped.capped:
                self.sink.note_last(_note("reader.note.compressed_cap", size=size_text(budget)))

    def _archive(self, archive: tarfile.TarFile, path: Path | None, name: str, *, given: bool, depth: int,
                 limits: InputLimits | None = None) -> int:
        """Every regular member, streamed (an archive or compressed file among them, walked in turn); names that would
        leave the archive, links and devices are named, not read; what is inflated, and how many members are looked
        at, is bounded. Returns the bytes inflated. `path`: the archive given on the command line, else None."""
        with archive:
            walk = MemberWalk(archive, limits or self.limits)
            read_any = False
            for member in walk:
                member_name = f"{name}/{member.name}"
                if member.isdir():
                    continue
                if member_parts(member.name) is None:
                    self.sink.note(member_name, _note("reader.note.unsafe_name"))
                elif not member.isreg():
                    self.sink.note(member_name, _note("reader.note.archive_special"))
                elif member.name in walk.budget_of or len(self.sink.files) >= self.limits.max_files:
                    # stop here: walking on would inflate what follows (a gzip bomb) just to skip it
                    self.sink.note(member_name, _note(
                        "reader.note.archive_stopped", size=size_text(walk.limits.max_archive_bytes),
                        count=self.limits.max_files))
                    break
                else:
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        with extracted:
                            self._member(member_name, extracted, member.size, walk, depth)
                        read_any = True
            self._walked(walk, path, name, given=given, read_any=read_any)
        return walk.inflated

    def _member(self, name: str, raw: BinaryIO, size: int, walk: MemberWalk, depth: int) -> None:
        """One regular member: read, or walked where it is an archive or compressed file itself (within what is left
        of the archive's budget, and of limits.max_depth)."""
        try:
            member_format, content = nested_format(raw)
        except READ_ERRORS as error:
            self.sink.note(name, _note("reader.unreadable.error", error=str(error)))
            return
        left = max(0, walk.limits.max_archive_bytes - walk.inflated)
        if member_format is None:
            self.sink.add_stream(name, content, size=size)
        elif depth + 1 >= self.limits.max_depth:
            self.sink.note(name, _note("reader.note.too_deep", depth=self.limits.max_depth))
        elif member_format.startswith("tar"):
            inner = dataclasses.replace(walk.limits, max_archive_bytes=left)
            try:
                walk.inflated += self._archive(open_tar_stream(content), None, name, given=False, depth=depth + 1,
                                               limits=inner)
            except READ_ERRORS as error:
                self.sink.note(name, _note("reader.note.damaged", damage=str(error)))
        else:
            self._compressed(content, name, inflated_name(Path(name)), left)

    def _walked(self, walk: MemberWalk, path: Path | None, name: str, *, given: bool, read_any: bool) -> None:
        """Why the walk of an archive stopped early, where it did; an input error where the archive given on the
        command line gave nothing to read."""
        if walk.stopped_at and not walk.budget_of:
            self.sink.note(name, sentence("facts.state.read_in_part", what=said(
                "reader.partial.archive_stopped", why=walk.stopped_at, member=walk.last_name)))
        if walk.damage:
            if given and not walk.count:
                raise InputError(said("diagnose.input.damaged", path=str(path), damage=walk.damage))
            self.sink.note(name, _note("reader.note.damaged", damage=walk.damage))
        elif given and not walk.count:
            raise InputError(said("diagnose.input.empty_archive", path=str(path)))
        if given and not read_any and not walk.damage:
            raise InputError(said("diagnose.input.nothing_readable" + (".first" if walk.stopped_at else ""),
                                  path=str(path), count=walk.count))


def _note(msg_id: str, **values: object) -> Sentence:
    """A note about an input; one object for the inputs it says alike, word for word (75,000 links in an archive:
    10,000 are listed)."""
    return _note_of(msg_id, tuple(values.items()))


@functools.lru_cache(maxsize=256)
def _note_of(msg_id: str, values: tuple[tuple[str, object], ...]) -> Sentence:
    return sentence(msg_id, **dict(values))
