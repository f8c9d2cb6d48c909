"""The keyword index: SQLite FTS5 or a PostgreSQL tsvector, kept current by the database itself.

SQLite: a contentless FTS5 table ``notes_fts`` (title, body) whose rowid is
``notes.seq``. Triggers on ``notes`` keep it in step within the writing
transaction; notes in the trash are taken out of it and put back on restore.
The text goes through ``noteloom_index_text`` (``db.index_text``, registered
on every connection), which splits CJK runs into overlapping character pairs.

PostgreSQL: a generated ``search_vector`` column (title weighted ``A``, body
``B``) over the same normalisation in SQL, with a GIN index on live notes.

Both: ``ix_notes_live_recent``, live notes newest first with the filtered
columns, for queries made only of filters.

Revision ID: 0002_keyword_index
Revises: 0001
"""

from alembic import op

from noteloom.db import CJK_CHARS, INDEX_TEXT_SQL

revision = "0002_keyword_index"
down_revision = "0001"
branch_labels = None
depends_on = None

_TEXT = f"{INDEX_TEXT_SQL}(new.title), {INDEX_TEXT_SQL}(new.body)"
_OLD_TEXT = f"{INDEX_TEXT_SQL}(old.title), {INDEX_TEXT_SQL}(old.body)"

# Live notes by recency, with the columns filters test: a query made only of filters reads
# this index newest first and touches the table only for the page it returns.
RECENT_INDEX = (
    "CREATE INDEX ix_notes_live_recent ON notes "
    "(updated_time, id, notebook_id, created_time, is_todo, todo_due, todo_completed) "
    "WHERE deleted_time IS NULL"
)

SQLITE_UP = [
    RECENT_INDEX,
    # Contentless: the bodies live once, in ``notes``; the index keeps only what it needs to rank.
    "CREATE VIRTUAL TABLE notes_fts USING fts5(title, body, content='', "
    "tokenize='unicode61 remove_diacritics 2')",
    # A title hit counts ten times a body hit; ``ORDER BY rank`` then uses this.
    "INSERT INTO notes_fts(notes_fts, rank) VALUES ('rank', 'bm25(10.0, 1.0)')",
    f"""CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes WHEN new.deleted_time IS NULL
    BEGIN
        INSERT INTO notes_fts(rowid, title, body) VALUES (new.seq, {_TEXT});
    END""",
    # A contentless table forgets a row only when told exactly what it indexed.
    f"""CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes WHEN old.deleted_time IS NULL
    BEGIN
        INSERT INTO notes_fts(notes_fts, rowid, title, body) VALUES ('delete', old.seq, {_OLD_TEXT});
    END""",
    f"""CREATE TRIGGER notes_fts_update AFTER UPDATE OF title, body, deleted_time ON notes
    BEGIN
        INSERT INTO notes_fts(notes_fts, rowid, title, body)
            SELECT 'delete', old.seq, {_OLD_TEXT} WHERE old.deleted_time IS NULL;
        INSERT INTO notes_fts(rowid, title, body)
            SELECT new.seq, {_TEXT} WHERE new.deleted_time IS NULL;
    END""",
    f"""INSERT INTO notes_fts(rowid, title, body)
        SELECT seq, {INDEX_TEXT_SQL}(title), {INDEX_TEXT_SQL}(body) FROM notes
        WHERE deleted_time IS NULL""",
]

SQLITE_DOWN = [
    "DROP INDEX IF EXISTS ix_notes_live_recent",
    "DROP TRIGGER IF EXISTS notes_fts_insert",
    "DROP TRIGGER IF EXISTS notes_fts_delete",
    "DROP TRIGGER IF EXISTS notes_fts_update",
    "DROP TABLE IF EXISTS notes_fts",
]

# ASCII and common Unicode punctuation and symbols become spaces, as in SQLite's unicode61:
# PostgreSQL's parser would otherwise keep e-mails, paths and (in the C locale) any
# non-ASCII punctuation inside words.
_PUNCT = (
    r"[!-/:-@\[-`{-~\u00a0-\u00bf\u00d7\u00f7\u2000-\u206f\u20a0-\u20cf\u2100-\u2bff"
    r"\u3000-\u3004\u3008-\u303f\u30fb\ufe30-\ufe4f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40"
    r"\uff5b-\uff65\U0001f000-\U0001faff]+"
)
_CJK = f"[{CJK_CHARS}]"

POSTGRES_UP = [
    RECENT_INDEX,
    # The twin of db.index_text: each CJK run becomes its overlapping character pairs plus
    # its last character alone.
    rf"""CREATE OR REPLACE FUNCTION noteloom_index_text(t text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT regexp_replace(
        CASE WHEN t !~ '{_CJK}' THEN t ELSE (
            SELECT coalesce(string_agg(
                CASE WHEN p[1] IS NULL THEN p[2] ELSE (
                    SELECT ' ' || string_agg(substr(p[1], i, 2), ' ' ORDER BY i) || ' '
                    FROM generate_series(1, char_length(p[1])) AS i)
                END, '' ORDER BY k), '')
            FROM regexp_matches(t, '({_CJK}+)|([^{CJK_CHARS}]+)', 'g') WITH ORDINALITY AS r(p, k))
        END,
        '{_PUNCT}', ' ', 'g')
    $fn$""",
    r"""CREATE OR REPLACE FUNCTION noteloom_search_vector(title text, body text) RETURNS tsvector
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
    BEGIN
        RETURN setweight(to_tsvector('simple'::regconfig, noteloom_index_text(coalesce(title, ''))), 'A')
            || setweight(to_tsvector('simple'::regconfig, noteloom_index_text(coalesce(body, ''))), 'B');
    EXCEPTION WHEN program_limit_exceeded THEN
        -- A tsvector is capped at 1 MB: a note past that is indexed by its beginning only,
        -- rather than refused.
        RETURN setweight(to_tsvector('simple'::regconfig, noteloom_index_text(left(coalesce(title, ''), 1000))), 'A')
            || setweight(to_tsvector('simple'::regconfig, noteloom_index_text(left(coalesce(body, ''), 100000))), 'B');
    END
    $fn$""",
    "ALTER TABLE notes ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (noteloom_search_vector(title, body)) STORED",
    "CREATE INDEX ix_notes_search_vector ON notes USING gin (search_vector) "
    "WHERE deleted_time IS NULL",
]

POSTGRES_DOWN = [
    "DROP INDEX IF EXISTS ix_notes_live_recent",
    "DROP INDEX IF EXISTS ix_notes_search_vector",
    "ALTER TABLE notes DROP COLUMN IF EXISTS search_vector",
    "DROP FUNCTION IF EXISTS noteloom_search_vector(text, text)",
    "DROP FUNCTION IF EXISTS noteloom_index_text(text)",
]


def _run(sqlite: list[str], postgres: list[str]) -> None:
    conn = op.get_bind()
    # Sent as they are: the statements are full of colons and brackets, no bind parameters.
    for statement in sqlite if conn.dialect.name == "sqlite" else postgres:
        conn.exec_driver_sql(statement)


def upgrade() -> None:
    _run(SQLITE_UP, POSTGRES_UP)


def downgrade() -> None:
    _run(SQLITE_DOWN, POSTGRES_DOWN)
