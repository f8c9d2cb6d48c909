"""Signing in to the web app with a name and password, in a real Chromium against a live
``noteloom serve``: a person sees the app with their own notes; a wrong password shows the
error and keeps the app hidden; the token way still works beside it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from page_support import Live
from playwright.sync_api import expect

from noteloom.app import open_app
from noteloom.config import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]
PASSWORD = "ann's long password"


@dataclass
class Person:
    name: str
    password: str
    note: str  # the title of a note in her own notebook


@pytest.fixture(scope="module")
def ann(live: Live) -> Person:
    """A member with a password and a notebook of her own, written beside the running server
    (SQLite: the server sees it at once)."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(live.home)}), load_entry_points=False)
    try:
        ws = app.workspace
        person = ws.add_person("ann", password=PASSWORD)
        book = ws.create_notebook("Ann's notebook", owner_id=person.id)
        ws.create_note("Ann's reading list", "Dune", notebook_id=book.id)
    finally:
        app.close()
    return Person("ann", PASSWORD, "Ann's reading list")


@pytest.fixture
def fresh(browser: Any) -> Iterator[tuple[Any, list[str]]]:
    """A page in a new browser context (no session), and the script errors it reports."""
    ctx = browser.new_context(viewport={"width": 1200, "height": 800})
    pg = ctx.new_page()
    pg.set_default_timeout(30_000)
    problems: list[str] = []
    pg.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    pg.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    try:
        yield pg, problems
    finally:
        ctx.close()


def test_a_person_signs_in_with_name_and_password_and_sees_the_app(
    fresh: tuple[Any, list[str]], live: Live, ann: Person
) -> None:
    pg, problems = fresh
    pg.goto(f"{live.url}/")
    expect(pg.locator("#sign-in")).to_be_visible()
    expect(pg.locator("#sign-in-name")).to_be_focused()
    pg.fill("#sign-in-name", ann.name)
    pg.fill("#sign-in-password", ann.password)
    pg.press("#sign-in-password", "Enter")
    expect(pg.locator("#sign-out")).to_be_visible()
    expect(pg.locator("#sign-in")).to_be_hidden()
    expect(pg.locator("#notes")).to_contain_text(ann.note)
    assert pg.evaluate("sessionStorage.getItem('noteloom.session')").startswith("nls_")
    assert pg.input_value("#sign-in-password") == ""  # the password is not left in the page
    assert ann.password not in pg.url
    me = pg.evaluate("NL.api('GET', '/api/v1/me')")
    assert (me["name"], me["role"]) == ("ann", "member")
    pg.click("#sign-out")
    expect(pg.locator("#sign-in-error")).to_have_text("Signed out.")
    assert not problems, problems


def test_a_wrong_password_shows_the_error_and_keeps_the_app_hidden(
    fresh: tuple[Any, list[str]], live: Live, ann: Person
) -> None:
    pg, problems = fresh
    pg.goto(f"{live.url}/")
    pg.fill("#sign-in-name", ann.name)
    pg.fill("#sign-in-password", "not her password")
    pg.click("#sign-in-password-form button[type=submit]")
    expect(pg.locator("#sign-in-error")).to_have_text("the name or the password is wrong")
    expect(pg.locator("#sign-out")).to_be_hidden()
    assert pg.input_value("#sign-in-password") == ""
    assert pg.evaluate("sessionStorage.getItem('noteloom.session')") is None
    # The token form beside it still signs the owner in.
    pg.fill("#sign-in-token", live.token)
    pg.press("#sign-in-token", "Enter")
    expect(pg.locator("#sign-out")).to_be_visible()
    assert not problems, problems
