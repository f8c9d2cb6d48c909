"""The migrations form one line with a single head; released migrations keep their place in
it; the start-up check that skips Alembic reads the same head Alembic does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from noteloom import db

VERSIONS = Path(db.__file__).with_name("migrations") / "versions"

#: Every released migration's parents and dependencies, as databases' version tables record
#: them. Editing these re-shapes the history under existing databases (Alembic then refuses
#: to upgrade them: a ``depends_on`` added to 0005 made it report "0005 overlaps with
#: 0002_keyword_index" on every database built before): write a new migration instead, and
#: add it here.
RELEASED: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "0001": ((), ()),
    "0002_keyword_index": (("0001",), ()),
    "0003": (("0001",), ()),
    "0004": (("0001",), ()),
    "0005": (("0001",), ()),
    "0006": (("0001",), ()),
    "0007": (("0001",), ()),
    "0008_chat_turn_runner": (("0004",), ()),
    "0009_conversation_budgets": (("0008_chat_turn_runner",), ()),
    "0010_conversation_tool_policies": (("0009_conversation_budgets",), ()),
    "0011_one_head": (
        ("0002_keyword_index", "0003", "0005", "0006", "0007", "0010_conversation_tool_policies"),
        (),
    ),
    "0012_run_engine": (("0011_one_head",), ()),
    "0013_recipes": (("0012_run_engine",), ()),
    "0014_memory": (("0013_recipes",), ()),
    "0015_chat_attachments": (("0014_memory",), ()),
    "0016_token_scopes": (("0015_chat_attachments",), ()),
    "0017_user_vaults": (("0016_token_scopes",), ()),
}


@pytest.fixture(scope="module")
def script() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(VERSIONS.parent))
    return ScriptDirectory.from_config(cfg)


def _tuple(value: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def test_the_migrations_have_exactly_one_head(script: ScriptDirectory) -> None:
    heads = script.get_heads()
    assert len(heads) == 1, (
        f"migration heads {sorted(heads)}: a new migration's down_revision is the head of before "
        "(docs/schema.md); when two were written side by side, chain one after the other"
    )
    # Every branch ends in it: nothing is left beside the line, nor only depended on.
    everything = {r.revision for r in script.walk_revisions()}
    assert {r.revision for r in script.iterate_revisions(heads[0], "base")} == everything


def test_released_migrations_keep_their_parents(script: ScriptDirectory) -> None:
    def normal(graph: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> dict[str, tuple[list[str], list[str]]]:
        return {rev: (sorted(down), sorted(deps)) for rev, (down, deps) in graph.items()}

    found = {
        r.revision: (_tuple(r.down_revision), _tuple(r.dependencies))
        for r in script.walk_revisions()
        if r.revision in RELEASED
    }
    assert normal(found) == normal(RELEASED)


def test_each_migration_is_numbered_once_and_named_for_its_revision(script: ScriptDirectory) -> None:
    numbers: dict[str, str] = {}
    for path in sorted(VERSIONS.glob("*.py")):
        number = re.match(r"\d{4}_", path.name)
        assert number, f"{path.name}: migrations are named NNNN_what_it_does.py"
        assert number.group() not in numbers, f"{path.name} and {numbers[number.group()]} share a number"
        numbers[number.group()] = path.name
        revision = script.get_revision(re.search(r'^revision = "([^"]+)"', path.read_text(), re.M).group(1))  # type: ignore[union-attr]
        assert revision is not None and path.stem.startswith(revision.revision)


def test_the_start_up_check_reads_the_head_alembic_reads(script: ScriptDirectory) -> None:
    # db.migrate skips importing Alembic when the database is at these: they must be Alembic's.
    assert db.migration_heads() == set(script.get_heads())


def _script(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text, encoding="utf-8")


def test_the_start_up_check_reads_merges_and_gives_up_on_what_it_cannot_read(tmp_path: Path) -> None:
    _script(tmp_path, "0001_a.py", 'revision = "0001"\ndown_revision = None\n')
    _script(tmp_path, "0002_b.py", 'revision: str = "0002_b"\ndown_revision: str | None = "0001"\n')
    _script(tmp_path, "0003_c.py", "revision = '0003'\ndown_revision = '0001'\n")
    assert db.migration_heads(tmp_path) == {"0002_b", "0003"}
    _script(tmp_path, "0004_merge.py", 'revision = "0004"\ndown_revision = (\n    "0002_b",\n    "0003",\n)\n')
    assert db.migration_heads(tmp_path) == {"0004"}
    # Anything else is left to Alembic, which reads the scripts as Python.
    _script(tmp_path, "0005_d.py", 'revision = "0005"\ndown_revision = ("0004", PARENT)\n')
    assert db.migration_heads(tmp_path) is None
    _script(tmp_path, "0005_d.py", 'revision = "0005"\ndown_revision = PREVIOUS\n')
    assert db.migration_heads(tmp_path) is None
