"""Indexes for titles and links: the quick switcher's "title holds this", a ``[[Title]]``
looked up by its exact title, and on PostgreSQL the backlinks' search of the bodies.

Each of these read every live note before (the quick switcher 47.6 ms at 100,000 notes).

SQLite: ``notes_titles``, a contentless FTS5 table of live notes' titles with the trigram
tokenizer (case-insensitive): a phrase of three characters or more finds the titles holding
it as a substring, and the query then checks its own ``LIKE`` on those rows only. Triggers keep
it in step with ``notes`` as those of ``notes_fts`` (migration 0002) do. ``ix_notes_live_title``:
live notes by exact title. Backlinks already go through ``notes_fts``.

PostgreSQL: pg_trgm GIN indexes on live notes' ``lower(title)`` and ``body``, which answer the
``LIKE '%…%'`` the queries already make (the quick switcher's; a backlink's ``:/ID`` or
``[[Title``), and a hash index of live notes by exact title (a B-tree would refuse a title past
2.7 kB). Where pg_trgm is not installed the two trigram indexes are left out: the queries
are the same, only slower.

Revision ID: 0022_title_and_link_indexes
Revises: 0021_notes_live_by_notebook
"""

from alembic import op

revision = "0022_title_and_link_indexes"
down_revision = "0021_notes_live_by_notebook"
branch_labels = None
depends_on = None

SQLITE_UP = [
    "CREATE INDEX ix_notes_live_title ON notes (title) WHERE deleted_time IS NULL",
    "CREATE VIRTUAL TABLE notes_titles USING fts5(title, content='', tokenize='trigram case_sensitive 0')",
    """CREATE TRIGGER notes_titles_insert AFTER INSERT ON notes WHEN new.deleted_time IS NULL
    BEGIN
        INSERT INTO notes_titles(rowid, title) VALUES (new.seq, new.title);
    END""",
    # A contentless table forgets a row only when told exactly what it indexed.
    """CREATE TRIGGER notes_titles_delete AFTER DELETE ON notes WHEN old.deleted_time IS NULL
    BEGIN
        INSERT INTO notes_titles(notes_titles, rowid, title) VALUES ('delete', old.seq, old.title);
    END""",
    """CREATE TRIGGER notes_titles_update AFTER UPDATE OF title, deleted_time ON notes
    BEGIN
        INSERT INTO notes_titles(notes_titles, rowid, title)
            SELECT 'delete', old.seq, old.title WHERE old.deleted_time IS NULL;
        INSERT INTO notes_titles(rowid, title) SELECT new.seq, new.title WHERE new.deleted_time IS NULL;
    END""",
    "INSERT INTO notes_titles(rowid, title) SELECT seq, title FROM notes WHERE deleted_time IS NULL",
]

SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS notes_titles_insert",
    "DROP TRIGGER IF EXISTS notes_titles_delete",
    "DROP TRIGGER IF EXISTS notes_titles_update",
    "DROP TABLE IF EXISTS notes_titles",
    "DROP INDEX IF EXISTS ix_notes_live_title",
]

POSTGRES_UP = ["CREATE INDEX ix_notes_live_title ON notes USING hash (title) WHERE deleted_time IS NULL"]

POSTGRES_TRIGRAMS = [
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX ix_notes_title_trgm ON notes USING gin (lower(title) gin_trgm_ops) WHERE deleted_time IS NULL",
    "CREATE INDEX ix_notes_body_trgm ON notes USING gin (body gin_trgm_ops) WHERE deleted_time IS NULL",
]

POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_notes_body_trgm",
    "DROP INDEX IF EXISTS ix_notes_title_trgm",
    "DROP INDEX IF EXISTS ix_notes_live_title",
]


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        statements = SQLITE_UP
    else:
        trgm = conn.exec_driver_sql("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'").first()
        statements = POSTGRES_UP + (POSTGRES_TRIGRAMS if trgm else [])
    for statement in statements:
        conn.exec_driver_sql(statement)


def downgrade() -> None:
    conn = op.get_bind()
    for statement in SQLITE_DOWN if conn.dialect.name == "sqlite" else POSTGRES_DOWN:
        conn.exec_driver_sql(statement)
