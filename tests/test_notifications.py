"""Notifications: stored in the notifying transaction, counted and marked read per user, sent
after the commit to the user's webhooks (signed, through the guarded client, retried) and to
the channels plugins register. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import anyio
import pytest

from http_support import loopback_http
from noteloom.app import App
from noteloom.db import new_id, now_ms, users, write_tx
from noteloom.errors import InvalidInput, NotFound, OutboundRefused
from noteloom.notifications import KINDS, Deliverer, Notifications
from noteloom.outbound import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    OutboundClient,
    OutboundPolicy,
    verify,
)
from noteloom.plugins import Notification, hookimpl, notification_channels, plugin_manager

pytestmark = pytest.mark.anyio


@dataclass
class Receiver:
    """A webhook receiver on loopback. It checks each request's signature with ``secret``
    and answers 401 when it does not match; otherwise the next of ``statuses`` (200 after)."""

    port: int = 0
    secret: str = ""
    statuses: list[int] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


def _handler(rx: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            signed = verify(body, rx.secret, self.headers.get(TIMESTAMP_HEADER, ""),
                            self.headers.get(SIGNATURE_HEADER, ""))
            status = (rx.statuses.pop(0) if rx.statuses else 200) if signed else 401
            if signed:
                rx.received.append(json.loads(body))
            rx.answered.append(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

    return Handler


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rx = Receiver()
    with loopback_http(_handler(rx)) as rx.port:
        yield rx


@pytest.fixture
def store(any_app: App) -> Notifications:
    return Notifications(any_app.engine, OutboundPolicy(allow=frozenset({"127.0.0.1"})))


def a_user(app: App, name: str) -> str:
    uid = new_id()
    with write_tx(app.engine) as c:
        c.execute(users.insert(), {"id": uid, "name": name, "is_owner": False, "created_time": now_ms()})
    return uid


def notify(store: Notifications, user_id: str, kind: str = "failure", title: str = "Digest failed", **kw: Any) -> str:
    with write_tx(store.engine) as conn:
        return store.notify(conn, user_id, kind, title, kw.pop("body", "the model was unreachable"), **kw)


class Delays:
    """Records the waits between attempts instead of waiting."""

    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


# -- the store ------------------------------------------------------------------------------------


def test_a_notification_is_stored_with_what_it_is_about(any_app: App, store: Notifications) -> None:
    owner = any_app.workspace.ensure_owner().id
    nid = notify(store, owner, "approval", "  Tidy-up waits for you ", body="delete 3 notes?",
                 recipe_id="r1", run_id="run1")
    got = store.get(nid)
    assert got is not None
    assert (got.user_id, got.kind, got.title, got.body, got.recipe_id, got.run_id, got.read_time) == (
        owner, "approval", "Tidy-up waits for you", "delete 3 notes?", "r1", "run1", None)
    assert got.payload() == {"id": nid, "kind": "approval", "title": "Tidy-up waits for you",
                             "body": "delete 3 notes?", "recipe_id": "r1", "run_id": "run1",
                             "created_time": got.created_time}
    long = store.get(notify(store, owner, title="x" * 400))
    assert long is not None and long.title == "x" * 299 + "…"  # the column's 300 characters


def test_a_notification_is_part_of_the_notifying_transaction(any_app: App, store: Notifications) -> None:
    owner = any_app.workspace.ensure_owner().id
    with pytest.raises(RuntimeError), write_tx(any_app.engine) as conn:
        store.notify(conn, owner, "failure", "Digest failed", "boom")
        raise RuntimeError("the run's own change failed")
    assert store.list(owner) == [] and store.unread_count(owner) == 0


def test_bad_values_name_their_field(any_app: App, store: Notifications) -> None:
    owner = any_app.workspace.ensure_owner().id
    for kwargs, name in (({"kind": "panic"}, "kind"), ({"title": "  "}, "title")):
        with pytest.raises(InvalidInput) as info:
            notify(store, owner, **kwargs)
        assert info.value.field == name
    with pytest.raises(InvalidInput) as info:
        store.list(owner, limit=0)
    assert info.value.field == "limit"


def test_unread_counts_and_marking_read_are_per_user(any_app: App, store: Notifications) -> None:
    owner, other = any_app.workspace.ensure_owner().id, a_user(any_app, "guest")
    mine = [notify(store, owner, kind, f"n{i}") for i, kind in enumerate(KINDS)]
    theirs = notify(store, other, "success", "theirs")
    assert (store.unread_count(owner), store.unread_count(other)) == (6, 1)
    assert [n.id for n in store.list(owner)] == mine[::-1]  # newest first
    assert [n.id for n in store.list(owner, limit=2)] == mine[:-3:-1]

    assert store.mark_read(owner, [mine[0], mine[1], theirs, "no-such-id"]) == 2
    assert store.mark_read(owner, [mine[0]]) == 0  # already read
    assert store.unread_count(owner) == 4 and store.unread_count(other) == 1
    assert [n.id for n in store.list(owner, unread_only=True)] == mine[:1:-1]
    assert all(n.read_time is not None for n in store.list(owner) if n.id in mine[:2])

    assert store.mark_read(owner, "all") == 4
    assert store.unread_count(owner) == 0 and store.list(owner, unread_only=True) == []
    assert store.unread_count(other) == 1  # "all" is all of the user's own


def test_webhooks_are_added_listed_and_removed(any_app: App, store: Notifications) -> None:
    owner, other = any_app.workspace.ensure_owner().id, a_user(any_app, "guest")
    wid, secret = store.add_webhook(owner, "https://hooks.example.com/noteloom", ["paused", "failure", "failure"])
    assert len(secret) >= 40 and secret != store.add_webhook(owner, "https://hooks.example.com/b", ["success"])[1]
    hooks = {h.id: h for h in store.list_webhooks(owner)}
    assert len(hooks) == 2
    assert (hooks[wid].url, hooks[wid].kinds, hooks[wid].enabled, hooks[wid].last_status) == (
        "https://hooks.example.com/noteloom", ("failure", "paused"), True, None)
    assert not hasattr(hooks[wid], "secret")  # told once, when added
    assert store.list_webhooks(other) == []

    with pytest.raises(NotFound):
        store.remove_webhook(other, wid)  # not theirs
    store.remove_webhook(owner, wid)
    assert [h.url for h in store.list_webhooks(owner)] == ["https://hooks.example.com/b"]
    with pytest.raises(NotFound):
        store.remove_webhook(owner, wid)


@pytest.mark.parametrize(("url", "kinds", "field"), [
    ("ftp://hooks.example.com/x", ["failure"], "url"),
    ("https://me:pw@hooks.example.com/x", ["failure"], "url"),
    ("not a url", ["failure"], "url"),
    ("http://169.254.169.254/latest", ["failure"], "url"),
    ("http://[::1]:8080/", ["failure"], "url"),
    ("https://hooks.example.com/x", [], "kinds"),
    ("https://hooks.example.com/x", ["failure", "gossip"], "kinds"),
])
def test_a_bad_webhook_is_refused_when_added(any_app: App, url: str, kinds: list[str], field: str) -> None:
    store = Notifications(any_app.engine)  # the default policy: no private addresses
    with pytest.raises(InvalidInput) as info:
        store.add_webhook(any_app.workspace.ensure_owner().id, url, kinds)
    assert info.value.field == field and isinstance(info.value, OutboundRefused) == (field == "url")
    assert store.list_webhooks(any_app.workspace.ensure_owner().id) == []


# -- delivery -------------------------------------------------------------------------------------


async def test_a_notification_reaches_the_webhooks_that_take_its_kind_signed(
    any_app: App, store: Notifications, receiver: Receiver
) -> None:
    owner, other = any_app.workspace.ensure_owner().id, a_user(any_app, "guest")
    wid, receiver.secret = store.add_webhook(owner, receiver.url(), ["failure", "budget"])
    quiet, _ = store.add_webhook(owner, receiver.url("/quiet"), ["success"])
    store.add_webhook(other, receiver.url("/theirs"), ["failure"])
    nid = notify(store, owner, "failure", "Digest failed", body="the model was unreachable", recipe_id="r1",
                 run_id="run1")

    await Deliverer(store, sleep=Delays()).deliver(nid)

    note = store.get(nid)
    assert note is not None
    assert receiver.received == [{"id": nid, "kind": "failure", "title": "Digest failed",
                                  "body": "the model was unreachable", "recipe_id": "r1", "run_id": "run1",
                                  "created_time": note.created_time}]
    assert receiver.answered == [200]  # one request, its signature checked by the receiver
    hooks = {h.id: h for h in store.list_webhooks(owner)}
    assert hooks[wid].last_status == "200" and hooks[wid].last_time is not None
    assert hooks[quiet].last_status is None


async def test_a_webhook_with_the_wrong_secret_is_told_apart(
    any_app: App, store: Notifications, receiver: Receiver
) -> None:
    owner = any_app.workspace.ensure_owner().id
    store.add_webhook(owner, receiver.url(), ["failure"])
    receiver.secret = "not the webhook's secret"
    await Deliverer(store, sleep=Delays()).deliver(notify(store, owner))
    assert receiver.answered == [401] and receiver.received == []
    assert store.list_webhooks(owner)[0].last_status == "401"  # a 4xx is final: not tried again


async def test_a_failed_attempt_is_tried_again_with_doubling_waits(
    any_app: App, store: Notifications, receiver: Receiver
) -> None:
    owner = any_app.workspace.ensure_owner().id
    _, receiver.secret = store.add_webhook(owner, receiver.url(), ["failure"])
    receiver.statuses = [500]
    delays = Delays()
    await Deliverer(store, sleep=delays, first_delay=1.5).deliver(notify(store, owner))
    assert receiver.answered == [500, 200] and len(receiver.received) == 2
    assert delays.waited == [1.5]
    assert store.list_webhooks(owner)[0].last_status == "200 (attempt 2 of 3)"

    receiver.statuses, receiver.answered, delays.waited = [503, 500, 502, 200], [], []
    await Deliverer(store, sleep=delays, first_delay=1.5).deliver(notify(store, owner))
    assert receiver.answered == [503, 500, 502]  # three attempts, then it gives up
    assert delays.waited == [1.5, 3.0]
    assert store.list_webhooks(owner)[0].last_status == "502 (attempt 3 of 3)"


async def test_an_unreachable_or_refused_webhook_never_fails_the_caller(any_app: App, store: Notifications) -> None:
    owner = any_app.workspace.ensure_owner().id
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    down, _ = store.add_webhook(owner, f"http://127.0.0.1:{closed}/hook", ["failure"])
    inside, _ = store.add_webhook(owner, "http://hooks.inside.example/hook", ["failure"])

    async def resolve(host: str, port: int) -> list[str]:
        assert host == "hooks.inside.example"
        return ["10.0.0.7"]

    delays = Delays()
    client = OutboundClient(store.policy, resolve=resolve)
    await Deliverer(store, client=client, sleep=delays).deliver(notify(store, owner))
    hooks = {h.id: h.last_status or "" for h in store.list_webhooks(owner)}
    assert hooks[down].startswith("unreachable: could not reach 127.0.0.1") and "(attempt 3 of 3)" in hooks[down]
    assert hooks[inside].startswith("refused: hooks.inside.example resolves to 10.0.0.7, is a private address")
    assert delays.waited == [1.0, 2.0]  # the unreachable one was retried, the refused one was not

    await Deliverer(store, sleep=delays).deliver("no-such-notification")  # nothing to send, nothing raised


async def test_plugin_channels_receive_each_notification(any_app: App, store: Notifications) -> None:
    got: list[Notification] = []

    class Recorder:
        name = "recorder"

        async def send(self, notification: Notification) -> None:
            got.append(notification)

    class Broken:
        name = "broken"

        async def send(self, notification: Notification) -> None:
            raise ConnectionError("the chat service is down")

    class Plugin:
        @hookimpl
        def register_notification_channels(self, register: Any) -> None:
            register(Broken())
            register(Recorder())
            register(Recorder())  # a second of one name is left out

    channels = notification_channels(plugin_manager([Plugin()], load_entry_points=False, defaults=False))
    assert [c.name for c in channels] == ["broken", "recorder"]

    owner = any_app.workspace.ensure_owner().id
    nid = notify(store, owner, "paused", "Digest paused after 3 failures", recipe_id="r1")
    await Deliverer(store, channels=channels, sleep=Delays()).deliver(nid)
    assert got == [store.get(nid)]  # the broken channel stopped neither the other nor the caller


def test_an_object_that_is_no_channel_is_refused_at_registration() -> None:
    class Plugin:
        @hookimpl
        def register_notification_channels(self, register: Any) -> None:
            register(object())

    with pytest.raises(TypeError, match="no notification channel"):
        notification_channels(plugin_manager([Plugin()], load_entry_points=False, defaults=False))


async def test_a_channel_that_never_returns_is_given_up(any_app: App, store: Notifications) -> None:
    class Stuck:
        name = "stuck"

        async def send(self, notification: Notification) -> None:
            await anyio.Event().wait()  # never set

    with anyio.fail_after(60):  # a hang guard; the channel's own cap ends it
        await Deliverer(store, channels=[Stuck()], channel_timeout=0.05).deliver(
            notify(store, any_app.workspace.ensure_owner().id))
