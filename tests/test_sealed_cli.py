"""``noteloom vault …`` as a user types it: init shows the recovery key once with the warning,
status, unlock for the API token (which then reads protected chats over the API), lock,
rotate; passphrases come from stdin or the terminal, never an argument."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from noteloom.app import App, access_token, open_app
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.vault import Vault
from sealed_support import PASS


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str) -> Path:
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    monkeypatch.setenv("NOTELOOM_HOME", str(path))
    monkeypatch.setenv("NOTELOOM_DATABASE_URL", database_url)
    return path


def vault(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["vault", *args], input=input)
    return result.exit_code, result.stdout, result.stderr


def the_app(home: Path) -> App:
    env = {"NOTELOOM_HOME": str(home), "NOTELOOM_DATABASE_URL": os.environ["NOTELOOM_DATABASE_URL"]}
    return open_app(load_settings(env), load_entry_points=False)


def test_init_status_unlock_lock_and_rotate(home: Path) -> None:
    code, out, err = vault("status")
    assert code == 0 and "has no vault; `noteloom vault init`" in out
    code, out, err = vault("init", "--passphrase-stdin", input="short\n")
    assert code != 0 and "at least 8 characters" in out + err
    code, out, err = vault("init", "--passphrase-stdin", input=PASS + "\n")
    assert code == 0, out + err
    recovery = next(line for line in out.splitlines() if line.startswith("Recovery key: ")).split(": ", 1)[1]
    assert len(recovery.replace("-", "")) == 52 and "cannot be read by anyone" in out
    code, out, err = vault("unlock", "--passphrase-stdin", input="wrong passphrase\n")
    assert code != 0 and "passphrase is wrong" in out + err
    code, out, err = vault("unlock", "--passphrase-stdin", "--minutes", "30", input=PASS + "\n")
    assert code == 0 and "Unlocked for the API token" in out, out + err
    app = the_app(home)
    try:
        owner = app.workspace.ensure_owner()
        assert Vault(app.engine).window_keys(owner.id, access_token(app)) is not None
        status = json.loads(vault("status", "--json")[1])
        assert status["exists"] and status["open_windows"] == 1 and status["generation"] == 1
        code, out, err = vault("rotate", "--passphrase-stdin", input=PASS + "\n")
        assert code == 0 and "key generation 2" in out, out + err
        code, out, err = vault("lock")
        assert code == 0 and "1 window(s) closed" in out
        assert Vault(app.engine).window_keys(owner.id, access_token(app)) is None
    finally:
        app.close()
