"""The vault: each user's keypair, sealed values, and the unlock window.

Protected content (a private chat's messages, titles, attachments …) is stored *sealed*:

- Each user has an X25519 keypair. Its public key is stored in clear, so anything may
  **seal** for the user at any time, locked or not (background work, a turn settling).
- Its secret key is stored encrypted under the user's **vault key** (32 random bytes), and
  the vault key is stored twice: wrapped under a key derived from the **passphrase**
  (Argon2id), and wrapped under a key derived from the **recovery key** (Argon2id too),
  shown once by :meth:`Vault.create`. Changing the passphrase or rotating the keypair
  re-wraps a small key, never the content; the recovery key stays valid across both.
- :meth:`Vault.unlock` opens the vault key and the secret keys into an **unlock window**: an
  in-memory record in this process (user id → opened keys, expiry on a monotonic clock),
  closed by :meth:`Vault.lock` or when it expires. **Opening** a sealed value needs it
  (:class:`~noteloom.errors.Locked` otherwise). Nothing of the window is ever written.

One sealed value (:meth:`Vault.seal`)::

    nlv1:<generation>:<sealed data key>:<content>

A fresh random 32-byte data key (DEK) per value encrypts the content with
XChaCha20-Poly1305 (``nacl.secret.Aead``, random 24-byte nonce); the associated data binds it
to the user, the item id and the field, so a value copied to another row or column does not
open. The DEK is sealed to the user's public key of ``generation`` with a libsodium sealed box
(``nacl.public.SealedBox``: ephemeral X25519 + XSalsa20-Poly1305). Both parts are URL-safe
base64 without padding, so the value fits a TEXT column. The DEK part is separable: key
rotation (:meth:`Vault.rotate`, then :meth:`Vault.reseal_key` per value) re-seals only it and
leaves the content part byte for byte as it was. Retired secret keys stay in the vault
(encrypted under the vault key) so values not yet re-sealed still open.

Why PyNaCl (libsodium) and not ``cryptography``: libsodium has the sealed box as one
maintained, specified primitive (``crypto_box_seal``); with ``cryptography`` we would have to
assemble X25519 + a KDF + an AEAD into an ECIES of our own. PyNaCl also carries Argon2id and
XChaCha20-Poly1305 (whose 192-bit random nonces need no counter).

Argon2id runs at libsodium's INTERACTIVE limits (2 passes, 64 MiB): an unlock took 0.07 s
on the 2-core development machine (MODERATE, 3 passes and 256 MiB, took 0.5 s); opening a
1 kB value about 0.1 ms, sealing one about 1 ms (a read of the public key included). The
limits are stored per vault, so raising them later leaves existing vaults readable.

Process windows (:meth:`Vault.unlock`) live in the process that opened them (the command
line's). **Shared windows** (:meth:`Vault.open_window`) are what the web app uses, so
every ``noteloom serve`` worker can read with them: a row of ``vault_windows`` per
credential (browser session or API token) that opened one, holding the vault key wrapped
(XChaCha20-Poly1305) under a key derived from that credential (BLAKE2b, keyed by a random
salt of the row). The credential itself is never stored, only a BLAKE2b hash of it (under
another personalisation) to find the row; so the database alone opens nothing, and a
request opens the window only by presenting the credential again
(:meth:`Vault.window_keys`, which yields the :class:`Keys` for that request). A window ends
at its expiry (wall clock, shared by every process), on :meth:`Vault.close_windows` (lock:
all of the user's) or :meth:`Vault.close_window` (sign-out: that credential's).

A window opened before another process rotated the keypair loads the new generation's
key from the row when it first meets it; one that process retired stays in an open
process window until it closes.

:class:`Sealer` seals many values for one user with the public key read once, and one
data key per item (a message, an attachment, a turn's event log): each value is still a
complete ``nlv1`` value that :meth:`Keys.open` and :meth:`Vault.reseal_key` take alone.

A lost passphrase *and* recovery key means the sealed content cannot be read by anyone:
surfaces that set a passphrase say so.
"""

from __future__ import annotations

import base64
import binascii
import threading
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NewType

import nacl.encoding
import nacl.exceptions
import nacl.hash
import nacl.pwhash.argon2id as argon2id
import nacl.utils
import sqlalchemy as sa
from nacl.public import PrivateKey, PublicKey, SealedBox
from nacl.secret import Aead
from sqlalchemy.engine import Connection, Engine

