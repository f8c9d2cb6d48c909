"""``noteloom import`` and ``noteloom export`` as a user types them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from noteloom.cli import cli

FIXTURES = Path(__file__).parent / "fixtures" / "joplin"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("NOTELOOM_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> Result:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == code, f"{args}: {result.output}"
        return result

    return invoke


def test_import_prints_a_json_summary(run) -> None:  # type: ignore[no-untyped-def]
    result = run("import", str(FIXTURES / "sample.jex"), "--json")
    assert json.loads(result.stdout) == {
        "source": str(FIXTURES / "sample.jex"), "format": "jex", "notebooks": 5, "notes": 6, "tags": 4,
        "attachments": 2, "skipped": 0, "warnings": 0, "messages": [], "skipped_items": [],
    }
    again = json.loads(run("import", str(FIXTURES / "raw"), "--json").stdout)
    assert (again["format"], again["notes"], again["skipped"], again["warnings"]) == ("raw", 0, 8, 13)
    assert any("--duplicates new-ids" in m for m in again["messages"])
    listed = json.loads(run("notes", "list", "--json").stdout)
    assert len(listed) == 6


def test_import_shows_progress_on_stderr_when_asked(run) -> None:  # type: ignore[no-untyped-def]
    result = run("import", str(FIXTURES / "sample.jex"), "--progress")
    assert "writing notes" in result.stderr and "100%" in result.stderr
    assert result.stdout.strip() == (
        f"imported 6 notes, 5 notebooks, 4 tags, 2 attachments from {FIXTURES / 'sample.jex'} (jex)"
    )
    quiet = run("import", str(FIXTURES / "raw"), "--no-progress")
    assert "writing notes" not in quiet.stderr
    assert "warning: skipped notes whose id exists already" in quiet.stderr


def test_export_then_import_in_another_home(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("import", str(FIXTURES / "sample.jex"))
    out = json.loads(run("export", str(tmp_path / "all.jex"), "--json").stdout)
    assert (out["format"], out["notes"], out["attachments"]) == ("jex", 6, 2)
    md = run("export", str(tmp_path / "md"), "--format", "md")
    assert "exported 6 notes, 5 notebooks, 4 tags, 2 attachments" in md.stdout
    assert (tmp_path / "md" / "Work" / "Projects" / "Alpha" / "Project plan.md").is_file()
    (tmp_path / "other").mkdir()
    other = json.loads(
        run("import", str(tmp_path / "md"), "--home", str(tmp_path / "other"), "--json").stdout
    )
    assert (other["format"], other["notes"], other["attachments"], other["skipped"]) == ("markdown", 6, 2, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "{tmp}/missing"], "does not exist"),
        (["import", "{fixtures}/make_fixtures.py"], "is not a .jex archive"),
        (["import", "{tmp}"], "holds neither Markdown notes"),
        (["import", "{fixtures}/sample.jex", "--notebook", "Nowhere"], "no notebook named 'Nowhere'"),
        (["export", "{fixtures}/sample.jex"], "exists already"),
        (["import", "{fixtures}/sample.jex", "--duplicates", "merge"], "Invalid value for '--duplicates'"),
    ],
)
def test_bad_input_is_one_error_line_and_a_failing_exit(run, tmp_path: Path, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    filled = [a.format(tmp=tmp_path / "empty", fixtures=FIXTURES) for a in args]
    result = run(*filled, code=2 if "merge" in args else 1)
    assert message in result.stderr
    if "merge" not in args:
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
