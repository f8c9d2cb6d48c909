"""What the page tests share with their fixtures: the live server's handle, a note body, and
`noteloom serve` started on a prepared home."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

TRIP = "# Trip\n\nWe leave on Friday at nine.\n\nBring the tent.\n"


@dataclass
class Live:
    url: str
    token: str
    home: Path
    notes: dict[str, str]

    def api(self, method: str, path: str, **kw: Any) -> Any:
        r = httpx.request(method, self.url + path, headers={"Authorization": f"Bearer {self.token}"}, timeout=10, **kw)
        r.raise_for_status()
        return r.json() if r.content else None

    def page_url(self, path: str = "/chat") -> str:
        return f"{self.url}{path}?token={self.token}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def served(home: Path, *, pythonpath: Path | None = None) -> Iterator[str]:
    """``noteloom serve`` on ``home`` (its log in ``home/server.log``) until the block ends;
    yields its URL once the health route answers. ``pythonpath`` is put first on the
    server's import path (a plugin installed for one test)."""
    port = _free_port()
    noteloom = shutil.which("noteloom", path=str(Path(sys.executable).parent)) or "noteloom"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTELOOM_MODEL", "NOTELOOM_DATABASE_URL")}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH", "")) if p)
    log = (home / "server.log").open("wb")
    proc = subprocess.Popen([noteloom, "serve", "--home", str(home), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:  # readiness: the health route answers
            try:
                if httpx.get(url + "/health", timeout=30).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"noteloom serve did not start: {(home / 'server.log').read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


DESK = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SIZES = {"desktop": DESK, "phone": PHONE}
ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"


def page_opener(browser: Any, shot: str) -> Iterator[Callable[..., Any]]:
    """A fixture's ``open_page(size="desktop", **context options)``: pages in fresh contexts
    of a size of :data:`SIZES`; a script error or a browser dialog fails the test, and each page
    leaves ``tests/.artifacts/{shot}-{n}.png``."""
    contexts: list[Any] = []
    pages: list[Any] = []
    problems: list[str] = []

    def make(size: str = "desktop", **options: Any) -> Any:
        context = browser.new_context(viewport=SIZES[size], **options)
        contexts.append(context)
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
        pg.on("dialog", lambda d: (problems.append(f"browser dialog: {d.message}"), d.dismiss()))
        pages.append(pg)
        return pg

    try:
        yield make
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        for i, pg in enumerate(pages):
            if not pg.is_closed():
                pg.screenshot(path=str(ARTIFACTS / f"{shot}-{i}.png"))
        for context in contexts:
            context.close()
    assert not problems, problems


def signed_in_app(browser: Any, live: Live, shot: str, viewport: dict[str, int]) -> Iterator[Any]:
    """A fixture's page: the app at ``/`` signed in, in a fresh context of ``viewport``. A browser
    dialog or a script error fails the test; ``tests/.artifacts/{shot}.png`` shows how it ended."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport=viewport)
    pg = context.new_page()
    problems: list[str] = []
    pg.on("dialog", lambda d: (problems.append(f"browser dialog: {d.message}"), d.dismiss()))
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    pg.goto(live.page_url("/"))
    expect(pg.locator("#sign-out")).to_be_visible()
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"{shot}.png"))
        context.close()
    assert not problems, problems