from noteloom.db import ID, MS, metadata, now_ms, reading, writing
from noteloom.errors import Conflict, InvalidInput, Locked, NotFound, WrongPassphrase

#: The prefix of every sealed value of this format.
PREFIX = "nlv1"
#: Argon2id limits for new vaults (libsodium's INTERACTIVE: 2 passes, 64 MiB).
KDF_OPSLIMIT = argon2id.OPSLIMIT_INTERACTIVE
KDF_MEMLIMIT = argon2id.MEMLIMIT_INTERACTIVE
#: How long an unlock window stays open unless the caller says otherwise.
DEFAULT_TTL_S = 15 * 60.0
#: The shortest passphrase accepted.
MIN_PASSPHRASE_CHARS = 8

KEY_BYTES = 32
RecoveryKey = NewType("RecoveryKey", str)
"""A vault's recovery key as shown to its user: 52 base32 characters in groups of four."""

user_vaults = sa.Table(
    "user_vaults",
    metadata,
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("key_generation", sa.Integer, nullable=False),
    sa.Column("public_key", sa.Text, nullable=False),
    # The secret key of key_generation, encrypted under the vault key.
    sa.Column("secret_key", sa.Text, nullable=False),
    # Older generations' secret keys ({"1": …}), encrypted under the vault key.
    sa.Column("retired_keys", sa.JSON, nullable=False),
    # The vault key, wrapped under Argon2id(passphrase) and under Argon2id(recovery key).
    sa.Column("passphrase_wrapped", sa.Text, nullable=False),
    sa.Column("passphrase_salt", sa.Text, nullable=False),
    sa.Column("recovery_wrapped", sa.Text, nullable=False),
    sa.Column("recovery_salt", sa.Text, nullable=False),
    sa.Column("kdf_opslimit", sa.Integer, nullable=False),
    sa.Column("kdf_memlimit", sa.BigInteger, nullable=False),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("updated_time", MS, nullable=False),
)

#: Unlock windows any server process can use (see "Shared windows" above): one row per
#: credential that opened one. The vault key is wrapped under a key derived from the
#: credential itself, which is never stored (only a hash of it, to find the row).
vault_windows = sa.Table(
    "vault_windows",
    metadata,
    sa.Column("credential_hash", sa.String(64), primary_key=True),
    sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
    sa.Column("salt", sa.Text, nullable=False),
    sa.Column("wrapped_key", sa.Text, nullable=False),
    sa.Column("created_time", MS, nullable=False),
    sa.Column("expires_time", MS, nullable=False),
    sa.Index("ix_vault_windows_user", "user_id"),
)


@dataclass(frozen=True)
class Window:
    """An open unlock window (what callers may see of it: no key material)."""

    user_id: str
    expires_at: float  # on the vault's monotonic clock
    generation: int


