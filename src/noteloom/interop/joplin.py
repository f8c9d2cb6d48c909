"""Joplin exports: the RAW folder and the ``.jex`` archive (a tar of that folder).

Each item is one ``<id>.md`` file: the title line, a blank line, the body (notes only),
a blank line, then ``key: value`` lines ending with ``type_: N``. Attachments
("resources") sit in ``resources/<id>.<ext>``. Joplin ids have noteloom's form (32
lowercase hex characters), so notebooks, notes, tags and attachments keep them, and
``:/id`` links in bodies keep working unchanged.

Items noteloom does not model (master keys, revisions, settings, encrypted items,
items in Joplin's trash, tag links to missing items) are skipped with a counted warning,
and so are links and special files (in a RAW folder or as archive members), sparse
archive members and members whose path is absolute or climbs out with ``..``. A time
outside 1970 … 9999 (``todo_due: 1000000000000000``) is dropped with a warning naming the
item: Joplin wrote the rest of that item, and one damaged field should not cost the note.
"""

from __future__ import annotations

import contextlib
import io
import json
import mimetypes
import os
import re
import secrets
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from noteloom.db import new_id, now_ms
from noteloom.errors import ImportExportError
from noteloom.interop.bundle import (
    AttachmentItem,
    BodySpool,
    BookItem,
    Bundle,
    ExportSummary,
    NoteItem,
    Notices,
    Progress,
    SourceFormat,
    TagItem,
)
from noteloom.interop.files import LINK_SKIP, NotRegular, open_inside, regular_entries
from noteloom.interop.limits import ITEM_OVERHEAD, Budget
from noteloom.interop.links import ID_LINK
from noteloom.interop.snapshot import Snapshot
from noteloom.interop.times import iso_from_ms, parse_time

NOTE, FOLDER, RESOURCE, TAG, NOTE_TAG = 1, 2, 4, 5, 6
#: What the skipped item types are, for the warning.
UNMODELLED = {
    3: "settings",
    7: "saved searches",
    8: "alarms",
    9: "master keys; noteloom keeps no encryption keys",
    10: "change-log items",
    11: "note-resource links; the note bodies hold them",
    12: "resource sync states",
    13: "revisions; noteloom starts a fresh history",
    14: "migrations",
    15: "smart filters",
    16: "commands",
}
_ID = re.compile(r"^[0-9a-f]{32}$")
_ITEM_NAME = re.compile(r"^([0-9a-f]{32})\.md$")
_TYPE_LINE = re.compile(r"^type_: *\d+$")
_ENCRYPTED = "skipped encrypted items; decrypt them in Joplin, then export again"
#: Key under which noteloom keeps, in a resource's ``user_data``, the note that owns it.
USER_DATA_APP = "noteloom"


class ItemError(ValueError):
    """An item file that does not follow the format."""


@dataclass
class Item:
    """One parsed item: its title, its body (notes) and its properties as text."""

    type: int
    title: str
    body: str
    props: dict[str, str]

    def get(self, key: str) -> str:
        return self.props.get(key, "")


# -- the item format ----------------------------------------------------------------------


def _unescape(value: str) -> str:
    # The exact inverse of the exporter's escaping, in the exporter's own order.
    return (
        value.replace("\\n", "\n").replace("\\r", "\r").replace("\\\n", "\\n").replace("\\\r", "\\r")
    )


def _escape(value: str) -> str:
    return (
        value.replace("\\n", "\\\\n").replace("\\r", "\\\\r").replace("\n", "\\n").replace("\r", "\\r")
    )


def parse_item(text: str) -> Item:
    """Read one item file; ``ItemError`` when it is not one."""
    lines = text.split("\n")
    props: dict[str, str] = {}
    i = len(lines) - 1
    while i >= 0:
        line = lines[i].strip()
        if not line:
            break
        colon = line.find(":")
        if colon < 0:
            raise ItemError(f"line {line[:60]!r} is not `key: value`")
        props[line[:colon].strip()] = _unescape(line[colon + 1 :].strip())
        i -= 1
    if "type_" not in props:
        raise ItemError("it has no `type_:` line")
    try:
        kind = int(props["type_"])
    except ValueError as exc:
        raise ItemError(f"type_ {props['type_']!r} is not a number") from exc
    head = lines[:i] if i > 0 else []
    title = head[0] if head else ""
    body = "\n".join(head[2:]) if kind == NOTE else ""
    return Item(kind, title, body, props)


