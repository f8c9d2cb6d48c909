"""What a reader hands the bulk writer: notebooks, notes, tags and attachments read from
one source, plus the warnings collected on the way."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

SourceFormat = Literal["markdown", "jex", "raw"]
Duplicates = Literal["skip", "new-ids"]

#: ``progress(phase, done, total)``; phases are "reading", "writing", "files", "exporting".
Progress = Callable[[str, int, int], None]


def no_progress(_phase: str, _done: int, _total: int) -> None:
    """The progress callback that shows nothing."""


@dataclass
class BookItem:
    id: str
    title: str
    #: Another book of the bundle, or ``None`` for a top-level one (or one under ``--notebook``).
    parent_id: str | None
    created_time: int
    updated_time: int


@dataclass
class NoteItem:
    id: str
    #: A book of the bundle; ``None`` puts the note in the import's own root notebook.
    notebook_id: str | None
    title: str
    body: str
    created_time: int
    updated_time: int
    is_todo: bool = False
    todo_due: int | None = None
    todo_completed: int | None = None
    source_url: str = ""
    tags: list[str] = field(default_factory=list)
    #: Where ``body`` waits in the import's ``BodySpool`` (then ``body`` is empty).
    body_ref: tuple[int, int] | None = None
    #: ``body`` as the keyword index sees it, worked out ahead by the reading thread (see
    #: ``writer``); ``None`` when the writer's connection works it out itself.
    indexed: str | None = None


class BodySpool:
    """Note bodies parked in a file of the import's staging folder until the writer needs
    them: an import then holds ids, titles and times in memory, not every note's text
    (a 100,000-note archive kept its whole text, and each item's 30 properties, in RAM)."""

    def __init__(self, path: Path) -> None:
        self._file: IO[bytes] = open(path, "w+b")  # noqa: SIM115 -- closed by close()
        self._end = 0

    def put(self, body: str) -> tuple[int, int]:
        data = body.encode("utf-8")
        self._file.seek(self._end)
        self._file.write(data)
        ref = (self._end, len(data))
        self._end += len(data)
        return ref

    def get(self, ref: tuple[int, int]) -> str:
        self._file.seek(ref[0])
        return self._file.read(ref[1]).decode("utf-8")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> BodySpool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


@dataclass
class TagItem:
    id: str
    title: str
    created_time: int
    updated_time: int


@dataclass
class AttachmentItem:
    id: str
    note_id: str | None
    title: str
    filename: str
    mime: str
    size: int
    created_time: int
    updated_time: int
    #: The file's bytes are here; ``staged`` files belong to the import and may be moved.
    source: Path
    staged: bool = False


class Notices:
    """Warnings of one import or export, counted by kind so a thousand skips read as one line."""

    def __init__(self) -> None:
        self.skipped = 0
        #: (item, why) of every item left out, for the summary to list.
        self.skips: list[tuple[str, str]] = []
        self._groups: dict[str, list[str]] = {}
        self._order: list[str] = []

    def warn(self, kind: str, example: str = "") -> None:
        """Note one occurrence of ``kind`` (a sentence fragment), with an example item."""
        if kind not in self._groups:
            self._groups[kind] = []
            self._order.append(kind)
        self._groups[kind].append(example)

    def skip(self, kind: str, example: str = "") -> None:
        """An item was left out; counted in ``skipped`` and listed in ``skips`` as well."""
        self.skipped += 1
        self.skips.append((example, kind))
        self.warn(kind, example)

    def extend(self, other: Notices) -> None:
        """Add every notice of ``other`` after those of this one."""
        self.skipped += other.skipped
        self.skips.extend(other.skips)
        for kind in other._order:
            for example in other._groups[kind]:
                self.warn(kind, example)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self._groups.values())

    def messages(self) -> list[str]:
        out = []
        for kind in self._order:
            items = self._groups[kind]
            examples = [e for e in items if e][:3]
            shown = f" ({', '.join(examples)}{', …' if len(items) > len(examples) else ''})" if examples else ""
            out.append(f"{kind}: {len(items)}{shown}")
        return out


@dataclass
class Bundle:
    format: SourceFormat
    #: Title of the notebook created for notes that name none (the folder or archive name).
    root_title: str
    books: list[BookItem] = field(default_factory=list)
    notes: list[NoteItem] = field(default_factory=list)
    tags: list[TagItem] = field(default_factory=list)
    #: Attachments before the notes that link them: a streamed bundle adds to the list while
    #: its notes are read, each attachment before the first note that links it.
    attachments: list[AttachmentItem] = field(default_factory=list)
    notices: Notices = field(default_factory=Notices)
    spool: BodySpool | None = None
    #: The notes read as the writer takes them (then ``notes`` stays empty), a Markdown
    #: folder's: the import holds a few batches of notes, not the whole folder.
    stream: Iterable[NoteItem] | None = None
    #: How many notes ``stream`` is about to give, for the progress bar.
    expected_notes: int | None = None

    def park(self, note: NoteItem) -> NoteItem:
        """Move ``note``'s body to the spool (when there is one); returns the note."""
        if self.spool is not None and note.body:
            note.body_ref = self.spool.put(note.body)
            note.body = ""
        return note

    def body_of(self, note: NoteItem) -> str:
        if note.body_ref is not None and self.spool is not None:
            return self.spool.get(note.body_ref)
        return note.body


@dataclass(frozen=True)
class ImportSummary:
    """What an import did: counts of what was written, of what was left out, and of the
    warnings, with one message per kind of warning."""

    source: str
    format: SourceFormat
    notebooks: int
    notes: int
    tags: int
    attachments: int
    skipped: int
    warnings: int
    messages: list[str]
    #: Every item left out: ``{"item": name or id, "reason": why}``.
    skipped_items: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class ExportSummary:
    destination: str
    format: Literal["md", "jex"]
    notebooks: int
    notes: int
    tags: int
    attachments: int
    warnings: int
    messages: list[str]
