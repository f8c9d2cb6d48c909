"""A live ``noteloom serve`` whose models are scripted, and one Chromium for all the page tests.

The workspace is prepared in-process before the server starts (notes, tool toggles);
each scripted model is a ``[providers.NAME]`` table playing its own script file, so a
test picks its scenario by picking a model, as a user would in the settings drawer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_support import TRIP, Live, served

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"


def _scripts(notes: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    words = "Here is what your notes say about the trip: leave Friday, bring the tent."
    return {
        "stream": [{"chunks": [w + " " for w in words.split()], "chunk_delay": 0.04,
                    "usage": {"input_tokens": 120, "output_tokens": 16}}],
        "slow": [{"chunks": ["Let me think ", "about that "], "chunk_delay": 0.05, "hang": True}],
        "confirm": [
            {"text": "I will move it to the trash.", "tool_calls": [{"name": "delete_note", "arguments": {"id": notes["old"]}}]},
            {"text": "Done: the note is in the trash."},
        ],
        "decline": [
            {"tool_calls": [{"name": "delete_note", "arguments": {"id": notes["keep"]}}]},
            {"text": "All right, I left the note alone."},
        ],
        "edit": [
            {"tool_calls": [{"name": "edit_selection", "arguments": {"text": "Saturday"}}]},
            {"text": "I proposed Saturday instead."},
        ],
        "broken": [{"chunks": ["Hm"], "error": "api_overloaded"}],
    }



@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("chat-browser")
    scripts_dir = home / "scripts"
    scripts_dir.mkdir()
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        notes = {
            "trip": ws.create_note("Trip", TRIP).id,
            "old": ws.create_note("Old packing list", "- socks").id,
            "keep": ws.create_note("Keep me", "important").id,
        }
        app.registry.set_enabled(ws, "delete_note", True)
        token = access_token(app)
    finally:
        app.close()
    tables = []
    for name, steps in _scripts(notes).items():
        path = scripts_dir / f"{name}.json"
        path.write_text(json.dumps({"steps": steps, "loop": True}), encoding="utf-8")
        tables.append(f'[providers.{name}]\ntype = "scripted"\nscript = "{path}"\nloop = true\n')
    (home / "noteloom.toml").write_text('[providers]\ndefault = "stream"\n\n' + "\n".join(tables), encoding="utf-8")

    with served(home) as url:
        yield Live(url, token, home, notes)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module. Not for the session: while Playwright's sync API is
    open, its event loop owns this thread and ``anyio.run`` in later tests would fail."""
    if not CHROMIUM.exists():
        pytest.fail(f"Chromium is not installed at {CHROMIUM}; `make test` installs it (apt-get install -y chromium)")
    from playwright.sync_api import expect, sync_playwright

    # Assertions wait for the page; a loaded machine may need far more than the default 5 s.
    expect.set_options(timeout=30_000)

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, live: Live, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page on /chat; it fails the test on a browser dialog or a script error and
    saves a screenshot named after the test."""
    context = browser.new_context(viewport={"width": 1360, "height": 860}, accept_downloads=True)
    pg = context.new_page()
    problems: list[str] = []
    pg.on("dialog", lambda d: (problems.append(f"browser dialog: {d.message}"), d.dismiss()))
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.set_default_timeout(30_000)
    pg.goto(live.page_url())
    try:
        yield pg
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / f"chat-{request.node.name}.png"))
        context.close()
    assert not problems, problems


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A failing page test shows the end of the server's log beside the assertion."""
    report = yield
    live = getattr(item, "funcargs", {}).get("live")
    if report.failed and live is not None:
        log_file = Path(live.home) / "server.log"
        if log_file.exists():
            tail = log_file.read_text(encoding="utf-8", errors="replace")[-6000:]
            report.sections.append(("noteloom serve log (end)", tail))
    return report
