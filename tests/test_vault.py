"""The vault: sealing needs only the public key, opening needs the unlock window; passphrase,
recovery key, rotation, tampering and what reaches the database file."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import nacl.public
import pytest
import sqlalchemy as sa

from noteloom import db
from noteloom.app import App
from noteloom.errors import Conflict, InvalidInput, Locked, NotFound, WrongPassphrase
from noteloom.vault import PREFIX, Vault, is_sealed, user_vaults

PASS = "correct horse battery"
MARKER = "PLAINTEXT-MARKER-7f3a9c"


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def owner(app: App) -> str:
    return app.workspace.ensure_owner().id


@pytest.fixture
def vault(app: App, clock: Clock) -> Vault:
    return Vault(app.engine, clock=clock)


@pytest.fixture
def made(vault: Vault, owner: str) -> Iterator[str]:
    """The owner's vault, created; yields the recovery key."""
    yield vault.create(owner, PASS)


def test_round_trip_text_and_bytes(vault: Vault, owner: str, made: str) -> None:
    sealed = vault.seal(owner, "msg1", "content", "héllo " + MARKER)
    raw = vault.seal(owner, "file1", "bytes", b"\x00\xff binary")
    assert sealed.startswith(PREFIX + ":1:") and is_sealed(sealed) and MARKER not in sealed
    vault.unlock(owner, PASS, ttl_s=60)
    assert vault.open_text(owner, "msg1", "content", sealed) == "héllo " + MARKER
    assert vault.open(owner, "file1", "bytes", raw) == b"\x00\xff binary"
    # Each value has its own data key: the same plaintext seals differently.
    assert vault.seal(owner, "msg1", "content", "x") != vault.seal(owner, "msg1", "content", "x")


def test_sealing_works_while_locked_and_opening_needs_the_window(
    vault: Vault, owner: str, made: str
) -> None:
    assert not vault.is_unlocked(owner)
    sealed = vault.seal(owner, "m", "content", "secret")
    with pytest.raises(Locked, match="locked: unlock it"):
        vault.open(owner, "m", "content", sealed)


def test_a_window_expires_on_the_clock(vault: Vault, owner: str, made: str, clock: Clock) -> None:
    sealed = vault.seal(owner, "m", "content", "secret")
    window = vault.unlock(owner, PASS, ttl_s=30)
    assert window.expires_at == clock.now + 30 and window.generation == 1
    clock.now += 29.9
    assert vault.open(owner, "m", "content", sealed) == b"secret"
    clock.now += 0.1
    assert not vault.is_unlocked(owner) and vault.window(owner) is None
    with pytest.raises(Locked):
        vault.open(owner, "m", "content", sealed)


def test_lock_closes_the_window(vault: Vault, owner: str, made: str) -> None:
    sealed = vault.seal(owner, "m", "content", "secret")
    vault.unlock(owner, PASS)
    assert vault.is_unlocked(owner)
    vault.lock(owner)
    assert not vault.is_unlocked(owner)
    with pytest.raises(Locked):
        vault.open(owner, "m", "content", sealed)
    vault.lock(owner)  # closing a closed window is fine


def test_windows_are_per_user(app: App, vault: Vault, owner: str, made: str) -> None:
    other = _second_user(app)
    vault.create(other, "bobs passphrase")
    vault.unlock(owner, PASS)
    sealed = vault.seal(other, "m", "content", "for bob")
    assert not vault.is_unlocked(other)
    with pytest.raises(Locked):
        vault.open(other, "m", "content", sealed)
    # The owner's window does not open a value sealed for bob, even under bob's item id.
    with pytest.raises(InvalidInput):
        vault.open(owner, "m", "content", sealed)


def _second_user(app: App) -> str:
    uid = db.new_id()
    with db.write_tx(app.engine) as conn:
        conn.execute(
            db.users.insert().values(id=uid, name="bob", is_owner=False, created_time=db.now_ms())
        )
    return uid


def test_a_wrong_passphrase_is_refused_clearly(vault: Vault, owner: str, made: str) -> None:
    with pytest.raises(WrongPassphrase, match="passphrase is wrong"):
        vault.unlock(owner, "not the passphrase")
    assert not vault.is_unlocked(owner)
    with pytest.raises(WrongPassphrase):
        vault.change_passphrase(owner, "not the passphrase", "another passphrase")
    with pytest.raises(WrongPassphrase, match="recovery key is wrong"):
        vault.unlock_with_recovery(owner, "AAAA-BBBB", "another passphrase")


