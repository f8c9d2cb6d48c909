"""Markdown folders: one ``.md`` file per note, folders as notebooks.

Reading: sub-folders become nested notebooks (folders starting with ``.`` or ``_``, such
as ``_resources``, are not notebooks). YAML front matter gives the id, title, tags,
created/updated (ISO 8601 or epoch ms), is_todo/due/completed and source_url; the title
otherwise comes from the first ``# heading``, then the file name. Relative links to
non-Markdown files become attachments and the links are rewritten to ``:/<attachment id>``.

Writing: the notebook tree as folders, one ``.md`` per note with front matter,
attachments in ``_resources/`` linked relatively, and ``_noteloom.yaml`` holding what a
folder cannot (notebook ids and times, tag ids, attachment titles and times), so reading
the folder back gives the very same workspace.
"""

from __future__ import annotations

import mimetypes
import os
import posixpath
import re
import secrets
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from noteloom.db import new_id, now_ms
from noteloom.errors import ImportExportError
from noteloom.interop import frontmatter
from noteloom.interop.bundle import (
    AttachmentItem,
    BookItem,
    Bundle,
    ExportSummary,
    NoteItem,
    Notices,
    Progress,
    TagItem,
)
from noteloom.interop.filenames import FolderNames, safe_name, split_name
from noteloom.interop.files import FolderFiles, NotRegular, mtime_ms, open_inside, regular_entries
from noteloom.interop.limits import Budget
from noteloom.interop.links import (
    RESOURCE_LINK,
    is_relative_path,
    path_of_target,
    quote_path,
    rewrite_links,
)
from noteloom.interop.snapshot import Snapshot
from noteloom.interop.times import iso_from_ms, parse_time