@dataclass
class _Opened:
    vault_key: bytes
    keys: dict[int, PrivateKey]
    generation: int
    expires_at: float
    boxes: dict[int, SealedBox[PrivateKey]] = field(default_factory=dict)
    #: Data keys opened already, by their sealed form (values of one item share one).
    deks: dict[bytes, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class SharedWindow:
    """An open shared window, as a surface shows it (no key material)."""

    user_id: str
    #: When it closes, in ms since the epoch (the same for every process).
    expires_time: int
    created_time: int


class Keys:
    """One user's opened keys: what reading a sealed value needs. A process window's
    (:meth:`Vault.keys`) or a shared window's, opened for one request or one turn
    (:meth:`Vault.window_keys`); it holds the keys in memory only, for as long as its
    holder keeps it."""

    def __init__(self, vault: Vault, user_id: str, opened: _Opened) -> None:
        self._vault = vault
        self.user_id = user_id
        self._opened = opened

    def open(self, item_id: str, field: str, sealed: str) -> bytes:
        """Like :meth:`Vault.open`, with these keys."""
        return self._vault._open_with(self._opened, self.user_id, item_id, field, sealed)

    def open_text(self, item_id: str, field: str, sealed: str) -> str:
        return self.open(item_id, field, sealed).decode("utf-8")

    def reseal_key(self, sealed: str, *, conn: Connection | None = None) -> str:
        """Like :meth:`Vault.reseal_key`, with these keys."""
        return self._vault._reseal_with(self._opened, self.user_id, sealed, conn=conn)

    def rotate(self, *, conn: Connection | None = None) -> int:
        """Like :meth:`Vault.rotate`, with these keys."""
        return self._vault._rotate_with(self._opened, self.user_id, conn=conn)


class Sealer:
    """Seals values for one user: the public key read once, one fresh data key per item
    (sealed once to the public key), a fresh nonce per value. Works while locked."""

    def __init__(self, user_id: str, generation: int, public_key: bytes) -> None:
        self.user_id = user_id
        self.generation = generation
        self._box = SealedBox(PublicKey(public_key))
        self._items: dict[str, tuple[Aead, str]] = {}

    def seal(self, item_id: str, field: str, plaintext: bytes | str) -> str:
        """``plaintext`` sealed, bound to this user, ``item_id`` and ``field``."""
        _check_part(item_id, "item_id")
        _check_part(field, "field")
        data = plaintext.encode("utf-8") if isinstance(plaintext, str) else bytes(plaintext)
        found = self._items.get(item_id)
        if found is None:
            dek = nacl.utils.random(KEY_BYTES)
            found = self._items[item_id] = (Aead(dek), _b64(self._box.encrypt(dek)))
        aead, sealed_key = found
        content = aead.encrypt(data, _ad(self.user_id, item_id, field))
        return f"{PREFIX}:{self.generation}:{sealed_key}:{_b64(bytes(content))}"

    def forget(self, item_id: str) -> None:
        """Drop the data key of ``item_id`` (its next value gets a new one)."""
        self._items.pop(item_id, None)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _ad(*parts: str) -> bytes:
    """Associated data: the parts joined by NUL (none of them may hold one)."""
    return b"\0".join(p.encode("utf-8") for p in (PREFIX, *parts))


def _kdf(secret: str, salt: bytes, opslimit: int, memlimit: int) -> bytes:
    """Argon2id over ``secret`` in Unicode NFC, so a passphrase typed on another keyboard (a
    composed or a decomposed "é") derives the same key."""
    secret = unicodedata.normalize("NFC", secret)
    return argon2id.kdf(
        KEY_BYTES, secret.encode("utf-8"), salt, opslimit=opslimit, memlimit=memlimit
    )


def _check_passphrase(passphrase: str, name: str = "passphrase") -> None:
    if not isinstance(passphrase, str) or len(passphrase) < MIN_PASSPHRASE_CHARS:
        raise InvalidInput(f"{name} must be at least {MIN_PASSPHRASE_CHARS} characters", field=name)


def _check_part(value: str, name: str) -> None:
    if not isinstance(value, str) or not value or "\0" in value:
        raise InvalidInput(f"{name} must be a non-empty string without NUL characters", field=name)


def _recovery_text(raw: bytes) -> RecoveryKey:
    text = base64.b32encode(raw).decode("ascii").rstrip("=")
    return RecoveryKey("-".join(text[i : i + 4] for i in range(0, len(text), 4)))


def _normal_recovery(text: str) -> str:
    return "".join(str(text).split()).replace("-", "").upper()


_WINDOW_ID = b"nl-window-id"
_WINDOW_KEY = b"nl-window-key"


def _credential_hash(credential: str) -> str:
    """What finds a shared window's row: a hash of the credential (not its key)."""
    return nacl.hash.blake2b(
        credential.encode("utf-8"), digest_size=32, person=_WINDOW_ID, encoder=nacl.encoding.HexEncoder
    ).decode("ascii")


def _window_key(credential: str, salt: bytes) -> bytes:
    """The key a shared window's vault key is wrapped under (credentials are long random
    strings, so a keyed hash is the whole derivation)."""
    return nacl.hash.blake2b(
        credential.encode("utf-8"), digest_size=KEY_BYTES, salt=salt, person=_WINDOW_KEY,
        encoder=nacl.encoding.RawEncoder,
    )


def _check_credential(credential: str) -> None:
    if not isinstance(credential, str) or len(credential) < 16:
        raise InvalidInput("a shared window needs the credential of the request (a session or a token)",
                           field="credential")


@dataclass(frozen=True)
class _Parts:
    generation: int
    sealed_key: bytes
    content: str  # kept as stored, so a re-seal copies it unchanged


def _parse(sealed: str) -> _Parts:
    bad = InvalidInput(
        f"not a sealed value (expected '{PREFIX}:<generation>:<key>:<content>')", field="sealed"
    )
    if not isinstance(sealed, str):
        raise bad
    parts = sealed.split(":")
    if len(parts) != 4 or parts[0] != PREFIX or not parts[1].isdigit():
        raise bad
    try:
        return _Parts(int(parts[1]), _unb64(parts[2]), parts[3])
    except (binascii.Error, ValueError):
        raise bad from None


def is_sealed(value: object) -> bool:
    """Whether ``value`` has the form of a sealed value (a cheap check, nothing is opened)."""
    try:
        _parse(value)  # type: ignore[arg-type]
    except InvalidInput:
        return False
    return True


class Vault:
    """Users' keypairs in ``user_vaults`` and their unlock windows in this process.

    ``clock`` is a monotonic clock (seconds), injectable so tests can expire a window
    without waiting. Every method that touches the database takes an optional ``conn`` to
    join the caller's transaction."""

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], int] = now_ms,
    ) -> None:
        """``wall``: the clock of shared windows, in ms since the epoch (injectable too)."""
        self.engine = engine
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._windows: dict[str, _Opened] = {}

    # --- rows ------------------------------------------------------------------------

    def _row(self, conn: Connection, user_id: str, *, for_update: bool = False) -> Any:
        """The vault row of ``user_id``; ``for_update`` locks it on PostgreSQL (two rotations
        or passphrase changes at once take turns; SQLite's write transaction already does)."""
        query = sa.select(user_vaults).where(user_vaults.c.user_id == user_id)
        row = conn.execute(query.with_for_update() if for_update else query).first()
        if row is None:
            raise NotFound(f"user {user_id!r} has no vault: set a vault passphrase first")
        return row

    def exists(self, user_id: str, *, conn: Connection | None = None) -> bool:
        with reading(self.engine, conn) as c:
            found = c.execute(
                sa.select(user_vaults.c.user_id).where(user_vaults.c.user_id == user_id)
            ).first()
        return found is not None

    def generation(self, user_id: str, *, conn: Connection | None = None) -> int:
        """The user's current key generation (what :meth:`seal` seals to)."""
        with reading(self.engine, conn) as c:
            return int(self._row(c, user_id).key_generation)

    # --- setting up and keys -----------------------------------------------------------

    def create(
        self, user_id: str, passphrase: str, *, conn: Connection | None = None
    ) -> RecoveryKey:
        """Give ``user_id`` a vault: a keypair, locked by ``passphrase``. Returns the recovery
        key, to be shown once: it is the only other way in, and it is not stored."""
        _check_passphrase(passphrase)
        vault_key = nacl.utils.random(KEY_BYTES)
        raw_recovery = nacl.utils.random(KEY_BYTES)
        recovery = _recovery_text(raw_recovery)
        secret = PrivateKey.generate()
        p_salt, r_salt = (
            nacl.utils.random(argon2id.SALTBYTES),
            nacl.utils.random(argon2id.SALTBYTES),
        )
        now = now_ms()
        with writing(self.engine, conn) as c:
            if c.execute(
                sa.select(user_vaults.c.user_id).where(user_vaults.c.user_id == user_id)
            ).first():
                raise Conflict(
                    f"user {user_id!r} has a vault already: change its passphrase instead"
                )
            c.execute(
                user_vaults.insert().values(
                    user_id=user_id,
                    key_generation=1,
                    public_key=_b64(bytes(secret.public_key)),
                    secret_key=self._wrap_secret(vault_key, user_id, 1, secret),
                    retired_keys={},
                    passphrase_wrapped=_b64(
                        Aead(_kdf(passphrase, p_salt, KDF_OPSLIMIT, KDF_MEMLIMIT)).encrypt(
                            vault_key, _ad(user_id, "passphrase")
                        )
                    ),
                    passphrase_salt=_b64(p_salt),
                    recovery_wrapped=_b64(
                        Aead(
                            _kdf(_normal_recovery(recovery), r_salt, KDF_OPSLIMIT, KDF_MEMLIMIT)
                        ).encrypt(vault_key, _ad(user_id, "recovery"))
                    ),
                    recovery_salt=_b64(r_salt),
                    kdf_opslimit=KDF_OPSLIMIT,
                    kdf_memlimit=KDF_MEMLIMIT,
                    created_time=now,
                    updated_time=now,
                )
            )
        return recovery

    @staticmethod
    def _wrap_secret(vault_key: bytes, user_id: str, generation: int, secret: PrivateKey) -> str:
        return _b64(Aead(vault_key).encrypt(bytes(secret), _ad(user_id, "secret", str(generation))))

    @staticmethod
    def _unwrap_secret(vault_key: bytes, user_id: str, generation: int, wrapped: str) -> PrivateKey:
        return PrivateKey(
            Aead(vault_key).decrypt(_unb64(wrapped), _ad(user_id, "secret", str(generation)))
        )

    def _open_vault_key(self, row: Any, secret: str, which: str) -> bytes:
        salt = _unb64(row.passphrase_salt if which == "passphrase" else row.recovery_salt)
        wrapped = _unb64(row.passphrase_wrapped if which == "passphrase" else row.recovery_wrapped)
        key = _kdf(secret, salt, int(row.kdf_opslimit), int(row.kdf_memlimit))
        try:
            return Aead(key).decrypt(wrapped, _ad(row.user_id, which))
        except nacl.exceptions.CryptoError:
            if which == "passphrase":
                raise WrongPassphrase(
                    "the vault passphrase is wrong: try again, or use the recovery key"
                ) from None
            raise WrongPassphrase(
                "the recovery key is wrong: check it against the one shown when the vault was set up"
            ) from None

    def _rewrap_passphrase(
        self, c: Connection, row: Any, vault_key: bytes, passphrase: str
    ) -> None:
        salt = nacl.utils.random(argon2id.SALTBYTES)
        wrapped = Aead(_kdf(passphrase, salt, KDF_OPSLIMIT, KDF_MEMLIMIT)).encrypt(
            vault_key, _ad(row.user_id, "passphrase")
        )
        c.execute(
            user_vaults.update()
            .where(user_vaults.c.user_id == row.user_id)
            .values(
                passphrase_wrapped=_b64(wrapped),
                passphrase_salt=_b64(salt),
                kdf_opslimit=KDF_OPSLIMIT,
                kdf_memlimit=KDF_MEMLIMIT,
                updated_time=now_ms(),
            )
        )

    # --- the window ---------------------------------------------------------------------

    def _opened(self, row: Any, vault_key: bytes, expires_at: float) -> _Opened:
        generation = int(row.key_generation)
        keys = {generation: self._unwrap_secret(vault_key, row.user_id, generation, row.secret_key)}
        for gen, wrapped in (row.retired_keys or {}).items():
            keys[int(gen)] = self._unwrap_secret(vault_key, row.user_id, int(gen), wrapped)
        return _Opened(vault_key, keys, generation, expires_at)

    def _open_window(self, row: Any, vault_key: bytes, ttl_s: float) -> Window:
        if not ttl_s > 0:
            raise InvalidInput("ttl_s must be a positive number of seconds", field="ttl_s")
        opened = self._opened(row, vault_key, self._clock() + ttl_s)
        with self._lock:
            self._windows[row.user_id] = opened
        return Window(row.user_id, opened.expires_at, opened.generation)

    def _window(self, user_id: str) -> _Opened:
        with self._lock:
            opened = self._windows.get(user_id)
            if opened is not None and self._clock() >= opened.expires_at:
                del self._windows[user_id]
                opened = None
        if opened is None:
            raise Locked(
                f"the vault of user {user_id!r} is locked: unlock it with the vault passphrase"
            )
        return opened

    def unlock(
        self,
        user_id: str,
        passphrase: str,
        ttl_s: float = DEFAULT_TTL_S,
        *,
        conn: Connection | None = None,
    ) -> Window:
        """Open ``user_id``'s window for ``ttl_s`` seconds (a window already open is replaced).
        A wrong passphrase raises :class:`~noteloom.errors.WrongPassphrase`."""
        with reading(self.engine, conn) as c:
            row = self._row(c, user_id)
        return self._open_window(
            row, self._open_vault_key(row, str(passphrase), "passphrase"), ttl_s
        )

    def unlock_with_recovery(
        self,
        user_id: str,
        recovery_key: str,
        new_passphrase: str,
        ttl_s: float = DEFAULT_TTL_S,
        *,
        conn: Connection | None = None,
    ) -> Window:
        """Open the vault with its recovery key and set ``new_passphrase`` (the old one stops
        working); the window opens too. The recovery key stays valid."""
        _check_passphrase(new_passphrase, "new_passphrase")
        with writing(self.engine, conn) as c:
            row = self._row(c, user_id, for_update=True)
            vault_key = self._open_vault_key(row, _normal_recovery(recovery_key), "recovery")
            self._rewrap_passphrase(c, row, vault_key, new_passphrase)
        return self._open_window(row, vault_key, ttl_s)

    def change_passphrase(
        self, user_id: str, old: str, new: str, *, conn: Connection | None = None
    ) -> None:
        """Replace the passphrase (``old`` must be right). Sealed values are untouched."""
        _check_passphrase(new, "new_passphrase")
        with writing(self.engine, conn) as c:
            row = self._row(c, user_id, for_update=True)
            self._rewrap_passphrase(c, row, self._open_vault_key(row, str(old), "passphrase"), new)

    def lock(self, user_id: str) -> None:
        """Close ``user_id``'s window (nothing happens when none is open)."""
        with self._lock:
            self._windows.pop(user_id, None)

    def is_unlocked(self, user_id: str) -> bool:
        try:
            self._window(user_id)
        except Locked:
            return False
        return True

    def window(self, user_id: str) -> Window | None:
        """The open window of ``user_id``, or ``None`` when locked."""
        try:
            opened = self._window(user_id)
        except Locked:
            return None
        return Window(user_id, opened.expires_at, opened.generation)

    def keys(self, user_id: str) -> Keys | None:
        """The keys of ``user_id``'s process window, or ``None`` when it is locked."""
        try:
            return Keys(self, user_id, self._window(user_id))
        except Locked:
            return None

    # --- shared windows -----------------------------------------------------------------

    def open_window(
        self,
        user_id: str,
        credential: str,
        *,
        passphrase: str | None = None,
        recovery_key: str | None = None,
        new_passphrase: str | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        conn: Connection | None = None,
    ) -> SharedWindow:
        """Open a shared window for the request's ``credential`` (replacing one it had), with
        the passphrase, or with the recovery key and a ``new_passphrase`` (the old one stops
        working). Every process can use it while the same credential comes with a request."""
        _check_credential(credential)
        if not ttl_s > 0:
            raise InvalidInput("ttl_s must be a positive number of seconds", field="ttl_s")
        if (passphrase is None) == (recovery_key is None):
            raise InvalidInput("give the passphrase, or the recovery key with a new passphrase",
                               field="passphrase")
        if recovery_key is not None:
            _check_passphrase(new_passphrase or "", "new_passphrase")
        now = self._wall()
        salt = nacl.utils.random(nacl.hash.BLAKE2B_SALTBYTES)
        digest = _credential_hash(credential)
        with writing(self.engine, conn) as c:
            row = self._row(c, user_id, for_update=recovery_key is not None)
            if recovery_key is not None:
                vault_key = self._open_vault_key(row, _normal_recovery(recovery_key), "recovery")
                self._rewrap_passphrase(c, row, vault_key, str(new_passphrase))
            else:
                vault_key = self._open_vault_key(row, str(passphrase), "passphrase")
            wrapped = Aead(_window_key(credential, salt)).encrypt(vault_key, _ad(user_id, "window", digest))
            expires = now + int(ttl_s * 1000)
            c.execute(vault_windows.delete().where(
                sa.or_(vault_windows.c.credential_hash == digest, vault_windows.c.expires_time <= now)))
            c.execute(vault_windows.insert().values(
                credential_hash=digest, user_id=user_id, salt=_b64(salt), wrapped_key=_b64(bytes(wrapped)),
                created_time=now, expires_time=expires,
            ))
        return SharedWindow(user_id, expires, now)

    def _shared_row(self, c: Connection, user_id: str, credential: str) -> Any:
        if not isinstance(credential, str) or not credential:
            return None
        w = vault_windows
        return c.execute(sa.select(w).where(
            w.c.credential_hash == _credential_hash(credential), w.c.user_id == user_id,
            w.c.expires_time > self._wall(),
        )).first()

    def shared_window(
        self, user_id: str, credential: str | None, *, conn: Connection | None = None
    ) -> SharedWindow | None:
        """The shared window ``credential`` opened for ``user_id``, if it is open."""
        with reading(self.engine, conn) as c:
            row = self._shared_row(c, user_id, credential or "")
        return None if row is None else SharedWindow(user_id, int(row.expires_time), int(row.created_time))

    def window_keys(self, user_id: str, credential: str | None, *, conn: Connection | None = None) -> Keys | None:
        """The keys of the shared window ``credential`` opened for ``user_id`` (``None``: none
        is open for it). The keys stay valid for as long as the caller holds them: a request,
        or the turn it started."""
        with reading(self.engine, conn) as c:
            window = self._shared_row(c, user_id, credential or "")
            if window is None:
                return None
            row = c.execute(sa.select(user_vaults).where(user_vaults.c.user_id == user_id)).first()
        if row is None:
            return None
        assert credential is not None
        try:
            vault_key = Aead(_window_key(credential, _unb64(window.salt))).decrypt(
                _unb64(window.wrapped_key), _ad(user_id, "window", window.credential_hash))
        except (nacl.exceptions.CryptoError, binascii.Error, ValueError):
            return None
        opened = self._opened(row, vault_key, float("inf"))
        return Keys(self, user_id, opened)

    def close_windows(self, user_id: str, *, conn: Connection | None = None) -> int:
        """Lock: close every shared window of ``user_id`` (and this process's); how many were open."""
        self.lock(user_id)
        with writing(self.engine, conn) as c:
            res = c.execute(vault_windows.delete().where(vault_windows.c.user_id == user_id))
        return int(res.rowcount or 0)

    def close_window(self, credential: str, *, conn: Connection | None = None) -> None:
        """Sign-out: close the shared window ``credential`` opened, if any."""
        if not credential:
            return
        with writing(self.engine, conn) as c:
            c.execute(vault_windows.delete().where(vault_windows.c.credential_hash == _credential_hash(credential)))

    # --- sealing ------------------------------------------------------------------------

    def sealer(self, user_id: str, *, conn: Connection | None = None) -> Sealer:
        """A :class:`Sealer` for ``user_id`` (reads the public key once; works while locked)."""
        with reading(self.engine, conn) as c:
            row = self._row(c, user_id)
        return Sealer(user_id, int(row.key_generation), _unb64(row.public_key))

    def seal(
        self,
        user_id: str,
        item_id: str,
        field: str,
        plaintext: bytes | str,
        *,
        conn: Connection | None = None,
    ) -> str:
        """``plaintext`` sealed for ``user_id``, bound to ``item_id`` and ``field`` (works while
        locked: only the public key is read). Text is sealed as its UTF-8."""
        _check_part(item_id, "item_id")
        _check_part(field, "field")
        data = plaintext.encode("utf-8") if isinstance(plaintext, str) else bytes(plaintext)
        with reading(self.engine, conn) as c:
            row = self._row(c, user_id)
        dek = nacl.utils.random(KEY_BYTES)
        content = Aead(dek).encrypt(data, _ad(user_id, item_id, field))
        sealed_key = SealedBox(PublicKey(_unb64(row.public_key))).encrypt(dek)
        return f"{PREFIX}:{int(row.key_generation)}:{_b64(sealed_key)}:{_b64(bytes(content))}"

    def _dek(self, opened: _Opened, user_id: str, parts: _Parts) -> bytes:
        key = opened.keys.get(parts.generation) or self._load_generation(
            opened, user_id, parts.generation
        )
        if key is None:
            raise InvalidInput(
                f"this sealed value is for key generation {parts.generation}, which user {user_id!r}'s vault does not hold",
                field="sealed",
            )
        cached = opened.deks.get(parts.sealed_key)
        if cached is not None:
            return cached
        box = opened.boxes.get(parts.generation)
        if box is None:
            box = opened.boxes[parts.generation] = SealedBox(key)
        try:
            dek = box.decrypt(parts.sealed_key)
        except nacl.exceptions.CryptoError:
            raise InvalidInput(
                "the sealed value's key does not open: it was altered or sealed for someone else",
                field="sealed",
            ) from None
        if len(opened.deks) > 4096:
            opened.deks.clear()
        opened.deks[parts.sealed_key] = dek
        return dek

    def _load_generation(self, opened: _Opened, user_id: str, generation: int) -> PrivateKey | None:
        """The secret key of ``generation`` read from the row, for a window opened before
        another process rotated the keypair; ``None`` when the vault does not hold it."""
        with reading(self.engine, None) as c:
            row = self._row(c, user_id)
        if generation == int(row.key_generation):
            wrapped = row.secret_key
        else:
            wrapped = (row.retired_keys or {}).get(str(generation))
        if wrapped is None:
            return None
        key = self._unwrap_secret(opened.vault_key, user_id, generation, wrapped)
        with self._lock:
            opened.keys[generation] = key
            opened.generation = max(opened.generation, int(row.key_generation))
        return key

    def open(self, user_id: str, item_id: str, field: str, sealed: str) -> bytes:
        """The plaintext of ``sealed`` (needs the window: :class:`~noteloom.errors.Locked`
        otherwise). A value altered, or moved from another item or field, raises
        ``InvalidInput(field="sealed")``."""
        return self._open_with(self._window(user_id), user_id, item_id, field, sealed)

    def _open_with(self, opened: _Opened, user_id: str, item_id: str, field: str, sealed: str) -> bytes:
        parts = _parse(sealed)
        dek = self._dek(opened, user_id, parts)
        try:
            return Aead(dek).decrypt(_unb64(parts.content), _ad(user_id, item_id, field))
        except (nacl.exceptions.CryptoError, binascii.Error, ValueError):
            raise InvalidInput(
                f"the sealed value does not open as {field!r} of item {item_id!r}: it was altered or belongs elsewhere",
                field="sealed",
            ) from None

    def open_text(self, user_id: str, item_id: str, field: str, sealed: str) -> str:
        """:meth:`open`, decoded from UTF-8."""
        return self.open(user_id, item_id, field, sealed).decode("utf-8")

    # --- rotation -----------------------------------------------------------------------

    def rotate(self, user_id: str, *, conn: Connection | None = None) -> int:
        """Give ``user_id`` a new keypair (needs the window) and return its generation. New
        values seal to it; the old secret key is kept (encrypted under the vault key) so
        values sealed before still open until :meth:`reseal_key` has moved them."""
        return self._rotate_with(self._window(user_id), user_id, conn=conn)

    def _rotate_with(self, opened: _Opened, user_id: str, *, conn: Connection | None = None) -> int:
        with writing(self.engine, conn) as c:
            row = self._row(c, user_id, for_update=True)
            old = int(row.key_generation)
            new = old + 1
            secret = PrivateKey.generate()
            retired = dict(row.retired_keys or {})
            retired[str(old)] = row.secret_key
            c.execute(
                user_vaults.update()
                .where(user_vaults.c.user_id == user_id)
                .values(
                    key_generation=new,
                    public_key=_b64(bytes(secret.public_key)),
                    secret_key=self._wrap_secret(opened.vault_key, user_id, new, secret),
                    retired_keys=retired,
                    updated_time=now_ms(),
                )
            )
        with self._lock:
            opened.keys[new] = secret
            opened.generation = new
        return new

    def reseal_key(self, user_id: str, sealed: str, *, conn: Connection | None = None) -> str:
        """``sealed`` with its data key sealed to the current generation (needs the window);
        the content part is copied unchanged. A value at the current generation comes back as is."""
        return self._reseal_with(self._window(user_id), user_id, sealed, conn=conn)

    def _reseal_with(self, opened: _Opened, user_id: str, sealed: str, *, conn: Connection | None = None) -> str:
        parts = _parse(sealed)
        with reading(self.engine, conn) as c:
            row = self._row(c, user_id)
        current = int(row.key_generation)
        if parts.generation == current:
            return sealed
        dek = self._dek(opened, user_id, parts)
        sealed_key = SealedBox(PublicKey(_unb64(row.public_key))).encrypt(dek)
        return f"{PREFIX}:{current}:{_b64(sealed_key)}:{parts.content}"

    def retire(self, user_id: str, generation: int, *, conn: Connection | None = None) -> None:
        """Forget an old generation's secret key once every value sealed to it was re-sealed:
        values still at it stop opening for good."""
        with writing(self.engine, conn) as c:
            row = self._row(c, user_id, for_update=True)
            retired = dict(row.retired_keys or {})
            if str(generation) not in retired:
                raise NotFound(
                    f"user {user_id!r}'s vault holds no retired key generation {generation}"
                )
            del retired[str(generation)]
            c.execute(
                user_vaults.update()
                .where(user_vaults.c.user_id == user_id)
                .values(retired_keys=retired, updated_time=now_ms())
            )
        with self._lock:
            opened = self._windows.get(user_id)
            if opened is not None:
                opened.keys.pop(generation, None)
                opened.boxes.pop(generation, None)


__all__ = [
    "DEFAULT_TTL_S",
    "KDF_MEMLIMIT",
    "KDF_OPSLIMIT",
    "PREFIX",
    "Keys",
    "RecoveryKey",
    "Sealer",
    "SharedWindow",
    "Vault",
    "Window",
    "is_sealed",
    "user_vaults",
    "vault_windows",
]
