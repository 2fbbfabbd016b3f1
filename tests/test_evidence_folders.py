"""evidence/folders.py: the one walk over folders gpuready is given, in either order, never through a link."""

from __future__ import annotations

import os

from gpuready.evidence.folders import walk_folder


def _tree(root):
    for folder in ("a", "a/deep", "c"):
        (root / folder).mkdir(parents=True)
    for name in ("b.txt", "a/x.txt", "a/deep/y.txt", "c/z.txt", "d.txt"):
        (root / name).write_text(name)
    (root / "link-to-folder").symlink_to(root / "c")
    (root / "a" / "link-to-file").symlink_to("/etc/hostname")
    return root


def test_name_order_walks_each_subfolder_where_its_name_falls(tmp_path):
    walked = [item.relative for item in walk_folder(_tree(tmp_path))]
    assert walked == ["a/deep/y.txt", "a/link-to-file", "a/x.txt", "b.txt", "c/z.txt", "d.txt", "link-to-folder"]


def test_files_first_is_the_order_of_os_walk(tmp_path):
    root = _tree(tmp_path)
    expected = []
    for folder, folders, names in os.walk(root):
        folders.sort()
        expected += [os.path.relpath(os.path.join(folder, name), root) for name in sorted(names)]
        expected += [os.path.relpath(os.path.join(folder, name), root) for name in folders
                     if os.path.islink(os.path.join(folder, name))]  # os.walk lists a link to a folder as a folder
    walked = [item.relative for item in walk_folder(root, files_first=True)]
    assert sorted(walked) == sorted(expected)
    assert walked == ["b.txt", "d.txt", "link-to-folder", "a/link-to-file", "a/x.txt", "a/deep/y.txt", "c/z.txt"]


def test_descend_decides_which_folders_are_walked_and_depth_counts_them(tmp_path):
    asked = []

    def descend(item):
        asked.append((item.relative, item.depth))
        return item.depth < 1

    walked = [(item.relative, item.depth) for item in walk_folder(_tree(tmp_path), descend=descend)]
    assert asked == [("a", 0), ("a/deep", 1), ("c", 0)]
    assert walked == [("a/link-to-file", 1), ("a/x.txt", 1), ("b.txt", 0), ("c/z.txt", 1), ("d.txt", 0),
                      ("link-to-folder", 0)]


def test_a_folder_that_cannot_be_listed_is_said_not_raised(tmp_path):
    errors = []
    walked = list(walk_folder(tmp_path / "gone", on_error=lambda error, relative: errors.append((relative, error))))
    assert walked == [] and [(relative, type(error)) for relative, error in errors] == [("", FileNotFoundError)]
    assert list(walk_folder(tmp_path / "gone")) == []