MANIFEST = "_noteloom.yaml"
RESOURCES = "_resources"
MANIFEST_FORMAT = "noteloom-markdown/1"
_NOTE_SUFFIXES = (".md", ".markdown")
_ID = re.compile(r"^[0-9a-f]{32}$")
_HEADING = re.compile(r"^ {0,3}# +(.+?)(?: +#+)? *$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_INLINE_CODE = re.compile(r"(`+)[^`]*?\1")
_INLINE_TAG = re.compile(r"(?:^|(?<=\s))#([^\s#.,;:!?()\[\]{}'\"`<>*]+)")


def is_markdown_folder(folder: Path) -> bool:
    """True when ``folder`` holds a noteloom export or any Markdown file (hidden folders aside)."""
    if (folder / MANIFEST).is_file():
        return True
    return next(_walk(folder, Notices(), []), None) is not None


def _is_note_name(name: str) -> bool:
    return name.lower().endswith(_NOTE_SUFFIXES) and not name.startswith(".")


def _is_book_name(name: str) -> bool:
    return not name.startswith((".", "_"))


def _walk(root: Path, notices: Notices, folders: list[str]) -> Iterator[tuple[str, str]]:
    """(folder relative to root in POSIX form, file name) of every note file, in the order
    ``os.walk`` gives them, sorted; real sub-folders are appended to ``folders`` on the way.
    Links and special files that would have been notes or notebooks are skipped and reported.
    A stack, not recursion: a folder nested a thousand deep is no reason for a traceback."""

    def wanted(entry: os.DirEntry[str]) -> bool:
        return _is_note_name(entry.name) or (_is_book_name(entry.name) and entry.is_dir())

    stack = [""]
    while stack:
        rel = stack.pop()
        if rel:
            folders.append(rel)
        subdirs: list[str] = []
        for entry in regular_entries(root / rel if rel else root, notices, wanted, where=f"{rel}/" if rel else ""):
            if entry.is_dir(follow_symlinks=False):
                if _is_book_name(entry.name):
                    subdirs.append(f"{rel}/{entry.name}" if rel else entry.name)
            elif _is_note_name(entry.name):
                yield rel, entry.name
        stack.extend(reversed(subdirs))


# -- reading --------------------------------------------------------------------------------


@dataclass
class _Reader:
    root: Path
    staging: Path
    budget: Budget
    inline_tags: bool
    notices: Notices
    manifest: dict[str, Any] = field(default_factory=dict)
    #: Path inside the folder (POSIX form) -> the attachment made from that file.
    attachments: dict[str, AttachmentItem] = field(default_factory=dict)
    used_ids: set[str] = field(default_factory=set)
    #: The attachments in the order they were made (the bundle's list, which the writer reads).
    found: list[AttachmentItem] = field(default_factory=list)

    def claim_id(self, value: object, where: str) -> str:
        """The id the front matter or manifest gives, when it is one and still free."""
        if isinstance(value, str) and _ID.match(value) and value not in self.used_ids:
            self.used_ids.add(value)
            return value
        if value not in (None, ""):
            reason = "was used twice" if value in self.used_ids else "was not a 32-hex id"
            self.notices.warn(f"gave new ids where the given id {reason}", where)
        fresh = new_id()
        self.used_ids.add(fresh)
        return fresh


def read_folder(root: Path, staging: Path, budget: Budget, *, inline_tags: bool) -> Bundle:
    """A bundle from a Markdown folder whose notes are read as the writer takes them
    (``Bundle.stream``); attachment files are copied into ``staging`` on the way."""
    root = root.resolve()
    bundle = Bundle(format="markdown", root_title=root.name or "Imported")
    r = _Reader(root, staging, budget, inline_tags, bundle.notices, found=bundle.attachments)
    manifest_text = _read_text(r, MANIFEST, missing_ok=True)
    if manifest_text is not None:
        data = frontmatter.parse(manifest_text[0], MANIFEST)
        if not data or data.get("format") != MANIFEST_FORMAT:
            r.notices.warn(f"ignored {MANIFEST}, which is not a noteloom export manifest")
        else:
            r.manifest = data
    # A first walk finds the folders that hold notes (their notebooks come first) and counts
    # the notes; the second reads them. Names are not kept: the folder may hold millions.
    folders: list[str] = []
    note_folders: set[str] = set()
    count = 0
    for folder, _ in _walk(root, r.notices, folders):
        note_folders.add(folder)
        count += 1
    book_of = _read_books(r, bundle, note_folders, folders)
    for t in _mapping_list(r.manifest.get("tags")):
        title = " ".join(str(t.get("title", "")).split())
        if title:
            created = parse_time(t.get("created"), f"{MANIFEST}: tag {title!r} created") or now_ms()
            updated = parse_time(t.get("updated"), f"{MANIFEST}: tag {title!r} updated") or created
            tid = r.claim_id(t.get("id"), f"tag {title!r}")
            bundle.tags.append(TagItem(tid, title, created, updated))
    bundle.expected_notes = count
    bundle.stream = NoteStream(r, book_of)
    return bundle


@dataclass
class _ChildArgs:
    """What a child process needs to read the notes as ``NoteStream`` would (all picklable)."""

    root: Path
    staging: Path
    budget: Budget
    inline_tags: bool
    manifest: dict[str, Any]
    used_ids: set[str]
    book_of: dict[str, str]


@dataclass
class _TakeBack:
    """What a child read aside since its last group: notices, attachments, bytes spent."""

    notices: Notices
    attachments: list[AttachmentItem]
    spent: int


class NoteStream:
    """The notes of a folder, read as they are taken (``Bundle.stream``). Read in this
    process by iterating it, or in a child (``readahead.ProcessReadAhead``) with
    ``in_child`` and ``take_back``: the same notes in the same order, and the child's
    notices, attachments and bytes read come back into this stream's bundle."""

    def __init__(self, r: _Reader, book_of: dict[str, str]) -> None:
        self._r = r
        self._book_of = book_of
        self._notes: Iterator[NoteItem] | None = None

    def __iter__(self) -> Iterator[NoteItem]:
        return self

    def __next__(self) -> NoteItem:
        if self._notes is None:
            self._notes = _read_notes(self._r, self._book_of)
        return next(self._notes)

    def close(self) -> None:
        if self._notes is not None:
            close = getattr(self._notes, "close", None)
            if close is not None:
                close()

    def in_child(self) -> _ChildArgs:
        """The arguments of ``child_source``, before any note was read here."""
        if self._notes is not None:
            raise RuntimeError("the stream was read here already")
        r = self._r
        return _ChildArgs(r.root, r.staging, r.budget, r.inline_tags, r.manifest, set(r.used_ids), self._book_of)

    def take_back(self, side: object) -> None:
        """Add what the child read aside (``_ChildSource.drain``) to this stream's bundle."""
        assert isinstance(side, _TakeBack)
        self._r.notices.extend(side.notices)
        for item in side.attachments:
            self._r.found.append(item)
        self._r.budget.total = side.spent


class _ChildSource:
    """In the child: the notes, with what ``drain`` hands back after each group."""

    def __init__(self, args: _ChildArgs) -> None:
        self._r = _Reader(
            args.root, args.staging, args.budget, args.inline_tags, Notices(),
            manifest=args.manifest, used_ids=args.used_ids,
        )
        self._notes = _read_notes(self._r, args.book_of)

    def __iter__(self) -> Iterator[NoteItem]:
        return self._notes

    def drain(self) -> _TakeBack:
        r = self._r
        side = _TakeBack(r.notices, r.found, r.budget.total)
        r.notices = Notices()
        r.found = []
        return side

    def close(self) -> None:
        close = getattr(self._notes, "close", None)
        if close is not None:
            close()


def child_source(args: _ChildArgs) -> _ChildSource:
    """The notes of ``NoteStream.in_child``, read in the process that calls this."""
    return _ChildSource(args)


def _read_notes(r: _Reader, book_of: dict[str, str]) -> Iterator[NoteItem]:
    """Every note of the folder, read in the walk's order; then the attachments the
    manifest lists that no note linked."""
    files = FolderFiles(r.root)
    try:
        for folder, name in _walk(r.root, Notices(), []):  # the first walk reported the skips
            note = _read_note(r, folder, name, book_of.get(folder), files)
            if note is not None:
                yield note
    finally:
        files.close()
    _read_unlinked_attachments(r)


def _mapping_list(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _read_books(r: _Reader, bundle: Bundle, note_folders: set[str], folders: list[str]) -> dict[str, str]:
    """Notebooks for folders that hold notes (at any depth) or that the manifest names."""
    listed = r.manifest.get("notebooks")
    listed = listed if isinstance(listed, dict) else {}
    wanted: set[str] = set()
    for folder in [*note_folders, *(f for f in folders if f in listed)]:
        path = PurePosixPath(folder)
        while folder:
            wanted.add(folder)
            path = path.parent
            folder = "" if str(path) == "." else path.as_posix()
    book_of: dict[str, str] = {}
    for folder in sorted(wanted, key=lambda f: (f.count("/"), f)):
        meta = listed.get(folder)
        meta = meta if isinstance(meta, dict) else {}
        where = f"{folder}/"
        title = " ".join(str(meta.get("title") or "").split()) or PurePosixPath(folder).name
        created = parse_time(meta.get("created"), f"{MANIFEST}: notebook {folder!r} created")
        updated = parse_time(meta.get("updated"), f"{MANIFEST}: notebook {folder!r} updated")
        if created is None:
            created = mtime_ms(r.root / folder)
        parent = PurePosixPath(folder).parent.as_posix()
        book_of[folder] = r.claim_id(meta.get("id"), where)
        bundle.books.append(
            BookItem(
                id=book_of[folder],
                title=title,
                parent_id=book_of.get(parent) if parent != "." else None,
                created_time=created,
                updated_time=updated or created,
            )
        )
    return book_of


def _read_text(
    r: _Reader, key: str, *, missing_ok: bool = False, at: tuple[FolderFiles, str, str] | None = None
) -> tuple[str, int] | None:
    """The text of the note file ``key`` and its modification time (ms); ``None`` when it
    is a link or a special file (reported), or missing and ``missing_ok``. ``at`` opens it
    as (folder files, folder, name)."""
    try:
        opened = at[0].open(at[1], at[2]) if at is not None else open_inside(r.root, key)
    except NotRegular as exc:
        r.notices.skip(exc.kind, key)
        return None
    except OSError as exc:
        if missing_ok and isinstance(exc, FileNotFoundError):
            return None
        raise ImportExportError(
            f"{str(r.root / key)!r} cannot be read ({exc.strerror or exc}); check it and import again"
        ) from exc
    with opened.file as f:
        data = r.budget.read_note(f, key, size=opened.size)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), opened.mtime_ms
    except UnicodeDecodeError:
        r.notices.warn("read files that are not UTF-8 as Latin-1", PurePosixPath(key).name)
        return data.decode("latin-1"), opened.mtime_ms


def _read_note(r: _Reader, folder: str, name: str, book: str | None, files: FolderFiles) -> NoteItem | None:
    where = f"{folder}/{name}" if folder else name
    read = _read_text(r, where, at=(files, folder, name))
    if read is None:
        return None
    text, mtime = read
    yaml_text, body = frontmatter.split(text)
    meta: dict[str, Any] = {}
    if yaml_text is not None:
        parsed = frontmatter.parse(yaml_text, where)
        if parsed is None:
            body = text  # a rule and a heading, not front matter
        else:
            meta = parsed
    if "\x00" in body:
        body = body.replace("\x00", "")
        r.notices.warn("removed NUL characters from note bodies", where)
    note_id = r.claim_id(meta.get("id"), where)
    created = parse_time(meta.get("created", meta.get("date")), f"{where}: created")
    updated = parse_time(meta.get("updated"), f"{where}: updated")
    if created is None or updated is None:
        created = created or updated or mtime
        updated = updated or mtime
    due = parse_time(meta.get("due"), f"{where}: due")
    completed = parse_time(meta.get("completed"), f"{where}: completed")
    if completed is None and meta.get("completed?") in (True, "yes"):
        completed = updated
    tags = _tags(meta.get("tags"))
    if r.inline_tags:
        tags += [t for t in inline_tags(body) if t.lower() not in {x.lower() for x in tags}]
    source_url = meta.get("source_url", meta.get("source"))
    body = rewrite_links(body, lambda target: _attach(r, folder, target, note_id))
    return NoteItem(
        id=note_id,
        notebook_id=book,
        title=_note_title(meta.get("title"), body, name),
        body=body,
        created_time=created,
        updated_time=updated,
        is_todo=bool(meta["is_todo"]) if "is_todo" in meta else (
            "completed?" in meta or due is not None or completed is not None
        ),
        todo_due=due,
        todo_completed=completed,
        source_url=str(source_url) if isinstance(source_url, str | int | float) else "",
        tags=tags,
    )


def _note_title(value: object, body: str, name: str) -> str:
    if value is not None:
        return str(value).strip()  # an explicit empty title stays empty
    in_fence = False
    for line in body.split("\n", 200)[:200]:
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _HEADING.match(line.rstrip("\r"))):
            return m.group(1).strip()
    return Path(name).stem.strip()