def serialize_item(title: str | None, body: str, props: list[tuple[str, str | int]]) -> str:
    """One item file; ``props`` in order, ending with ``type_``."""
    parts = []
    if title is not None:
        parts.append(title)
    if body:
        parts.append(body)
    parts.append("\n".join(f"{k}: {_escape(str(v))}" for k, v in props))
    return "\n\n".join(parts)


def is_raw_folder(folder: Path) -> bool:
    """True when ``folder`` holds Joplin item files at its top level."""
    checked = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            if not _ITEM_NAME.match(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            try:
                opened = open_inside(folder, entry.name)
            except (NotRegular, OSError):
                continue
            with opened.file as f:
                f.seek(max(0, opened.size - 64))
                tail = f.read(64).decode("utf-8", errors="replace").rstrip().rsplit("\n", 1)[-1]
            if _TYPE_LINE.match(tail.strip()):
                return True
            checked += 1
            if checked >= 5:
                return False
    return False


# -- reading --------------------------------------------------------------------------------


def read_raw(
    folder: Path, staging: Path, budget: Budget, progress: Progress, spool: BodySpool | None = None
) -> Bundle:
    """A bundle from a RAW export folder; resource files are copied into ``staging``."""
    notices = Notices()
    names = [
        e.name for e in regular_entries(folder, notices, lambda e: e.name.lower().endswith(".md"))
        if e.name.lower().endswith(".md") and e.is_file(follow_symlinks=False)
    ]
    files: dict[str, Path] = {}
    res_dir = folder / "resources"
    if res_dir.is_symlink():
        notices.skip(LINK_SKIP, "resources")
    elif res_dir.is_dir():
        for entry in regular_entries(res_dir, notices, lambda _e: True, where="resources/"):
            if entry.is_file(follow_symlinks=False):
                _stage_resource(folder, f"resources/{entry.name}", entry.name, staging, files, budget, notices)

    def items() -> Iterator[tuple[str, bytes]]:
        for i, name in enumerate(names):
            try:
                opened = open_inside(folder, name)
            except NotRegular as exc:
                notices.skip(exc.kind, name)
                continue
            except OSError as exc:
                raise ImportExportError(
                    f"{str(folder / name)!r} cannot be read ({exc.strerror or exc}); check it and import again"
                ) from exc
            with opened.file as f:
                data = budget.read_note(f, name, overhead=ITEM_OVERHEAD)
            yield name, data
            if i % 500 == 0:
                progress("reading", i, len(names))

    bundle = _assemble(items(), files, root_title=folder.name, fmt="raw", notices=notices, spool=spool)
    progress("reading", len(names), len(names))
    return bundle


def _stage_resource(
    folder: Path, key: str, name: str, staging: Path, files: dict[str, Path], budget: Budget, notices: Notices
) -> None:
    try:
        opened = open_inside(folder, key)
    except NotRegular as exc:
        notices.skip(exc.kind, key)
        return
    except OSError as exc:
        raise ImportExportError(
            f"{str(folder / key)!r} cannot be read ({exc.strerror or exc}); check it and import again"
        ) from exc
    dest = staging / f"{len(files)}-{_ascii_name(name)}"
    with opened.file as src, open(dest, "xb") as out:
        budget.copy_attachment(src, out, key)
    files[name] = dest


def read_jex(
    archive: Path, staging: Path, budget: Budget, progress: Progress, spool: BodySpool | None = None
) -> Bundle:
    """A bundle from a ``.jex`` archive; resource files are extracted into ``staging``.

    Items are parsed as the archive is read, so an archive of 100,000 notes never sits
    in memory twice."""
    files: dict[str, Path] = {}
    count = [0]
    notices = Notices()
    entries = _jex_entries(archive, staging, files, count, budget, notices, progress)
    bundle = _assemble(
        entries, files, root_title=archive.stem or "Imported", fmt="jex", notices=notices, spool=spool
    )
    if not count[0]:
        raise ImportExportError(f"{archive.name!r} is a tar archive but holds no Joplin items (<id>.md files)")
    return bundle


#: Extended headers (PAX records, GNU long names) tarfile reads whole into memory.
_HEADER_TYPES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE, b"X")
MAX_HEADER_BYTES = 1 << 20