def test_bad_setup_input_and_missing_vault(vault: Vault, owner: str) -> None:
    with pytest.raises(NotFound, match="no vault"):
        vault.unlock(owner, PASS)
    with pytest.raises(NotFound):
        vault.seal(owner, "m", "content", "x")
    with pytest.raises(InvalidInput) as short:
        vault.create(owner, "short")
    assert short.value.field == "passphrase"
    vault.create(owner, PASS)
    with pytest.raises(Conflict, match="has a vault already"):
        vault.create(owner, PASS)
    with pytest.raises(InvalidInput) as bad_item:
        vault.seal(owner, "", "content", "x")
    assert bad_item.value.field == "item_id"
    with pytest.raises(InvalidInput) as bad_ttl:
        vault.unlock(owner, PASS, ttl_s=0)
    assert bad_ttl.value.field == "ttl_s"


def test_recovery_key_resets_the_passphrase(vault: Vault, owner: str, made: str) -> None:
    recovery = made
    assert len(recovery.replace("-", "")) == 52
    sealed = vault.seal(owner, "m", "content", "kept")
    # Typed sloppily: lower case, spaces instead of dashes.
    window = vault.unlock_with_recovery(
        owner, recovery.lower().replace("-", " "), "a brand new one"
    )
    assert window.user_id == owner and vault.open(owner, "m", "content", sealed) == b"kept"
    vault.lock(owner)
    with pytest.raises(WrongPassphrase):
        vault.unlock(owner, PASS)
    vault.unlock(owner, "a brand new one")
    assert vault.open(owner, "m", "content", sealed) == b"kept"
    # The recovery key stays valid.
    vault.unlock_with_recovery(owner, recovery, "yet another one")
    with pytest.raises(WrongPassphrase):
        vault.unlock(owner, "a brand new one")


def test_change_passphrase(vault: Vault, owner: str, made: str) -> None:
    sealed = vault.seal(owner, "m", "content", "kept")
    vault.change_passphrase(owner, PASS, "the second passphrase")
    with pytest.raises(WrongPassphrase):
        vault.unlock(owner, PASS)
    vault.unlock(owner, "the second passphrase")
    assert vault.open(owner, "m", "content", sealed) == b"kept"
    with pytest.raises(InvalidInput) as short:
        vault.change_passphrase(owner, "the second passphrase", "short")
    assert short.value.field == "new_passphrase"


def test_a_value_moved_to_another_item_or_field_does_not_open(
    vault: Vault, owner: str, made: str
) -> None:
    sealed = vault.seal(owner, "msg1", "content", "bound")
    vault.unlock(owner, PASS)
    for item, field in (("msg2", "content"), ("msg1", "title"), ("msg", "1\x00content")):
        with pytest.raises(InvalidInput) as err:
            vault.open(owner, item, field, sealed)
        assert err.value.field == "sealed"
    assert vault.open(owner, "msg1", "content", sealed) == b"bound"