def _tags(value: object) -> list[str]:
    raw: list[object]
    if isinstance(value, str):
        raw = list(value.split(","))
    elif isinstance(value, list):
        raw = value
    else:
        return []
    out: list[str] = []
    keys: set[str] = set()
    for v in raw:
        title = " ".join(str(v).split()).lstrip("#") if v is not None else ""
        if title and title.lower() not in keys and len(title) <= 1000:
            keys.add(title.lower())
            out.append(title)
    return out


def inline_tags(body: str) -> list[str]:
    """``#tags`` written in the text, outside code; ``#123`` and headings are not tags."""
    out: list[str] = []
    in_fence = False
    for line in body.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or "#" not in line:
            continue
        for m in _INLINE_TAG.finditer(_INLINE_CODE.sub("", line)):
            tag = m.group(1).rstrip("/-")
            if tag and not tag.isdigit() and tag not in out:
                out.append(tag)
    return out


def _attach(r: _Reader, folder: str, target: str, note_id: str) -> str | None:
    """``:/<id>`` for a link to a file of the folder (made an attachment once); else ``None``."""
    if not is_relative_path(target):
        return None
    rel = path_of_target(target)
    if not rel or rel.lower().endswith(_NOTE_SUFFIXES):
        return None
    key = _key_inside(folder, rel)
    if key is None:
        r.notices.warn("left links to files outside the folder as they were", target)
        return None
    existing = r.attachments.get(key)
    if existing is not None:
        return f":/{existing.id}"
    item = _attachment(r, key, note_id)
    if item is None:
        return None
    r.attachments[key] = item
    r.found.append(item)
    return f":/{item.id}"


