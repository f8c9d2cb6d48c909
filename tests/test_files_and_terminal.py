"""Hardening of what lies around the workspace: which files an API client can make the
server read, who may read the data folder, what a missing ``--home`` does, and what
reaches the terminal when the CLI prints text someone else wrote."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from chat_support import running_chat
from noteloom.app import App, access_token
from noteloom.web.app import create_web_app

# -- files named by API clients -------------------------------------------------------------

_opened: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None and args and isinstance(args[0], str | bytes | Path):
        _opened.append(str(args[0]))


sys.addaudithook(_audit)  # an audit hook cannot be removed: it records only inside watch_opens()


@contextmanager
def watch_opens() -> Iterator[list[str]]:
    """Every path this process opens from Python (builtins.open, os.open, Path.open …) meanwhile."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_api_client_cannot_make_the_server_read_a_file_through_a_model_address(
    app: App, tmp_path: Path, anyio_backend: str
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps([{"text": "the contents of a file the client named"}]))
    token = access_token(app)
    transport = httpx.ASGITransport(app=create_web_app(app))
    async with running_chat(app), httpx.AsyncClient(
        transport=transport, base_url="http://testserver", headers={"Authorization": f"Bearer {token}"}
    ) as c:
        sent = await c.post("/api/v1/chat/send", json={"message": "hi", "controls": {"model": "echo"}})
        assert sent.status_code == 202, sent.text
        conversation = sent.json()["conversation_id"]
        for address in ("scripted:/etc/shadow", f"scripted:{secret}", "scripted:/dev/zero"):
            with watch_opens() as opened:
                r = await c.patch(f"/api/v1/chat/conversations/{conversation}",
                                  json={"controls": {"model": address}})
                again = await c.post("/api/v1/chat/send", json={
                    "message": "hi", "conversation_id": conversation, "controls": {"model": address}})
            assert r.status_code == 422, r.text
            assert again.status_code == 422, again.text
            message = r.json()["message"]
            assert address in message and "noteloom.toml" in message and "[providers.NAME]" in message
            assert not [p for p in opened if p in ("/etc/shadow", "/dev/zero", str(secret))], opened
        kept = (await c.get(f"/api/v1/chat/conversations/{conversation}")).json()
        assert kept["controls"]["model"] == "echo", "a refused model leaves the controls as they were"