def _flip(text: str) -> str:
    """``text`` (URL-safe base64) with one bit of its first byte flipped."""
    raw = bytearray(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    raw[0] ^= 1
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


def test_a_tampered_value_fails_cleanly(vault: Vault, owner: str, made: str) -> None:
    sealed = vault.seal(owner, "m", "content", "intact")
    prefix, gen, key, content = sealed.split(":")
    other_key = vault.seal(owner, "m", "content", "intact").split(":")[2]
    vault.unlock(owner, PASS)
    tampered = [
        f"{prefix}:{gen}:{key}:{_flip(content)}",  # content altered
        f"{prefix}:{gen}:{_flip(key)}:{content}",  # sealed key altered
        f"{prefix}:{gen}:{other_key}:{content}",  # another value's data key
        f"{prefix}:7:{key}:{content}",  # a generation the vault does not hold
        f"{prefix}:{gen}:{key}:{content[:-5]}",  # truncated
        "nlv9:1:a:b",
        "plain text",
        f"{prefix}:{gen}:{key}:{content}:extra",
        f"{prefix}:{gen}:!!!:{content}",
    ]
    for value in tampered:
        with pytest.raises(InvalidInput) as err:
            vault.open(owner, "m", "content", value)
        assert err.value.field == "sealed", value
    assert not is_sealed("plain text") and is_sealed(sealed)
    assert vault.open(owner, "m", "content", sealed) == b"intact"


def test_rotation_reseals_data_keys_not_content(vault: Vault, owner: str, made: str) -> None:
    recovery = made
    old = [vault.seal(owner, f"m{i}", "content", f"message {i}") for i in range(3)]
    with pytest.raises(Locked):
        vault.rotate(owner)
    vault.unlock(owner, PASS)
    assert vault.rotate(owner) == 2 and vault.generation(owner) == 2
    # Values sealed before still open (the retired key is kept) …
    assert vault.open(owner, "m0", "content", old[0]) == b"message 0"
    # … and re-sealing moves only the data key to generation 2.
    moved = [vault.reseal_key(owner, v) for v in old]
    for i, (before, after) in enumerate(zip(old, moved, strict=True)):
        assert after.startswith(f"{PREFIX}:2:")
        assert after.split(":")[3] == before.split(":")[3]  # content ciphertext unchanged
        assert after.split(":")[2] != before.split(":")[2]
        assert vault.open(owner, f"m{i}", "content", after) == f"message {i}".encode()
    assert vault.reseal_key(owner, moved[0]) == moved[0]
    new = vault.seal(owner, "n", "content", "after rotation")
    assert new.startswith(f"{PREFIX}:2:")
    # A fresh unlock (passphrase or recovery key) opens both generations.
    vault.lock(owner)
    vault.unlock(owner, PASS)
    assert vault.open(owner, "m1", "content", old[1]) == b"message 1"
    vault.unlock_with_recovery(owner, recovery, "after the rotation")
    assert vault.open(owner, "n", "content", new) == b"after rotation"
    # Once drained, the old generation is retired: values still at it stop opening.
    vault.retire(owner, 1)
    with pytest.raises(InvalidInput, match="generation 1"):
        vault.open(owner, "m2", "content", old[2])
    assert vault.open(owner, "m2", "content", moved[2]) == b"message 2"
    vault.lock(owner)
    vault.unlock(owner, "after the rotation")
    with pytest.raises(InvalidInput):
        vault.open(owner, "m2", "content", old[2])


def _opened_secret(vault: Vault, owner: str) -> bytes:
    """The opened secret key held by the window (to look for it in the database file)."""
    opened = vault._windows[owner]
    key = opened.keys[opened.generation]
    assert isinstance(key, nacl.public.PrivateKey)
    return bytes(key)


def test_the_database_file_holds_no_secret_key_and_no_plaintext(
    app: App, vault: Vault, owner: str, made: str
) -> None:
    sealed = vault.seal(owner, "m", "content", MARKER)
    with db.write_tx(app.engine) as conn:  # a sealed value stored as a TEXT column would be
        conn.execute(sa.text("CREATE TABLE probe (v TEXT)"))
        conn.execute(sa.text("INSERT INTO probe VALUES (:v)"), {"v": sealed})
    vault.unlock(owner, PASS)
    secret = _opened_secret(vault, owner)
    recovery_raw = base64.b32decode(made.replace("-", "") + "====")
    with app.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    path = Path(app.engine.url.database or "")
    files = [p for p in path.parent.glob(path.name + "*") if p.is_file()]
    assert path in files
    for f in files:
        data = f.read_bytes()
        assert MARKER.encode() not in data, f.name
        for needle in (
            secret,
            base64.b64encode(secret),
            base64.urlsafe_b64encode(secret).rstrip(b"="),
            secret.hex().encode(),
        ):
            assert needle not in data, f.name
        assert recovery_raw not in data and made.encode() not in data and PASS.encode() not in data
    assert vault.open_text(owner, "m", "content", sealed) == MARKER


def test_storage_on_sqlite_and_postgresql(any_app: App, clock: Clock) -> None:
    owner = any_app.workspace.ensure_owner().id
    vault = Vault(any_app.engine, clock=clock)
    recovery = vault.create(owner, PASS)
    sealed = vault.seal(owner, "m", "content", "on every engine")
    vault.unlock(owner, PASS)
    vault.rotate(owner)
    resealed = vault.reseal_key(owner, sealed)
    vault.change_passphrase(owner, PASS, "changed passphrase")
    # A second process (another Vault on the same database) reads the same row.
    other = Vault(any_app.engine, clock=clock)
    assert not other.is_unlocked(owner)
    other.unlock_with_recovery(owner, recovery, "recovered passphrase")
    assert other.open(owner, "m", "content", sealed) == b"on every engine"
    assert other.open(owner, "m", "content", resealed) == b"on every engine"
    with any_app.engine.connect() as conn:
        row = conn.execute(sa.select(user_vaults).where(user_vaults.c.user_id == owner)).one()
    assert row.key_generation == 2 and set(row.retired_keys) == {"1"}
    assert row.created_time <= row.updated_time
    assert vault.exists(owner) and not vault.exists("0" * 32)


def test_a_window_opened_before_another_process_rotated_still_opens_new_values(
    app: App, vault: Vault, owner: str, made: str, clock: Clock
) -> None:
    vault.unlock(owner, PASS)  # this process's window: generation 1 only
    other = Vault(app.engine, clock=clock)  # another worker on the same database
    other.unlock(owner, PASS)
    assert other.rotate(owner) == 2
    sealed = vault.seal(owner, "m", "content", "sealed to generation 2")
    assert sealed.startswith(f"{PREFIX}:2:")
    assert vault.open(owner, "m", "content", sealed) == b"sealed to generation 2"
    assert vault.window(owner) is not None and vault.window(owner).generation == 2  # type: ignore[union-attr]


def test_a_passphrase_matches_whatever_unicode_form_it_is_typed_in(
    vault: Vault, owner: str
) -> None:
    composed, decomposed = "caf\u00e9 au lait", "cafe\u0301 au lait"
    vault.create(owner, composed)
    vault.unlock(owner, decomposed)
    assert vault.is_unlocked(owner)
