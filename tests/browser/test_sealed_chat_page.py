"""Sealed chats on the chat page, in a real Chromium against a live ``noteloom serve``: the
vault is set up (its recovery key shown once), a private chat answers and leaves no word of
it in the raw database, locking shows it as "Locked chat" with a lock, opening or sending
into it asks to unlock and then goes on; a fortress chat is offered private models only; a
private chat on a model that is not private is warned about.

Two scripted models: ``own`` (private, the default) and ``cloud`` (``private = false``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from page_support import Live, served
from playwright.sync_api import expect

from noteloom.app import access_token, open_app
from noteloom.config import load_settings

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]

PASSPHRASE = "otters hold hands asleep"
MARKER = "ZEBRAFINCH7731"          # typed into the private chat
ANSWER_MARKER = "PELICAN4417"      # in the private model's answer
RECOVERY_KEY = re.compile(r"^[A-Z2-7]{4}(-[A-Z2-7]{4}){12}$")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("sealed-chat-browser")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        token = access_token(app)
    finally:
        app.close()
    scripts = {"own": {"text": f"Sealed and noted: {ANSWER_MARKER}."}, "cloud": {"text": "From the cloud."}}
    tables = []
    for name, step in scripts.items():
        path = home / f"{name}.json"
        path.write_text(json.dumps({"steps": [step], "loop": True}), encoding="utf-8")
        private = "" if name == "own" else "private = false\n"
        tables.append(f'[providers.{name}]\ntype = "scripted"\nscript = "{path}"\nloop = true\n{private}')
    (home / "noteloom.toml").write_text('[providers]\ndefault = "own"\n\n' + "\n".join(tables), encoding="utf-8")
    with served(home) as url:
        yield Live(url, token, home, {})


@pytest.fixture
def vault(live: Live) -> None:
    """The owner has a vault (made over the API when no earlier test made it on the page).
    Ask for it before ``page``, which reads the vault's state as it loads."""
    if not live.api("GET", "/api/v1/vault")["exists"]:
        live.api("POST", "/api/v1/vault/setup", json={"passphrase": PASSPHRASE})


