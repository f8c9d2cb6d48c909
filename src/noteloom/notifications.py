"""Notifications: what a recipe's run tells its owner, kept for the app and sent out.

Storing and sending are two steps, because a notification is part of the change it reports
(a run that failed, a recipe paused) and must not be sent for a change that rolls back::

    with write_tx(engine) as conn:
        ...                                          # the run's own change
        nid = notifications.notify(conn, user_id, "failure", title, body, run_id=run_id)
    await deliverer.deliver(nid)                     # after the commit

:class:`Notifications` is the store (blocking; call it from a thread in async code).
:class:`Deliverer` POSTs a stored notification, signed, to each enabled webhook of its user
whose kinds include it (through :class:`noteloom.outbound.OutboundClient`, so only addresses
the operator allows), retrying a failed attempt, and hands it to every notification channel
plugins registered (``register_notification_channels``). Each webhook's last outcome is kept
on its row (``last_status``, ``last_time``). Delivery never raises into the caller: a
notification is stored whatever happens to its copies.
"""

from __future__ import annotations

import builtins
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import sqlalchemy as sa
from anyio import to_thread
from sqlalchemy.engine import Connection, Engine

from noteloom.db import new_id, now_ms, read_tx, reading, write_tx, writing
from noteloom.errors import InvalidInput, NotFound, OutboundRefused, Unavailable
from noteloom.outbound import OutboundClient, OutboundPolicy, check_url
from noteloom.plugins import Notification, NotificationChannel, NotificationKind
from noteloom.recipes.tables import notifications as n_table
from noteloom.recipes.tables import webhooks as w_table

__all__ = ["KINDS", "Deliverer", "Notification", "NotificationKind", "Notifications", "Webhook"]

log = logging.getLogger("noteloom.notifications")

KINDS: tuple[NotificationKind, ...] = ("failure", "approval", "budget", "success", "flagged", "paused")
TITLE_MAX = 300  # the column's width
STATUS_MAX = 200  # the width of ``webhooks.last_status``
LIST_MAX = 500

#: Waits ``seconds`` between attempts; tests pass one that records instead of sleeping.
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Webhook:
    """A user's webhook as the app shows it; the secret is told once, when it is added."""

    id: str
    user_id: str
    url: str
    kinds: tuple[NotificationKind, ...]
    enabled: bool
    #: The last delivery's outcome: the HTTP status, or why nothing was answered.
    last_status: str | None
    last_time: int | None
    created_time: int


@dataclass(frozen=True)
class _Target:
    """Where one notification goes: a webhook with its secret."""

    id: str
    url: str
    secret: str


def _kinds(kinds: Iterable[str], *, field: str = "kinds") -> tuple[NotificationKind, ...]:
    """``kinds`` checked, in the canonical order, without repeats."""
    given = [kinds] if isinstance(kinds, str) else builtins.list(kinds)
    unknown = sorted({k for k in given if k not in KINDS})
    if unknown:
        raise InvalidInput(f"{field} has unknown kinds {unknown}; choose from {', '.join(KINDS)}", field=field)
    if not given:
        raise InvalidInput(f"{field} is empty; name at least one of {', '.join(KINDS)}", field=field)
    return tuple(k for k in KINDS if k in given)


def _notification(r: Any) -> Notification:
    return Notification(r.id, r.user_id, r.kind, r.title, r.body, r.recipe_id, r.run_id, r.created_time, r.read_time)


def _webhook(r: Any) -> Webhook:
    kinds = tuple(k for k in KINDS if k in (r.kinds or []))
    return Webhook(r.id, r.user_id, r.url, kinds, bool(r.enabled), r.last_status, r.last_time, r.created_time)


