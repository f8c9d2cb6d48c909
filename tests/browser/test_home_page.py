"""The home page is a shell: what it shows of the workspace, it fetches with the tab's session."""

from __future__ import annotations

from typing import Any

from livesrv import live_server
from noteloom.app import App


def test_the_home_page_shows_the_semantic_index_status(app: App, browser: Any) -> None:
    app.workspace.create_note("Lisbon", "The night train to Lisbon leaves at ten.")
    with live_server(app) as srv:
        context = browser.new_context()
        try:
            pg = context.new_page()
            pg.set_default_timeout(30_000)
            pg.goto(f"{srv.url}/#token={srv.token}")
            status = pg.locator("#index-status")
            status.wait_for(state="visible")
            text = status.inner_text()
            assert text.startswith("Semantic index: not built") and "1 pending" in text, text
            assert "Lisbon" in pg.locator("#notes").inner_text()
        finally:
            context.close()
