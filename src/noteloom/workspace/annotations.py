"""What pipeline jobs found about notes, kept beside them: a one-line summary, a clipped
page's danger score and red flags (``note_annotations``), and the notes a job made from a
source note (``job_outputs``), so a re-run updates them instead of adding more.

Migration ``0013`` creates the tables. The functions below them take a connection (the
caller's transaction), as ``noteloom.runs.store`` does: a job writes a note and what it
found about it in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from noteloom.db import ID, MS, metadata, now_ms

note_annotations = sa.Table(
    "note_annotations",
    metadata,
    sa.Column("note_id", ID, sa.ForeignKey("notes.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("summary", sa.Text),
    sa.Column("summary_model", sa.String(200)),
    sa.Column("summary_time", MS),
    sa.Column("danger_score", sa.Integer),
    sa.Column("danger_verdict", sa.String(16)),
    sa.Column("red_flags", sa.JSON),
    sa.Column("scan_model", sa.String(200)),
    sa.Column("scan_time", MS),
)

job_outputs = sa.Table(
    "job_outputs",
    metadata,
    sa.Column("job", sa.String(64), primary_key=True),
    sa.Column("source_id", ID, primary_key=True),
    # Which of the source's outputs (an event's position, or a stable key of it).
    sa.Column("slot", sa.String(200), primary_key=True),
    # No foreign key: when the user deletes the made note, a re-run makes it again.
    sa.Column("note_id", ID, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
)


@dataclass(frozen=True)
class Summary:
    """A one-line summary of a note, written by a model (``model``) at ``time`` (UTC ms)."""

    text: str
    model: str
    time: int


@dataclass(frozen=True)
class ClipScan:
    """A clipped page's danger as a model judged it: ``score`` 0–10, ``verdict`` safe,
    suspicious or dangerous, and the red flags it saw."""

    score: int
    verdict: str
    red_flags: tuple[str, ...]
    model: str
    time: int


@dataclass(frozen=True)
class Annotations:
    """What pipeline jobs found about one note (either part may be missing)."""

    note_id: str
    summary: Summary | None
    scan: ClipScan | None


def _upsert_annotation(conn: Connection, note_id: str, values: dict[str, Any]) -> None:
    # One row per note, written in parts by different jobs: update the part, else insert it.
    # A dialect's ON CONFLICT would save a statement but not a round trip worth having here.
    done = conn.execute(
        note_annotations.update().where(note_annotations.c.note_id == note_id).values(**values)
    )
    if not done.rowcount:
        conn.execute(note_annotations.insert(), {"note_id": note_id, **values})


def set_summary(conn: Connection, note_id: str, text: str, *, model: str, time: int | None = None) -> None:
    """Keep ``text`` as ``note_id``'s summary (replacing an earlier one)."""
    _upsert_annotation(conn, note_id, {"summary": text, "summary_model": model, "summary_time": time or now_ms()})


def set_clip_scan(
    conn: Connection, note_id: str, *, score: int, verdict: str, red_flags: Sequence[str], model: str,
    time: int | None = None,
) -> None:
    """Keep a clipped note's scan (replacing an earlier one)."""
    _upsert_annotation(conn, note_id, {
        "danger_score": score, "danger_verdict": verdict, "red_flags": list(red_flags),
        "scan_model": model, "scan_time": time or now_ms(),
    })


def annotations_of(conn: Connection, note_id: str) -> Annotations | None:
    """What jobs found about ``note_id``; ``None`` when nothing."""
    r = conn.execute(sa.select(note_annotations).where(note_annotations.c.note_id == note_id)).first()
    if r is None:
        return None
    summary = (
        Summary(r.summary, r.summary_model or "", int(r.summary_time or 0)) if r.summary is not None else None
    )
    scan = (
        ClipScan(int(r.danger_score), r.danger_verdict or "", tuple(r.red_flags or ()), r.scan_model or "",
                 int(r.scan_time or 0))
        if r.danger_score is not None else None
    )
    if summary is None and scan is None:
        return None
    return Annotations(note_id, summary, scan)


def job_output(conn: Connection, job: str, source_id: str, slot: str) -> str | None:
    """The id of the note ``job`` made for ``source_id``'s ``slot`` (it may since have been
    trashed or purged: the caller looks), or ``None``."""
    return conn.execute(
        sa.select(job_outputs.c.note_id).where(
            job_outputs.c.job == job, job_outputs.c.source_id == source_id, job_outputs.c.slot == slot
        )
    ).scalar()


def job_outputs_of(conn: Connection, job: str, source_id: str) -> dict[str, str]:
    """Every note ``job`` made for ``source_id``, by slot."""
    rows = conn.execute(
        sa.select(job_outputs.c.slot, job_outputs.c.note_id).where(
            job_outputs.c.job == job, job_outputs.c.source_id == source_id
        )
    )
    return {r.slot: r.note_id for r in rows}


def set_job_output(
    conn: Connection, job: str, source_id: str, slot: str, note_id: str, *, time: int | None = None
) -> None:
    """Remember that ``note_id`` is what ``job`` made for ``source_id``'s ``slot``."""
    values = {"note_id": note_id, "updated_time": time or now_ms()}
    done = conn.execute(
        job_outputs.update().where(
            job_outputs.c.job == job, job_outputs.c.source_id == source_id, job_outputs.c.slot == slot
        ).values(**values)
    )
    if not done.rowcount:
        conn.execute(job_outputs.insert(), {"job": job, "source_id": source_id, "slot": slot, **values})
