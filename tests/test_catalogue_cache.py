"""The parsed message catalogue is kept in the user's cache folder (i18n.catalogue): the same texts as Babel's parse
of the PO files, read again after any PO file changes, and never an error where the cache is broken or read-only."""

import os
import shutil

import pytest

from gpuready import i18n

parse_and_cache = i18n.catalogue.__wrapped__  # without the process's own lru_cache


@pytest.fixture()
def po_copy(tmp_path, monkeypatch):
    """A copy of the English PO files, and a cache folder, both in tmp_path."""
    folder = tmp_path / "po"
    shutil.copytree(i18n.LOCALE_DIR / "en" / "LC_MESSAGES", folder)
    monkeypatch.setattr(i18n, "catalogue_paths", lambda lang: sorted(folder.glob("*.po")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return folder


def test_the_cached_catalogue_is_babels_parse_of_every_file(po_copy, tmp_path):
    parsed = i18n._parse(sorted(po_copy.glob("*.po")))
    assert parse_and_cache("en") == parsed  # first run: parsed, then written
    assert len(list((tmp_path / "cache" / "gpuready").glob("catalogue-en-*.json"))) == 1
    assert parse_and_cache("en") == parsed  # second run: from the cache
    assert parsed["label.ready"] == "READY"


def test_an_edited_po_file_is_read_again(po_copy, tmp_path):
    parse_and_cache("en")
    gpuready_po = po_copy / "gpuready.po"
    gpuready_po.write_text(gpuready_po.read_text().replace('msgstr "READY"', 'msgstr "BEREIT"', 1))
    os.utime(gpuready_po, ns=(1, 2))  # another time as well as another size
    assert parse_and_cache("en")["label.ready"] == "BEREIT"


def test_a_broken_cache_file_is_parsed_over(po_copy, tmp_path):
    parse_and_cache("en")
    (cached,) = (tmp_path / "cache" / "gpuready").glob("catalogue-en-*.json")
    cached.write_text('{"label.ready": ')
    assert parse_and_cache("en")["label.ready"] == "READY"


def test_a_read_only_cache_is_no_error(po_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    (tmp_path / "not-a-folder").write_text("a file where the cache folder would be")
    assert parse_and_cache("en")["label.ready"] == "READY"