class _BoundedTarInfo(tarfile.TarInfo):
    """A member header that refuses an extended header over ``MAX_HEADER_BYTES``: tarfile
    reads one whole before the member it describes exists, so no cap on members could
    stop a 1 GiB PAX record. ``_proc_member`` is tarfile's documented hook for subclasses."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _HEADER_TYPES and self.size > MAX_HEADER_BYTES:
            raise ImportExportError(
                f"the archive has a {self.size:,}-byte tar header at byte {self.offset:,}; Joplin "
                "writes none over a few hundred bytes, so it is not a Joplin export (or it is damaged)"
            )
        return super()._proc_member(tar)  # type: ignore[misc,no-any-return]


_MEMBER_SKIP = "skipped archive members that are links or special files; an import reads only regular files"
_SPARSE_SKIP = "skipped sparse archive members (Joplin never writes them)"
_PATH_SKIP = "skipped archive members whose path is absolute or leads outside the archive"


def _jex_entries(
    archive: Path,
    staging: Path,
    files: dict[str, Path],
    count: list[int],
    budget: Budget,
    notices: Notices,
    progress: Progress,
) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of each item of the archive; resources go to ``staging`` on the way."""
    size = max(1, archive.stat().st_size)
    try:
        with tarfile.open(archive, _tar_mode(archive), tarinfo=_BoundedTarInfo) as tar:
            for member in tar:
                # TarFile keeps every member it has read (for getmembers()): a list of
                # TarInfo as long as the archive. Iterating reads on without it.
                tar.members.clear()  # type: ignore[attr-defined]  # an attribute typeshed leaves out
                # Before the member's data is read or skipped: skipping decompresses it too.
                budget.check_total(member.offset_data + member.size, member.name)
                if member.isdir():
                    continue
                if not member.isfile():
                    notices.skip(_MEMBER_SKIP, member.name)
                    continue
                if member.issparse():
                    notices.skip(_SPARSE_SKIP, member.name)
                    continue
                parts = [p for p in PurePosixPath(member.name).parts if p not in (".", "")]
                try:
                    # The "data" filter's rules, stricter: it would strip a leading "/",
                    # an import refuses the member. Nothing is extracted by tarfile itself.
                    if member.name.startswith("/") or ".." in parts:
                        raise tarfile.AbsolutePathError(member)
                    tarfile.data_filter(member, str(staging))
                except tarfile.FilterError:
                    notices.skip(_PATH_SKIP, member.name)
                    continue
                data_file = tar.extractfile(member) if parts else None
                if data_file is None:
                    continue
                if len(parts) == 1 and parts[0].lower().endswith(".md"):
                    count[0] += 1
                    yield parts[0], budget.read_note(data_file, parts[0], overhead=ITEM_OVERHEAD)
                elif len(parts) == 2 and parts[0] == "resources":
                    # The base name only: an archive cannot write outside the staging folder.
                    dest = staging / f"{len(files)}-{_ascii_name(parts[1])}"
                    with open(dest, "xb") as out:
                        budget.copy_attachment(data_file, out, member.name)
                    files[parts[1]] = dest
                if count[0] % 500 == 0:
                    progress("reading", min(tar.offset, size), size)
            if tar.fileobj is not None:
                # A cut-off tar often just ends early; a whole one ends with zero blocks.
                tar.fileobj.seek(tar.offset)
                tail = tar.fileobj.read(512)
                if len(tail) < 512 or tail.strip(b"\0"):
                    raise tarfile.ReadError("the archive ends before its end marker")
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        detail = str(exc).splitlines()[-1].strip(" -") if str(exc) else type(exc).__name__
        raise ImportExportError(
            f"{archive.name!r} is corrupt or truncated ({detail}); export it again from Joplin"
        ) from exc
    progress("reading", size, size)