class Notifications:
    """The notifications and webhooks of each user. ``policy`` is the operator's outbound
    policy: a webhook whose URL names a refused address outright is refused when added."""

    def __init__(self, engine: Engine, policy: OutboundPolicy | None = None) -> None:
        self.engine = engine
        self.policy = policy or OutboundPolicy()

    # -- notifications ----------------------------------------------------------------------

    def notify(self, conn: Connection, user_id: str, kind: str, title: str, body: str,
               recipe_id: str | None = None, run_id: str | None = None) -> str:
        """Store a notification in the caller's transaction; its id, for
        :meth:`Deliverer.deliver` once that transaction has committed. A title longer than
        300 characters is shortened; ``created_time`` is later than the user's previous one."""
        (checked,) = _kinds([kind], field="kind")
        title = title.strip()
        if not title:
            raise InvalidInput("title is empty; say what happened", field="title")
        if len(title) > TITLE_MAX:
            title = title[: TITLE_MAX - 1] + "…"
        # Strictly later than the user's last one: a run that fails and pauses its recipe
        # notifies twice within a millisecond, and "newest first" must still show the pause first.
        last = conn.execute(sa.select(sa.func.max(n_table.c.created_time)).where(n_table.c.user_id == user_id)).scalar()
        nid = new_id()
        conn.execute(n_table.insert(), {
            "id": nid, "user_id": user_id, "kind": checked, "title": title, "body": body, "recipe_id": recipe_id,
            "run_id": run_id, "created_time": max(now_ms(), (last or 0) + 1), "read_time": None,
        })
        return nid

    def get(self, notification_id: str, *, conn: Connection | None = None) -> Notification | None:
        with reading(self.engine, conn) as c:
            r = c.execute(sa.select(n_table).where(n_table.c.id == notification_id)).first()
        return _notification(r) if r is not None else None

    def list(self, user_id: str, *, unread_only: bool = False, limit: int = 50,
             conn: Connection | None = None) -> builtins.list[Notification]:
        """The user's notifications, newest first."""
        if not 1 <= limit <= LIST_MAX:
            raise InvalidInput(f"limit must be a whole number from 1 to {LIST_MAX}, not {limit}", field="limit")
        q = sa.select(n_table).where(n_table.c.user_id == user_id)
        if unread_only:
            q = q.where(n_table.c.read_time.is_(None))
        q = q.order_by(n_table.c.created_time.desc(), n_table.c.id.desc()).limit(limit)
        with reading(self.engine, conn) as c:
            return [_notification(r) for r in c.execute(q)]

    def unread_count(self, user_id: str, *, conn: Connection | None = None) -> int:
        q = sa.select(sa.func.count()).select_from(n_table).where(
            n_table.c.user_id == user_id, n_table.c.read_time.is_(None))
        with reading(self.engine, conn) as c:
            return int(c.execute(q).scalar_one())

    def mark_read(self, user_id: str, ids: Iterable[str] | Literal["all"], *, conn: Connection | None = None) -> int:
        """Mark the user's notifications ``ids`` (or ``"all"``) read; how many were unread.
        Ids of other users' notifications, or of none, are passed over."""
        q = n_table.update().where(n_table.c.user_id == user_id, n_table.c.read_time.is_(None))
        if ids != "all":
            wanted = builtins.list(dict.fromkeys([ids] if isinstance(ids, str) else ids))
            if not wanted:
                return 0
            q = q.where(n_table.c.id.in_(wanted))
        with writing(self.engine, conn) as c:
            return int(c.execute(q.values(read_time=now_ms())).rowcount)

    # -- webhooks ---------------------------------------------------------------------------

    def add_webhook(self, user_id: str, url: str, kinds: Iterable[str],
                    *, conn: Connection | None = None) -> tuple[str, str]:
        """Add a webhook for ``kinds``; ``(id, secret)``, the secret its receiver checks
        signatures with (shown this once). The URL must be http(s) without credentials; its
        addresses are checked again at each delivery (DNS may change)."""
        parsed = check_url(url.strip())
        checked = _kinds(kinds)
        host = parsed.raw_host.decode("ascii")
        try:
            reason = self.policy.admits(host, parsed.port or (443 if parsed.scheme == "https" else 80), host)
        except ValueError:
            reason = None  # a host name: resolved when delivering
        if reason is not None:
            raise OutboundRefused(f"{parsed.host} is {reason}; webhooks go there only when the operator allows "
                                  "it ([outbound] allow)", field="url", address=host)
        wid, secret = new_id(), secrets.token_urlsafe(32)
        with writing(self.engine, conn) as c:
            c.execute(w_table.insert(), {
                "id": wid, "user_id": user_id, "url": str(parsed), "secret": secret, "kinds": builtins.list(checked),
                "enabled": True, "last_status": None, "last_time": None, "created_time": now_ms(),
            })
        return wid, secret

    def list_webhooks(self, user_id: str, *, conn: Connection | None = None) -> builtins.list[Webhook]:
        """The user's webhooks, oldest first."""
        q = sa.select(w_table).where(w_table.c.user_id == user_id).order_by(w_table.c.created_time, w_table.c.id)
        with reading(self.engine, conn) as c:
            return [_webhook(r) for r in c.execute(q)]

    def remove_webhook(self, user_id: str, webhook_id: str, *, conn: Connection | None = None) -> None:
        with writing(self.engine, conn) as c:
            gone = c.execute(w_table.delete().where(w_table.c.id == webhook_id, w_table.c.user_id == user_id))
        if not gone.rowcount:
            raise NotFound(f"no webhook {webhook_id!r} of this user; list the webhooks to see their ids")

    def _targets(self, notification_id: str) -> tuple[Notification | None, builtins.list[_Target]]:
        """A notification and the enabled webhooks of its user that take its kind."""
        with read_tx(self.engine) as c:
            note = self.get(notification_id, conn=c)
            if note is None:
                return None, []
            rows = c.execute(sa.select(w_table.c.id, w_table.c.url, w_table.c.secret, w_table.c.kinds).where(
                w_table.c.user_id == note.user_id, w_table.c.enabled.is_(True)).order_by(w_table.c.created_time))
            return note, [_Target(r.id, r.url, r.secret) for r in rows if note.kind in (r.kinds or [])]

    def _record(self, webhook_id: str, status: str) -> None:
        """A delivery's outcome on its webhook's row."""
        with write_tx(self.engine) as c:
            c.execute(w_table.update().where(w_table.c.id == webhook_id).values(
                last_status=status[:STATUS_MAX], last_time=now_ms()))


