"""Helpers for the JSON API tests: an in-process client over the full web app (token
middleware included), and a second user of the workspace with a token of theirs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2 as httpx

from noteloom import db
from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.db import new_id, now_ms
from noteloom.web.app import create_web_app


@asynccontextmanager
async def client(app: App, token: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app``'s web app in this process, signed in with ``token`` (the owner's by default)."""
    token = token or access_token(app)
    transport = httpx.ASGITransport(app=create_web_app(app))
    # The timeout only bounds a hung app (a busy machine is slow, never this slow).
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver", timeout=120,
                                 headers={"Authorization": f"Bearer {token}"}) as c:
        yield c


def app_with(home: Path, toml: str) -> App:
    """An app on a fresh workspace in ``home`` with ``toml`` as its noteloom.toml."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "noteloom.toml").write_text(toml, encoding="utf-8")
    return open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)


def second_user(app: App, name: str = "guest") -> tuple[str, str]:
    """Another user of the workspace (no command makes one yet: a row) and a token of theirs."""
    uid = new_id()
    with db.write_tx(app.engine) as c:
        c.execute(db.users.insert(), {"id": uid, "name": name, "is_owner": False, "created_time": now_ms()})
    return uid, app.workspace.create_token(uid)