def is_archive(path: Path) -> bool:
    """True when ``path`` is a tar archive an import reads (see ``_tar_mode``)."""
    try:
        with tarfile.open(path, _tar_mode(path), tarinfo=_BoundedTarInfo):
            return True
    except (tarfile.TarError, EOFError):
        return False


def _tar_mode(archive: Path) -> Literal["r:", "r:gz", "r:bz2"]:
    """A plain, gzip'd or bzip2'd tar; not xz, whose header may ask the decompressor for
    gigabytes of memory (tarfile sets no limit). Joplin itself writes plain tar."""
    with open(archive, "rb") as f:
        magic = f.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return "r:gz"
    if magic.startswith(b"BZh"):
        return "r:bz2"
    if magic.startswith(b"\xfd7zXZ\x00"):
        raise ImportExportError(
            f"{archive.name!r} is xz-compressed; decompress it (xz -d) or export it again from Joplin"
        )
    return "r:"


def _ascii_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[-80:]


def _assemble(
    entries: Iterator[tuple[str, bytes]],
    files: dict[str, Path],
    *,
    root_title: str,
    fmt: SourceFormat,
    notices: Notices,
    spool: BodySpool | None,
) -> Bundle:
    bundle = Bundle(format=fmt, root_title=root_title, notices=notices, spool=spool)
    first_linker: dict[str, str] = {}
    #: Each note's body, parked in the spool as soon as it is read (``Item.body`` is emptied).
    body_refs: dict[str, NoteItem] = {}
    folders: list[Item] = []
    notes: list[Item] = []
    resources: list[Item] = []
    tags: list[Item] = []
    links: list[Item] = []
    seen: set[str] = set()
    for name, data in entries:
        try:
            item = parse_item(data.decode("utf-8"))
        except (ItemError, UnicodeDecodeError) as exc:
            raise ImportExportError(
                f"entry {name!r} is not a Joplin item ({exc}); the export is damaged, export it again"
            ) from exc
        item_id = item.get("id").lower()
        if item.type in UNMODELLED:
            notices.skip(f"skipped {UNMODELLED[item.type]}", item_id[:8])
            continue
        if item.type not in (NOTE, FOLDER, RESOURCE, TAG, NOTE_TAG):
            notices.skip("skipped items of unknown types", f"type {item.type}")
            continue
        if item.get("encryption_applied") == "1" or item.get("encryption_cipher_text"):
            notices.skip(_ENCRYPTED, item_id[:8])
            continue
        if item.get("deleted_time") not in ("", "0"):
            notices.skip("skipped items in Joplin's trash", item_id[:8])
            continue
        if not _ID.match(item_id) or item_id in seen:
            notices.skip("skipped items without a valid, unique id", name)
            continue
        seen.add(item_id)
        item.props["id"] = item_id
        if item.type == NOTE:
            body = item.body
            if "\x00" in body:
                body = body.replace("\x00", "")
                notices.warn("removed NUL characters from note bodies", item_id[:8])
            if ":/" in body:
                for m in ID_LINK.finditer(body):
                    first_linker.setdefault(m.group(1), item_id)
            # Only what a note needs stays in memory: its body goes to the spool, and of
            # its thirty-odd properties the dozen read below.
            body_refs[item_id] = bundle.park(_placeholder(body))
            item.body = ""
            item.props = {k: v for k, v in item.props.items() if k in _NOTE_PROPS}
        {NOTE: notes, FOLDER: folders, RESOURCE: resources, TAG: tags, NOTE_TAG: links}[item.type].append(item)

    folder_ids = {f.get("id") for f in folders}
    for f in folders:
        parent = f.get("parent_id").lower()
        created, updated = _times(f, name_of(f), notices)
        bundle.books.append(
            BookItem(
                id=f.get("id"),
                title=_title(f.title, "Untitled"),
                parent_id=parent if parent in folder_ids else None,
                created_time=created,
                updated_time=updated,
            )
        )
    _break_loops(bundle.books, notices)
    by_note: dict[str, NoteItem] = {}
    for n in notes:
        where = name_of(n)
        created, updated = _times(n, where, notices)
        parent = n.get("parent_id").lower()
        parked = body_refs[n.get("id")]
        note = NoteItem(
            id=n.get("id"),
            notebook_id=parent if parent in folder_ids else None,
            title=n.title.strip(),
            body=parked.body,
            body_ref=parked.body_ref,
            created_time=created,
            updated_time=updated,
            is_todo=n.get("is_todo") == "1",
            todo_due=_time(n, "todo_due", where, notices),
            todo_completed=_time(n, "todo_completed", where, notices),
            source_url=n.get("source_url"),
        )
        by_note[note.id] = note
        bundle.notes.append(note)

    tag_titles: dict[str, str] = {}
    for t in tags:
        title = " ".join(t.title.split())
        if not title:
            notices.skip("skipped tags without a title", t.get("id")[:8])
            continue
        created, updated = _times(t, name_of(t), notices)
        tag_titles[t.get("id")] = title
        bundle.tags.append(TagItem(t.get("id"), title, created, updated))
    for link in links:
        note_item = by_note.get(link.get("note_id").lower())
        tag_title = tag_titles.get(link.get("tag_id").lower())
        if note_item is None or tag_title is None:
            notices.skip("skipped tag links to notes or tags missing from the export", link.get("id")[:8])
            continue
        if tag_title not in note_item.tags:
            note_item.tags.append(tag_title)

    for r in resources:
        rid = r.get("id")
        if r.get("encryption_blob_encrypted") == "1":
            notices.skip(_ENCRYPTED, rid[:8])
            continue
        ext = r.get("file_extension") or _ext_for(r.get("mime"))
        path = files.get(f"{rid}.{ext}" if ext else rid) or _find_file(files, rid)
        if path is None:
            notices.skip("skipped attachments whose file is missing from the export", rid[:8])
            continue
        created, updated = _times(r, name_of(r), notices)
        owner = _owner_hint(r.get("user_data"))
        note_id = owner if owner in by_note else first_linker.get(rid)
        bundle.attachments.append(
            AttachmentItem(
                id=rid,
                note_id=note_id,
                title=r.title.strip(),
                filename=_filename(r, rid, ext),
                mime=r.get("mime") or mimetypes.guess_type(f"x.{ext}")[0] or "application/octet-stream",
                size=path.stat().st_size,
                created_time=created,
                updated_time=updated,
                source=path,
                staged=True,
            )
        )
    return bundle