def send(page: Any, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def unlock(page: Any, passphrase: str = PASSPHRASE) -> None:
    """Answer the unlock prompt, which has taken the focus."""
    expect(page.locator("#vault-unlock")).to_be_visible()
    expect(page.locator("#vault-passphrase")).to_be_focused()
    page.keyboard.type(passphrase)
    page.keyboard.press("Enter")


def database_files(live: Live) -> list[Path]:
    db = live.home / "noteloom.db"
    assert db.is_file(), f"no SQLite database at {db}"
    return [p for p in live.home.glob("noteloom.db*") if p.is_file()]


def test_set_up_the_vault_chat_privately_lock_see_the_placeholder_unlock_and_continue(page: Any, live: Live) -> None:
    expect(page.locator("#chat-app")).to_be_visible()
    state = page.locator("#vault-state")
    expect(state).to_have_text("No vault")

    # Set up: the passphrase twice, then the recovery key, shown once until it is said to be saved.
    page.click("#vault-button")
    dialog = page.locator("#vault-dialog")
    expect(dialog).to_contain_text("If you lose the passphrase, your protected chats cannot be read")
    expect(page.locator("#vault-new")).to_be_focused()
    page.fill("#vault-new", PASSPHRASE)
    page.fill("#vault-new2", PASSPHRASE + "!")
    page.press("#vault-new2", "Enter")
    expect(page.locator("#vault-setup-error")).to_contain_text("differ")
    page.fill("#vault-new2", PASSPHRASE)
    page.press("#vault-new2", "Enter")
    key = page.locator("#vault-recovery-key")
    expect(key).to_have_text(RECOVERY_KEY)
    expect(key).to_be_focused()
    recovery = key.inner_text()
    expect(page.locator("#vault-warning")).to_contain_text("cannot be read by anyone")
    expect(page.locator("#vault-recovery-done")).to_be_disabled()
    page.check("#vault-saved")
    page.click("#vault-recovery-done")
    expect(dialog).to_be_hidden()
    assert recovery not in page.content(), "the recovery key stayed in the page after it was saved"
    expect(state).to_contain_text("Vault unlocked until")

    # A private chat (chosen before it exists) gets its answer.
    page.click("#level-open")
    expect(page.locator("input[name=set-level][value=standard]")).to_be_focused()
    page.check("input[name=set-level][value=private]")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    expect(page.locator("#level-open")).to_have_attribute("data-level", "private")
    send(page, f"Keep this between us: the codeword is {MARKER}.")
    answers = page.locator(".msg.assistant .meta")
    expect(answers).to_have_count(1)
    expect(page.locator(".msg.assistant .bubble")).to_contain_text(f"Sealed and noted: {ANSWER_MARKER}.")
    expect(page.locator(".privacy-warning")).to_have_count(0)  # the model is private
    current = page.locator("#thread-list li[aria-current=true]")
    expect(current).to_have_attribute("data-level", "private")
    conv_id = current.get_attribute("data-id")
    listed = {c["id"]: c for c in live.api("GET", "/api/v1/chat/conversations")["conversations"]}
    assert listed[conv_id]["security_level"] == "private"

    # Sealed at rest: not a word of the chat in the raw database or its WAL.
    for path in database_files(live):
        raw = path.read_bytes()
        assert MARKER.encode() not in raw and ANSWER_MARKER.encode() not in raw, f"{path.name} holds the chat in clear"

    # Lock: the list shows the placeholder with a lock, and the open chat shows as locked.
    page.click("#vault-button")
    expect(state).to_contain_text("Vault locked")
    item = page.locator(f'#thread-list li[data-id="{conv_id}"]')
    expect(item.locator(".lock-mark")).to_be_visible()
    expect(item.locator(".thread")).to_contain_text("Locked chat")
    expect(item).not_to_contain_text(MARKER)
    expect(page.locator("#locked-view")).to_be_visible()
    expect(page.locator("#conv-title")).to_have_text("Locked chat")
    expect(page.locator("#transcript")).not_to_contain_text(MARKER)

    # Opening it asks to unlock (a prompt, not an error), then opens it.
    page.click("#new-chat")
    item.locator(".thread").click()
    expect(dialog).to_be_visible()
    expect(page.locator(".card.error")).to_have_count(0)
    unlock(page, "not the passphrase")
    expect(page.locator("#vault-unlock-error")).to_contain_text("not right")
    expect(page.locator("#sign-in")).to_be_hidden()  # a wrong passphrase does not sign out
    page.fill("#vault-passphrase", PASSPHRASE)
    page.press("#vault-passphrase", "Enter")
    expect(dialog).to_be_hidden()
    expect(page.locator("#transcript")).to_contain_text(MARKER)
    expect(page.locator("#conv-title")).to_contain_text("Keep this between us")
    expect(page.locator("#message")).to_be_focused()

    # ... and the chat goes on.
    send(page, "What was the codeword again?")
    expect(answers).to_have_count(2)

    # Sending into it while locked asks to unlock, then sends what was typed.
    page.click("#vault-button")
    expect(page.locator("#locked-view")).to_be_visible()
    send(page, "One more thing before I go.")
    expect(dialog).to_be_visible()
    unlock(page)
    expect(dialog).to_be_hidden()
    expect(page.locator(".msg.user")).to_have_count(3)
    expect(page.locator(".msg.user").last).to_contain_text("One more thing before I go.")
    expect(answers).to_have_count(3)
    expect(page.locator(".card.error")).to_have_count(0)


def test_a_fortress_chat_is_offered_private_models_only_and_asked_for_one(vault: None, page: Any, live: Live) -> None:
    expect(page.locator("#chat-app")).to_be_visible()
    offered = "els => els.filter((o) => !o.disabled).map((o) => o.value)"
    private = {m["id"] for m in live.api("GET", "/api/v1/chat/models")["models"] if m["private"]}
    assert "cloud:script" not in private and "own:script" in private

    # A new chat: the picker loses the cloud model as soon as fortress is chosen.
    page.click("#settings-open")
    assert "cloud:script" in page.locator("#set-model option").evaluate_all(offered)
    page.check("input[name=set-level][value=fortress]")
    choices = page.locator("#set-model option").evaluate_all(offered)
    assert "cloud:script" not in choices
    assert set(choices) - {""} <= private, choices
    page.click("#settings-close")

    # A standard chat on the cloud model, raised to fortress: the picker asks for a private model.
    page.click("#settings-open")
    page.select_option("#set-model", "cloud:script")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    send(page, "Plan the week")
    expect(page.locator(".msg.assistant .bubble")).to_contain_text("From the cloud.")
    expect(page.locator(".msg.assistant .meta")).to_be_visible()
    conv_id = page.locator("#thread-list li[aria-current=true]").get_attribute("data-id")
    page.click("#level-open")
    page.check("input[name=set-level][value=fortress]")
    expect(page.locator("#set-model")).to_have_value("-")
    expect(page.locator("#set-model option:checked")).to_have_text("Choose a private model")
    expect(page.locator("#set-level-note")).to_contain_text("private models only")
    assert "cloud:script" not in page.locator("#set-model option").evaluate_all(offered)
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings-error")).to_contain_text("choose a private model")
    expect(page.locator("#set-model")).to_be_focused()
    page.select_option("#set-model", "own:script")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    listed = {c["id"]: c for c in live.api("GET", "/api/v1/chat/conversations")["conversations"]}
    assert listed[conv_id]["security_level"] == "fortress"
    assert listed[conv_id]["controls"]["model"] == "own:script"
    # Raised while this browser's vault is locked: sealed at once, so it shows as locked.
    expect(page.locator("#level-open")).to_have_attribute("data-level", "fortress")
    expect(page.locator("#locked-view")).to_be_visible()
    expect(page.locator(f'#thread-list li[data-id="{conv_id}"] .lock-mark')).to_be_visible()


def test_a_private_chat_on_a_model_that_is_not_private_shows_the_privacy_warning(
    vault: None, page: Any, live: Live
) -> None:
    expect(page.locator("#chat-app")).to_be_visible()
    expect(page.locator("#vault-state")).to_contain_text("Vault locked")
    page.click("#level-open")
    page.check("input[name=set-level][value=private]")
    page.select_option("#set-model", "cloud:script")
    expect(page.locator("#set-level-note")).to_contain_text("cloud:script is not a private model")
    page.click("#settings-form button[type=submit]")
    expect(page.locator("#settings")).to_be_hidden()
    # The vault is locked in this browser: sending asks to unlock, then sends.
    send(page, "Hello, privately")
    unlock(page)
    warning = page.locator(".msg.assistant .privacy-warning")
    expect(warning).to_contain_text("is not a private model, and this chat is private")
    expect(page.locator(".msg.assistant .bubble")).to_contain_text("From the cloud.")
    expect(page.locator("#level-open")).to_have_attribute("data-level", "private")