class Deliverer:
    """Sends stored notifications to webhooks and channels (see the module's docstring).

    A webhook gets up to ``attempts`` tries: a network failure, a 5xx or a 429 is tried
    again after ``first_delay`` seconds, then twice that, and so on (waited with ``sleep``);
    any other answer, or a refused address, is final. Webhooks and channels are served
    concurrently, so a slow one delays no other; a channel gets ``channel_timeout`` seconds
    (a webhook's attempt is capped by the outbound policy's timeout)."""

    def __init__(self, notifications: Notifications, *, client: OutboundClient | None = None,
                 channels: Sequence[NotificationChannel] = (), attempts: int = 3, first_delay: float = 1.0,
                 channel_timeout: float = 30.0, sleep: Sleep = anyio.sleep) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.notifications = notifications
        self.client = client or OutboundClient(notifications.policy)
        self.channels = tuple(channels)
        self.attempts = attempts
        self.first_delay = first_delay
        self.channel_timeout = channel_timeout
        self._sleep = sleep

    async def deliver(self, notification_id: str) -> None:
        """Send the notification ``notification_id`` (committed already) everywhere it goes.
        Returns when every webhook and channel is done; raises nothing but cancellation."""
        try:
            note, targets = await to_thread.run_sync(self.notifications._targets, notification_id)
        except Exception:
            log.exception("notification %s could not be read for delivery", notification_id)
            return
        if note is None:
            log.warning("notification %s does not exist (was its transaction committed?); nothing sent",
                        notification_id)
            return
        body = json.dumps(note.payload(), ensure_ascii=False, separators=(",", ":")).encode()
        async with anyio.create_task_group() as tg:
            for target in targets:
                tg.start_soon(self._to_webhook, target, body)
            for channel in self.channels:
                tg.start_soon(self._to_channel, channel, note)

    async def _to_webhook(self, target: _Target, body: bytes) -> None:
        delay, status = self.first_delay, ""
        for attempt in range(1, self.attempts + 1):
            again = False
            try:
                answer = await self.client.post_signed(target.url, body, target.secret)
                status, again = str(answer.status), answer.status >= 500 or answer.status == 429
            except OutboundRefused as exc:
                status = f"refused: {exc}"
            except Unavailable as exc:
                status, again = f"unreachable: {exc}", True
            except Exception as exc:  # a bug below us must not fail the run that notified
                log.exception("webhook %s: delivery failed", target.id)
                status = f"error: {type(exc).__name__}"
            if not again or attempt == self.attempts:
                break
            await self._sleep(delay)
            delay *= 2
        if attempt > 1:
            status = f"{status} (attempt {attempt} of {self.attempts})"
        try:
            await to_thread.run_sync(self.notifications._record, target.id, status)
        except Exception:
            log.exception("webhook %s: its delivery status could not be recorded", target.id)

    async def _to_channel(self, channel: NotificationChannel, note: Notification) -> None:
        try:
            with anyio.move_on_after(self.channel_timeout) as scope:
                await channel.send(note)
            if scope.cancelled_caught:
                log.warning("notification channel %r took more than %g s to send notification %s; given up",
                            channel.name, self.channel_timeout, note.id)
        except Exception:
            log.exception("notification channel %r failed to send notification %s", channel.name, note.id)