def _break_loops(books: list[BookItem], notices: Notices) -> None:
    """A notebook whose parents lead back to itself (a damaged export: A in B, B in A)
    becomes top-level, so the tree has roots and every path ends."""
    parent_of = {b.id: b.parent_id for b in books}
    by_id = {b.id: b for b in books}
    settled: set[str] = set()
    for b in books:
        path: list[str] = []
        on_path: set[str] = set()
        current: str | None = b.id
        while current is not None and current not in settled:
            if current in on_path:
                by_id[current].parent_id = None
                parent_of[current] = None
                notices.warn("made notebooks whose parents form a loop top-level", current[:8])
                break
            path.append(current)
            on_path.add(current)
            current = parent_of.get(current)
        settled.update(path)


_NOTE_PROPS = frozenset({
    "id", "parent_id", "created_time", "updated_time", "user_created_time", "user_updated_time",
    "is_todo", "todo_due", "todo_completed", "source_url",
})


def _placeholder(body: str) -> NoteItem:
    return NoteItem(id="", notebook_id=None, title="", body=body, created_time=0, updated_time=0)


def name_of(item: Item) -> str:
    return f"{item.get('id')}.md"


def _title(text: str, fallback: str) -> str:
    return " ".join(text.split()) or fallback


_BAD_TIME = "ignored times outside 1970 … 9999 (the item was imported without them)"


