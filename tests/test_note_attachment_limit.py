"""The largest file a note takes is a setting: ``[attachments] max_mb`` in noteloom.toml (10 MB
by default); a larger upload is refused with 413 naming the limit and the setting, and a
setting that is not a number > 0, or that the server's body cap would undercut, stops the
server from starting with a clear error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api_support import app_with, client
from noteloom.app import App
from noteloom.errors import ConfigError
from noteloom.web.app import create_web_app

pytestmark = pytest.mark.anyio


@pytest.fixture
def small(tmp_path: Path) -> Iterator[App]:
    a = app_with(tmp_path / "home", "[attachments]\nmax_mb = 0.5\n")
    try:
        yield a
    finally:
        a.close()


async def upload(app: App, size: int) -> tuple[int, dict[str, str]]:
    note = app.workspace.create_note("Files", "")
    async with client(app) as c:
        r = await c.post(f"/api/v1/notes/{note.id}/attachments",
                         files={"file": ("blob.bin", b"x" * size, "application/octet-stream")})
        return r.status_code, r.json()


async def test_a_file_up_to_the_setting_is_taken_and_a_larger_one_refused_naming_it(small: App) -> None:
    half = 512 * 1024
    assert (await upload(small, half))[0] == 201
    status, body = await upload(small, half + 1)
    assert status == 413 and body["error"] == "payload_too_large" and body["field"] == "file"
    assert "0.5 MB" in body["message"] and "[attachments] max_mb" in body["message"], body


async def test_the_default_is_10_mb(app: App) -> None:
    status, body = await upload(app, 10 * 1024 * 1024 + 1)
    assert status == 413 and "10 MB" in body["message"] and "[attachments] max_mb" in body["message"], body
    assert (await upload(app, 10 * 1024 * 1024))[0] == 201


@pytest.mark.parametrize(("toml", "says"), [
    ("[attachments]\nmax_mb = 0\n", "max_mb must be a number >= 0.001"),
    ("[attachments]\nmax_mb = \"ten\"\n", "max_mb must be a number"),
    ("[attachments]\nmax_mb = true\n", "max_mb must be a number"),
])
def test_a_bad_setting_stops_the_server_with_a_clear_error(tmp_path: Path, toml: str, says: str) -> None:
    a = app_with(tmp_path / "home", toml)
    try:
        with pytest.raises(ConfigError, match=says.replace("[", r"\[").replace("]", r"\]")):
            create_web_app(a)
    finally:
        a.close()


async def test_the_setting_holds_whatever_the_cap_on_other_bodies(tmp_path: Path) -> None:
    """The route lets its own multipart bodies through at the file size it takes: a larger
    setting works under the default cap on bodies, a small cap on bodies leaves it alone,
    and every other body keeps that cap."""
    a = app_with(tmp_path / "home", "[server]\nmax_body_bytes = 65536\n\n[attachments]\nmax_mb = 20\n")
    try:
        assert (await upload(a, 18 * 1024 * 1024))[0] == 201
        status, body = await upload(a, 20 * 1024 * 1024 + 1)
        assert status == 413 and "20 MB" in body["message"], body
        note = a.workspace.create_note("Other", "")
        async with client(a) as c:
            json_body = await c.patch(f"/api/v1/notes/{note.id}", json={"body": "x" * 70_000})
            not_multipart = await c.post(f"/api/v1/notes/{note.id}/attachments", content=b"x" * 70_000,
                                         headers={"content-type": "application/octet-stream"})
        assert json_body.status_code == 413 and not_multipart.status_code == 413
    finally:
        a.close()