def _key_inside(folder: str, rel: str) -> str | None:
    """``folder/rel`` normalised (POSIX form), or ``None`` when ``..`` leads outside the
    folder: an import reads only the folder it was given (``files`` refuses links)."""
    key = posixpath.normpath(posixpath.join(folder, rel))
    if key.startswith(("/", "../")) or key in ("..", "."):
        return None
    return key


def _attachment(r: _Reader, key: str, note_id: str | None, *, missing: str = "") -> AttachmentItem | None:
    """The file ``key`` copied into staging as an attachment; ``None`` when it is missing (a
    skip named ``missing`` when given), a folder, a link or a special file (skipped)."""
    try:
        opened = open_inside(r.root, key)
    except NotRegular as exc:
        r.notices.skip(exc.kind, key)
        return None
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        if missing:
            r.notices.skip(missing, key)
        return None
    except OSError as exc:
        raise ImportExportError(
            f"{str(r.root / key)!r} cannot be read ({exc.strerror or exc}); check it and import again"
        ) from exc
    listed = r.manifest.get("attachments")
    meta = listed.get(key) if isinstance(listed, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    created = parse_time(meta.get("created"), f"{MANIFEST}: attachment {key!r} created") or opened.mtime_ms
    updated = parse_time(meta.get("updated"), f"{MANIFEST}: attachment {key!r} updated") or created
    filename = str(meta.get("filename") or PurePosixPath(key).name)
    owner = meta.get("note", note_id) if meta else note_id
    staged = r.staging / f"attachment-{len(r.attachments)}"
    with opened.file as src, open(staged, "xb") as out:
        size = r.budget.copy_attachment(src, out, key)
    return AttachmentItem(
        id=r.claim_id(meta.get("id"), key),
        note_id=owner if isinstance(owner, str) else None,
        title=str(meta.get("title") or filename),
        filename=filename,
        mime=str(meta.get("mime") or mimetypes.guess_type(filename)[0] or "application/octet-stream"),
        size=size,
        created_time=created,
        updated_time=updated,
        source=staged,
        staged=True,
    )


def _read_unlinked_attachments(r: _Reader) -> None:
    """Attachments the manifest lists that no note links (they still belong to the workspace)."""
    listed = r.manifest.get("attachments")
    if not isinstance(listed, dict):
        return
    for raw_key in listed:
        key = _key_inside("", str(raw_key))
        if key is None:
            r.notices.skip(f"skipped attachments listed in {MANIFEST} outside the folder", str(raw_key))
            continue
        if key in r.attachments:
            continue
        item = _attachment(
            r, key, None, missing=f"skipped attachments listed in {MANIFEST} whose file is missing"
        )
        if item is not None:
            r.attachments[key] = item
            r.found.append(item)


# -- writing --------------------------------------------------------------------------------


def write_folder(snapshot: Snapshot, dest: Path, progress: Progress) -> ExportSummary:
    """Write ``snapshot`` as a Markdown folder at ``dest`` (built aside, then renamed into place)."""
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.part")
    tmp.mkdir(parents=True)
    try:
        _write(snapshot, tmp, progress)
        if dest.exists():
            dest.rmdir()  # the caller checked that it is empty
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportSummary(
        destination=str(dest), format="md", notebooks=len(snapshot.books), notes=len(snapshot.notes),
        tags=len(snapshot.tags), attachments=len(snapshot.attachments), warnings=snapshot.notices.count,
        messages=snapshot.notices.messages(),
    )


def _write(snapshot: Snapshot, out: Path, progress: Progress) -> None:
    children: dict[str | None, list[BookItem]] = {}
    for b in snapshot.books:
        children.setdefault(b.parent_id, []).append(b)
    folder_of: dict[str, str] = {}
    names_in: dict[str, FolderNames] = {"": FolderNames()}
    names_in[""].claim(RESOURCES)
    stack: list[tuple[str | None, str]] = [(None, "")]
    while stack:
        parent, parent_path = stack.pop()
        for b in sorted(children.get(parent, []), key=lambda x: (x.title.lower(), x.created_time, x.id)):
            name = names_in[parent_path].claim(safe_name(b.title))
            path = f"{parent_path}/{name}" if parent_path else name
            folder_of[b.id] = path
            names_in[path] = FolderNames()
            (out / path).mkdir()
            stack.append((b.id, path))

    resource_names = FolderNames()
    resource_of: dict[str, str] = {}
    manifest_atts: dict[str, Any] = {}
    (out / RESOURCES).mkdir()
    for a in snapshot.attachments:
        stem, suffix = split_name(safe_name(a.filename, "file"))
        rel = f"{RESOURCES}/{resource_names.claim(stem, suffix)}"
        shutil.copyfile(a.source, out / rel)
        resource_of[a.id] = rel
        manifest_atts[rel] = {
            "id": a.id, "note": a.note_id, "title": a.title, "filename": a.filename, "mime": a.mime,
            "created": iso_from_ms(a.created_time), "updated": iso_from_ms(a.updated_time),
        }
    if not resource_of:
        (out / RESOURCES).rmdir()

    total = len(snapshot.notes)
    for i, n in enumerate(sorted(snapshot.notes, key=lambda x: (x.title.lower(), x.created_time, x.id))):
        folder = folder_of[n.notebook_id] if n.notebook_id else ""
        name = names_in[folder].claim(safe_name(n.title), ".md")
        depth = folder.count("/") + 1 if folder else 0

        def relink(target: str, depth: int = depth) -> str | None:
            m = RESOURCE_LINK.match(target)
            rel = resource_of.get(m.group(1)) if m else None
            return quote_path("../" * depth + rel) if rel else None

        body = rewrite_links(n.body, relink) if resource_of and ":/" in n.body else n.body
        (out / folder / name).write_bytes(frontmatter.render(note_front_matter(n), body).encode("utf-8"))
        if i % 1000 == 0:
            progress("exporting", i, total)
    progress("exporting", total, total)

    manifest = {
        "format": MANIFEST_FORMAT,
        "notebooks": {
            folder_of[b.id]: {
                "id": b.id, "title": b.title,
                "created": iso_from_ms(b.created_time), "updated": iso_from_ms(b.updated_time),
            }
            for b in snapshot.books
        },
        "tags": [
            {"id": t.id, "title": t.title, "created": iso_from_ms(t.created_time), "updated": iso_from_ms(t.updated_time)}
            for t in snapshot.tags
        ],
        "attachments": manifest_atts,
    }
    (out / MANIFEST).write_bytes(frontmatter.dump(manifest).encode("utf-8"))


def note_front_matter(n: NoteItem) -> dict[str, Any]:
    """The front matter of an exported note; empty fields are left out."""
    data: dict[str, Any] = {"id": n.id, "title": n.title}
    if n.tags:
        data["tags"] = list(n.tags)
    data["created"] = iso_from_ms(n.created_time)
    data["updated"] = iso_from_ms(n.updated_time)
    if n.is_todo or n.todo_due is not None or n.todo_completed is not None:
        data["is_todo"] = n.is_todo
    if n.todo_due is not None:
        data["due"] = iso_from_ms(n.todo_due)
    if n.todo_completed is not None:
        data["completed"] = iso_from_ms(n.todo_completed)
    if n.source_url:
        data["source_url"] = n.source_url
    return data


def check_destination(dest: Path) -> None:
    """An export goes to a new path or an empty folder, never over a user's files."""
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        raise ImportExportError(f"{str(dest)!r} exists already; export to a new path or an empty folder")
    if not dest.parent.is_dir():
        raise ImportExportError(f"folder {str(dest.parent)!r} does not exist; create it first")