def _time(item: Item, key: str, where: str, notices: Notices) -> int | None:
    """The time ``key`` of ``item`` in ms; ``None`` when unset, or out of range (reported)."""
    value = item.get(key)
    if not value:
        return None
    try:
        return parse_time(value, f"{where}: {key}")
    except ImportExportError:
        notices.warn(_BAD_TIME, f"{where} {key}: {value[:24]}")
        return None


def _times(item: Item, where: str, notices: Notices) -> tuple[int, int]:
    """Created and updated times, the user-facing ones first (sync rewrites the others)."""
    now = now_ms()
    created = _time(item, "user_created_time", where, notices) or _time(item, "created_time", where, notices)
    updated = _time(item, "user_updated_time", where, notices) or _time(item, "updated_time", where, notices)
    created = created or updated or now
    return created, updated or created


def _ext_for(mime: str) -> str:
    guessed = mimetypes.guess_extension(mime) if mime else None
    return guessed.lstrip(".") if guessed else ""


def _find_file(files: dict[str, Path], rid: str) -> Path | None:
    for name, path in files.items():
        if name == rid or name.startswith(rid + "."):
            return path
    return None


def _filename(r: Item, rid: str, ext: str) -> str:
    name = (r.get("filename") or "").replace("\\", "/").rsplit("/", 1)[-1]
    if name:
        return name
    title = r.title.strip().replace("\\", "/").rsplit("/", 1)[-1]
    if title and (not ext or title.lower().endswith("." + ext.lower())):
        return title
    return f"{title or rid}.{ext}" if ext else (title or rid)


def _owner_hint(user_data: str) -> str | None:
    if not user_data:
        return None
    try:
        value = json.loads(user_data)[USER_DATA_APP]["note_id"]["v"]
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, str) else None


# -- writing --------------------------------------------------------------------------------


def _common(created: int, updated: int) -> list[tuple[str, str | int]]:
    return [
        ("created_time", iso_from_ms(created)),
        ("updated_time", iso_from_ms(updated)),
        ("user_created_time", iso_from_ms(created)),
        ("user_updated_time", iso_from_ms(updated)),
        ("encryption_cipher_text", ""),
        ("encryption_applied", 0),
    ]


def folder_text(b: BookItem) -> str:
    props: list[tuple[str, str | int]] = [("id", b.id), *_common(b.created_time, b.updated_time)]
    props += [("parent_id", b.parent_id or ""), ("is_shared", 0), ("share_id", ""), ("master_key_id", ""),
              ("icon", ""), ("user_data", ""), ("deleted_time", 0), ("type_", FOLDER)]
    return serialize_item(_one_line(b.title), "", props)


def note_text(n: NoteItem) -> str:
    props: list[tuple[str, str | int]] = [
        ("id", n.id), ("parent_id", n.notebook_id or ""),
        ("created_time", iso_from_ms(n.created_time)), ("updated_time", iso_from_ms(n.updated_time)),
        ("is_conflict", 0), ("latitude", "0.00000000"), ("longitude", "0.00000000"), ("altitude", "0.0000"),
        ("author", ""), ("source_url", n.source_url), ("is_todo", int(n.is_todo)),
        ("todo_due", n.todo_due or 0), ("todo_completed", n.todo_completed or 0),
        ("source", "noteloom"), ("source_application", "noteloom"), ("application_data", ""), ("order", 0),
        ("user_created_time", iso_from_ms(n.created_time)), ("user_updated_time", iso_from_ms(n.updated_time)),
        ("encryption_cipher_text", ""), ("encryption_applied", 0), ("markup_language", 1), ("is_shared", 0),
        ("share_id", ""), ("conflict_original_id", ""), ("master_key_id", ""), ("user_data", ""),
        ("deleted_time", 0), ("type_", NOTE),
    ]
    return serialize_item(_one_line(n.title), n.body, props)


def tag_text(t: TagItem) -> str:
    props: list[tuple[str, str | int]] = [("id", t.id), *_common(t.created_time, t.updated_time)]
    props += [("is_shared", 0), ("parent_id", ""), ("user_data", ""), ("type_", TAG)]
    return serialize_item(_one_line(t.title), "", props)


