"""The notes workspace: notebooks, notes, to-dos, tags, trash, revisions, attachments.

``Workspace`` is the domain's one entry point. Every write runs in one database
transaction that also appends to the change feed (``note_changes``) and keeps the
keyword index current (triggers installed by the search migration), so a crash
mid-operation leaves the workspace as it was before the operation.

Modules: ``model`` (data classes, row converters, value checks), ``changes`` (the
change feed), ``store`` (engine and transaction helpers), ``revisions`` (a note's history,
kept as ``delta`` edit scripts with full snapshots), and the mixins ``Workspace``
is composed of, each building on the one before: ``notebooks``, ``notes`` (notes,
tags, revisions, attachments) and ``trash``; users and settings come from ``accounts``.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from noteloom.accounts import Accounts, User
from noteloom.db import DataVersion
from noteloom.people import People
from noteloom.workspace.changes import ChangeKind, record_change
from noteloom.workspace.model import (
    DEFAULT_NOTEBOOK_TITLE,
    Attachment,
    Note,
    Notebook,
    NoteSummary,
    Revision,
    Tag,
    TrashItem,
    check_id,
)
from noteloom.workspace.notebooks import Notebooks
from noteloom.workspace.notes import Notes
from noteloom.workspace.trash import Trash

__all__ = [
    "DEFAULT_NOTEBOOK_TITLE",
    "Attachment",
    "ChangeKind",
    "Note",
    "NoteSummary",
    "Notebook",
    "Revision",
    "Tag",
    "TrashItem",
    "User",
    "Workspace",
    "check_id",
    "record_change",
]


class Workspace(Trash, Notes, Notebooks, People, Accounts):
    """Notes, notebooks, tags, trash, revisions, attachments, users and run-time settings."""

    def __init__(self, engine: Engine, data_dir: Path) -> None:
        self.engine = engine
        self.data_dir = data_dir
        self.attachments_dir = data_dir / "attachments"
        #: Changes whenever anyone commits (``None``: not known here); see ``db.DataVersion``.
        self.data_version = DataVersion(engine)
