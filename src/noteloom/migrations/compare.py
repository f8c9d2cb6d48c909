"""What the models cannot describe, by name: comparing the models with a migrated schema
(Alembic's ``compare_metadata``, and autogenerate through ``env.py``) leaves exactly these
to the migrations that own them, and compares everything else.

The rule (docs/schema.md): an object is left out only when SQLAlchemy's ``Table`` cannot
express it or the application creates it at run time, and it is named here with its owner.
A table named here takes its shadow tables (``name_…``: FTS5 and sqlite-vec keep their
data in them) with it. Triggers and SQL functions are never compared by Alembic; they are
listed for the record and checked to exist by the schema tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.runtime.environment import NameFilterParentNames, NameFilterType

#: Tables (and their ``name_…`` shadow tables) no ``sa.Table`` models.
TABLES: Mapping[str, str] = {
    "notes_fts": "SQLite FTS5 virtual table of the keyword index (migration 0002)",
    "semantic_vectors": "created by noteloom.vectors when an index is built: its shape depends on the model",
    "notes_titles": "SQLite FTS5 trigram table of live notes' titles (migration 0022)",
}

#: ``(table, column)`` pairs the models leave out.
COLUMNS: Mapping[tuple[str, str], str] = {
    ("notes", "search_vector"): "PostgreSQL generated tsvector of the keyword index (migration 0002)",
}

#: Indexes the models leave out (those of the columns and tables above).
INDEXES: Mapping[str, str] = {
    "ix_notes_search_vector": "PostgreSQL GIN index on notes.search_vector (migration 0002)",
    "ix_notes_live_title": "live notes by exact title: a B-tree on SQLite, a hash index on PostgreSQL (migration 0022)",
    "ix_notes_title_trgm": "PostgreSQL pg_trgm GIN index on lower(notes.title) (migration 0022)",
    "ix_notes_body_trgm": "PostgreSQL pg_trgm GIN index on notes.body (migration 0022)",
}

#: Not compared by Alembic at all; the schema tests check that they exist.
TRIGGERS: Mapping[str, str] = {
    "notes_fts_insert": "SQLite: a new live note enters notes_fts (migration 0002)",
    "notes_fts_delete": "SQLite: a deleted live note leaves notes_fts (migration 0002)",
    "notes_fts_update": "SQLite: an edit, trashing or restore updates notes_fts (migration 0002)",
    "notes_titles_insert": "SQLite: a new live note's title enters notes_titles (migration 0022)",
    "notes_titles_delete": "SQLite: a deleted live note's title leaves notes_titles (migration 0022)",
    "notes_titles_update": "SQLite: a retitling, trashing or restore updates notes_titles (migration 0022)",
}
FUNCTIONS: Mapping[str, str] = {
    "noteloom_index_text": "PostgreSQL twin of db.index_text (migration 0002)",
    "noteloom_search_vector": "PostgreSQL: the expression of notes.search_vector (migration 0002)",
}


def _owned_table(name: str) -> bool:
    return any(name == t or name.startswith(t + "_") for t in TABLES)


def include_name(name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames) -> bool:
    """Alembic's ``include_name`` hook: ``False`` for a reflected object named above. Tables
    are filtered before they are reflected (a ``vec0`` table cannot be without sqlite-vec)."""
    if name is None:
        return True
    if type_ == "table":
        return not _owned_table(name)
    if type_ == "column":
        return (parent_names.get("table_name") or "", name) not in COLUMNS
    if type_ == "index":
        return name not in INDEXES
    return True