def note_tag_text(link_id: str, note_id: str, tag_id: str, t: int) -> str:
    props: list[tuple[str, str | int]] = [("id", link_id), ("note_id", note_id), ("tag_id", tag_id), *_common(t, t)]
    props += [("is_shared", 0), ("type_", NOTE_TAG)]
    return serialize_item(None, "", props)


def resource_text(a: AttachmentItem, ext: str) -> str:
    owner = (
        json.dumps({USER_DATA_APP: {"note_id": {"v": a.note_id, "t": a.updated_time}}}, separators=(",", ":"))
        if a.note_id
        else ""
    )
    props: list[tuple[str, str | int]] = [("id", a.id), ("mime", a.mime), ("filename", a.filename)]
    props += _common(a.created_time, a.updated_time)[:4]
    props += [
        ("file_extension", ext), ("encryption_cipher_text", ""), ("encryption_applied", 0),
        ("encryption_blob_encrypted", 0), ("size", a.size), ("is_shared", 0), ("share_id", ""),
        ("master_key_id", ""), ("user_data", owner), ("blob_updated_time", a.updated_time),
        ("ocr_text", ""), ("ocr_details", ""), ("ocr_status", 0), ("ocr_error", ""), ("ocr_driver_id", 1),
        ("type_", RESOURCE),
    ]
    return serialize_item(_one_line(a.title), "", props)


def _one_line(title: str) -> str:
    # The title is the item's first line: a line break inside it would shift the body.
    return title.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def resource_extension(a: AttachmentItem) -> str:
    suffix = PurePosixPath(a.filename).suffix.lower().lstrip(".")
    if re.fullmatch(r"[a-z0-9]{1,10}", suffix):
        return suffix
    return _ext_for(a.mime) or "bin"


def write_jex(snapshot: Snapshot, dest: Path, progress: Progress) -> ExportSummary:
    """Write ``snapshot`` as a ``.jex`` archive at ``dest`` (atomically: a temp file, then a rename)."""
    notices = snapshot.notices
    if not (snapshot.books or snapshot.tags):
        # Joplin refuses an archive without items, and so does our own import.
        raise ImportExportError("the workspace has nothing to export: no notebooks and no tags")
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.part")
    mtime = int(time.time())
    total = len(snapshot.notes) + len(snapshot.attachments)
    done = 0
    tag_ids = {t.title.lower(): t.id for t in snapshot.tags}
    try:
        with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
            for text_id, text in _texts(snapshot, tag_ids):
                _add_bytes(tar, f"{text_id}.md", text.encode("utf-8"), mtime)
            for n in snapshot.notes:
                _add_bytes(tar, f"{n.id}.md", note_text(n).encode("utf-8"), mtime)
                done += 1
                if done % 1000 == 0:
                    progress("exporting", done, total)
            for a in snapshot.attachments:
                ext = resource_extension(a)
                _add_bytes(tar, f"{a.id}.md", resource_text(a, ext).encode("utf-8"), mtime)
                info = tarfile.TarInfo(f"resources/{a.id}.{ext}")
                info.size, info.mtime, info.mode = a.source.stat().st_size, mtime, 0o644
                with open(a.source, "rb") as f:
                    tar.addfile(info, f)
                done += 1
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    progress("exporting", total, total)
    return ExportSummary(
        destination=str(dest), format="jex", notebooks=len(snapshot.books), notes=len(snapshot.notes),
        tags=len(snapshot.tags), attachments=len(snapshot.attachments), warnings=notices.count,
        messages=notices.messages(),
    )


def _texts(snapshot: Snapshot, tag_ids: dict[str, str]) -> Iterable[tuple[str, str]]:
    for b in snapshot.books:
        yield b.id, folder_text(b)
    for t in snapshot.tags:
        yield t.id, tag_text(t)
    t0 = now_ms()
    for n in snapshot.notes:
        for title in n.tags:
            link_id = new_id()
            yield link_id, note_tag_text(link_id, n.id, tag_ids[title.lower()], t0)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), mtime, 0o644
    tar.addfile(info, io.BytesIO(data))
