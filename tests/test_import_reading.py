"""Reading an import's notes: by the size ``stat`` gives without trusting it, folder after
folder through one descriptor without following links, and their index text as it always was."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noteloom import db
from noteloom.errors import ImportExportError
from noteloom.interop.files import FolderFiles, NotRegular
from noteloom.interop.limits import Budget, ImportLimits


@pytest.mark.parametrize("size", [None, 0, 5, 99, 100, 101, 10_000])
def test_a_note_reads_whole_whatever_its_stat_said(size: int | None) -> None:
    data = bytes(range(256)) * 3 + b"tail"
    budget = Budget(ImportLimits())
    assert budget.read_note(io.BufferedReader(io.BytesIO(data)), "n.md", size=size) == data
    assert budget.total == len(data)


@pytest.mark.parametrize("size", [None, 10, 50, 1000])
def test_the_note_cap_holds_whatever_its_stat_said(size: int | None) -> None:
    budget = Budget(ImportLimits(max_note_bytes=50))
    assert budget.read_note(io.BytesIO(b"x" * 50), "ok.md", size=size) == b"x" * 50
    with pytest.raises(ImportExportError, match="larger than 50 bytes"):
        budget.read_note(io.BytesIO(b"x" * 51), "big.md", size=size)


def test_folder_files_open_folder_after_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "top.md").write_text("top")
    (tmp_path / "a" / "one.md").write_text("one")
    (tmp_path / "a" / "b" / "two.md").write_text("two")
    files = FolderFiles(tmp_path)
    try:
        for folder, name, text in [("", "top.md", b"top"), ("a", "one.md", b"one"), ("a/b", "two.md", b"two"),
                                   ("a/b", "two.md", b"two"), ("a", "one.md", b"one")]:
            opened = files.open(folder, name)
            with opened.file as f:
                assert f.read() == text and opened.size == len(text)
        with pytest.raises(FileNotFoundError):
            files.open("a", "missing.md")
        with pytest.raises(FileNotFoundError):
            files.open("../a", "one.md")
    finally:
        files.close()


def test_folder_files_follow_no_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret")
    root = tmp_path / "vault"
    (root / "real").mkdir(parents=True)
    (root / "real" / "n.md").write_text("n")
    os.symlink(outside, root / "linked")
    os.symlink(outside / "secret.md", root / "real" / "l.md")
    files = FolderFiles(root)
    try:
        with pytest.raises(NotRegular):
            files.open("linked", "secret.md")
        with pytest.raises(NotRegular):
            files.open("real", "l.md")
        with files.open("real", "n.md").file as f:
            assert f.read() == b"n"
    finally:
        files.close()


# -- the index text the reading thread works out ------------------------------------------------


def _reference_index_text(text: str) -> str:
    """``db.index_text`` as it was written first: every CJK run scanned for, pairs by slicing."""
    def pairs(m: re.Match[str]) -> str:
        run = m.group()
        return " " + " ".join(run[i : i + 2] for i in range(len(run))) + " "

    return text if text.isascii() else re.sub(f"[{db.CJK_CHARS}]+", pairs, text)


def _edges() -> list[str]:
    """The first and last character of every CJK range, and their neighbours outside it."""
    out: list[str] = []
    for lo, hi in re.findall(r"(.)-(.)", db.CJK_CHARS, flags=re.S):
        out += [chr(ord(lo) - 1), lo, chr(ord(lo) + 1), chr(ord(hi) - 1), hi, chr(ord(hi) + 1)]
    return out


_TEXT = st.lists(st.sampled_from([*_edges(), "a", " ", "\n", "é", "—", "😀", "\ud800", "中", "文"]), max_size=30)


@settings(max_examples=400, deadline=None)
@given(_TEXT.map("".join))
def test_index_text_is_what_it_always_was(text: str) -> None:
    assert db.index_text(text) == _reference_index_text(text)


def test_every_cjk_character_is_seen_by_the_quick_check() -> None:
    for lo, hi in re.findall(r"(.)-(.)", db.CJK_CHARS, flags=re.S):
        chars = "".join(chr(c) for c in range(ord(lo), ord(hi) + 1))
        assert db.index_text("é" + chars) == _reference_index_text("é" + chars)
