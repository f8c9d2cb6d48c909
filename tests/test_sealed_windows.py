"""Shared unlock windows: opened by a credential, usable by every process on the database
while that credential comes with a request, closed by their expiry, by lock and by sign-out;
the database holds neither the vault key in clear nor the credential. And the sealer:
one data key per item, values that open alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.app import App
from noteloom.errors import InvalidInput, WrongPassphrase
from noteloom.vault import Vault, is_sealed, vault_windows

PASS = "correct horse battery"
SESSION = "nls_" + "s" * 43
OTHER_SESSION = "nls_" + "o" * 43


class Wall:
    """A wall clock (ms) the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def test_a_window_opened_in_one_process_reads_in_another_until_it_is_locked(any_app: App) -> None:
    owner = any_app.workspace.ensure_owner().id
    wall = Wall()
    one, two = Vault(any_app.engine, wall=wall), Vault(any_app.engine, wall=wall)  # two workers
    one.create(owner, PASS)
    sealed = two.seal(owner, "m1", "content", "a secret")
    assert two.window_keys(owner, SESSION) is None
    window = one.open_window(owner, SESSION, passphrase=PASS, ttl_s=60)
    assert window.expires_time == wall.now + 60_000
    keys = two.window_keys(owner, SESSION)
    assert keys is not None and keys.open_text("m1", "content", sealed) == "a secret"
    assert two.window_keys(owner, OTHER_SESSION) is None, "another credential has no window"
    assert two.shared_window(owner, SESSION) is not None
    assert one.close_windows(owner) == 1
    assert two.window_keys(owner, SESSION) is None and two.shared_window(owner, SESSION) is None


def test_a_window_ends_at_its_expiry_and_sign_out_ends_its_credentials(app: App) -> None:
    owner = app.workspace.ensure_owner().id
    wall = Wall()
    vault = Vault(app.engine, wall=wall)
    vault.create(owner, PASS)
    vault.open_window(owner, SESSION, passphrase=PASS, ttl_s=30)
    vault.open_window(owner, OTHER_SESSION, passphrase=PASS, ttl_s=300)
    wall.now += 29_999
    assert vault.window_keys(owner, SESSION) is not None
    wall.now += 1
    assert vault.window_keys(owner, SESSION) is None, "expired"
    vault.close_window(OTHER_SESSION)
    assert vault.window_keys(owner, OTHER_SESSION) is None, "signed out"


def test_a_window_needs_the_passphrase_or_the_recovery_key(app: App) -> None:
    owner = app.workspace.ensure_owner().id
    vault = Vault(app.engine)
    recovery = vault.create(owner, PASS)
    with pytest.raises(WrongPassphrase):
        vault.open_window(owner, SESSION, passphrase="not the passphrase")
    assert vault.window_keys(owner, SESSION) is None
    with pytest.raises(InvalidInput):
        vault.open_window(owner, SESSION, passphrase=PASS, recovery_key=recovery)
    vault.open_window(owner, SESSION, recovery_key=recovery, new_passphrase="a new passphrase")
    assert vault.window_keys(owner, SESSION) is not None
    with pytest.raises(WrongPassphrase):
        vault.open_window(owner, OTHER_SESSION, passphrase=PASS)
    vault.open_window(owner, OTHER_SESSION, passphrase="a new passphrase")


def test_a_windows_row_holds_no_vault_key_and_no_credential(app: App) -> None:
    owner = app.workspace.ensure_owner().id
    vault = Vault(app.engine)
    vault.create(owner, PASS)
    vault.open_window(owner, SESSION, passphrase=PASS)
    keys = vault.window_keys(owner, SESSION)
    assert keys is not None
    vault_key = keys._opened.vault_key
    with db.read_tx(app.engine) as c:
        row = c.execute(sa.select(vault_windows)).one()
    assert SESSION not in str(tuple(row)) and row.credential_hash != SESSION
    with app.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    path = Path(app.engine.url.database or "")
    for f in [p for p in path.parent.glob(path.name + "*") if p.is_file()]:
        data = f.read_bytes()
        assert vault_key not in data and SESSION.encode() not in data, f.name


def test_a_sealer_gives_each_item_one_data_key_and_each_value_opens_alone(app: App) -> None:
    owner = app.workspace.ensure_owner().id
    vault = Vault(app.engine)
    vault.create(owner, PASS)
    sealer = vault.sealer(owner)
    a1, a2, b1 = sealer.seal("a", "x", "one"), sealer.seal("a", "y", "two"), sealer.seal("b", "x", "three")
    assert all(is_sealed(v) for v in (a1, a2, b1))
    assert a1.split(":")[2] == a2.split(":")[2] != b1.split(":")[2], "one data key per item"
    vault.unlock(owner, PASS)
    keys = vault.keys(owner)
    assert keys is not None
    assert [keys.open_text("a", "x", a1), keys.open_text("a", "y", a2), keys.open_text("b", "x", b1)] == \
        ["one", "two", "three"]
    with pytest.raises(InvalidInput):
        keys.open_text("a", "y", a1)
    assert vault.open_text(owner, "a", "x", vault.reseal_key(owner, a1)) == "one"


def test_a_second_user_cannot_use_a_window_of_the_first(app: App) -> None:
    owner = app.workspace.ensure_owner().id
    other = db.new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert().values(id=other, name="bob", is_owner=False, created_time=db.now_ms()))
    vault = Vault(app.engine)
    vault.create(owner, PASS)
    vault.open_window(owner, SESSION, passphrase=PASS)
    assert vault.window_keys(other, SESSION) is None
