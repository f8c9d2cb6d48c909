"""Limits as settings, the size caps, and the blob store's keys, atomic writes and walls."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from noteloom.attachments import AttachmentLimits, BlobStore, Sniffed, check_size
from noteloom.errors import ConfigError, InvalidInput, NotFound

PNG = Sniffed("image", "image/png")
PDF = Sniffed("pdf", "application/pdf")
TEXT = Sniffed("text", "text/plain")
HTML = Sniffed("html", "text/html")


def test_the_default_caps() -> None:
    limits = AttachmentLimits()
    assert (limits.image_bytes, limits.pdf_bytes, limits.text_bytes, limits.per_message) == (
        5_000_000, 10_000_000, 2_000_000, 5
    )
    assert AttachmentLimits.from_settings({}) == limits


def test_limits_are_read_from_the_attachments_table() -> None:
    limits = AttachmentLimits.from_settings(
        {"image_bytes": 1000, "per_message": 2, "extract_seconds": 2, "extract_memory_mb": 256, "text_chars": 500}
    )
    assert limits.image_bytes == 1000 and limits.per_message == 2 and limits.text_chars == 500
    assert limits.extract_seconds == 2.0 and isinstance(limits.extract_seconds, float)
    assert limits.extract_memory_mb == 256 and limits.pdf_bytes == 10_000_000


@pytest.mark.parametrize(
    ("section", "named"),
    [
        ({"image_bytes": "5MB"}, "image_bytes"),
        ({"per_message": 0}, "per_message"),
        ({"per_message": 2.5}, "per_message"),
        ({"pdf_bytes": True}, "pdf_bytes"),
        ({"extract_memory_mb": 16}, "extract_memory_mb"),
        ({"extract_seconds": -1}, "extract_seconds"),
        ({"image_byte": 5}, "image_byte"),
    ],
)
def test_bad_settings_are_a_config_error_naming_the_setting(section: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        AttachmentLimits.from_settings(section)


@pytest.mark.parametrize(
    ("sniffed", "cap"),
    [(PNG, 5_000_000), (PDF, 10_000_000), (TEXT, 2_000_000), (HTML, 2_000_000)],
)
def test_each_kind_has_its_cap(sniffed: Sniffed, cap: int) -> None:
    limits = AttachmentLimits()
    check_size(sniffed, cap, limits)
    with pytest.raises(InvalidInput) as refused:
        check_size(sniffed, cap + 1, limits, name="big.file")
    assert refused.value.field == "attachments"
    assert "'big.file'" in str(refused.value)
    assert f"{cap // 1_000_000} MB" in str(refused.value)


def test_caps_follow_the_settings() -> None:
    limits = AttachmentLimits.from_settings({"image_bytes": 100})
    with pytest.raises(InvalidInput, match="100 bytes"):
        check_size(PNG, 101, limits)


def test_put_read_exists_delete(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    key = store.put(b"some bytes")
    other = store.put(b"some bytes")
    assert key != other and len(key) == 32
    assert store.read(key) == b"some bytes"
    assert store.exists(key)
    assert [p.name for p in (tmp_path / "blobs").iterdir() if p.name.startswith(".")] == []
    assert store.delete(key) is True
    assert not store.exists(key)
    assert store.delete(key) is False
    with pytest.raises(NotFound):
        store.read(key)
    assert store.read(other) == b"some bytes"


def test_an_empty_file_is_stored(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    assert store.read(store.put(b"")) == b""


@pytest.mark.parametrize(
    "key",
    ["../outside", "/etc/passwd", "..", ".", "", "A" * 32, "a" * 31, "a" * 33, "a" * 31 + "/", ".tmp-" + "a" * 32],
)
def test_a_key_the_store_never_makes_names_nothing(tmp_path: Path, key: str) -> None:
    root = tmp_path / "blobs"
    root.mkdir()
    (tmp_path / "outside").write_bytes(b"secret")
    (root / ("A" * 32)).write_bytes(b"planted")
    store = BlobStore(root)
    with pytest.raises(NotFound):
        store.read(key)
    assert store.exists(key) is False
    assert store.delete(key) is False
    assert (tmp_path / "outside").read_bytes() == b"secret"
    assert (root / ("A" * 32)).exists()


def test_a_failed_write_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BlobStore(tmp_path)

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("noteloom.attachments.store.os.replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.put(b"data")
    assert list(tmp_path.iterdir()) == []


def _age(path: Path, seconds: float) -> None:
    """Date a file ``seconds`` back (its modification time), as a crash long ago would leave it."""
    old = path.stat().st_mtime - seconds
    os.utime(path, (old, old))


def test_a_sweep_removes_old_orphans_and_unfinished_writes_and_keeps_the_rest(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "blobs")
    kept, orphan, recent_orphan = store.put(b"named by a row"), store.put(b"row never committed"), store.put(b"new")
    unfinished = store.root / ".tmp-0123456789abcdef0123456789abcdef"
    unfinished.write_bytes(b"half a file")
    stranger = store.root / "notes.txt"  # not a name the store makes: never touched
    stranger.write_bytes(b"someone else's")
    for path in (store.path(kept), store.path(orphan), unfinished, stranger):
        _age(path, 7200)
    asked: list[list[str]] = []

    def referenced(keys: Iterable[str]) -> set[str]:
        asked.append(sorted(keys))
        return {kept} & set(keys)

    assert store.sweep(referenced, older_than_s=3600) == 2
    assert asked == [sorted([kept, orphan])]  # recent files are not even asked about
    assert store.exists(kept) and store.exists(recent_orphan) and not store.exists(orphan)
    assert not unfinished.exists() and stranger.read_bytes() == b"someone else's"
    assert store.sweep(referenced, older_than_s=3600) == 0
    assert BlobStore(tmp_path / "never-made").sweep(referenced) == 0
