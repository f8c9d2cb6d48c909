"""``noteloom chat --attach FILE``: the files go with the first message, checked as the web
chat checks them, and are stored with it."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import noteloom.plugins
from attachment_support import png_bytes, svg_bytes, text_pdf
from noteloom import db
from noteloom.app import open_app
from noteloom.chat import tables as t
from noteloom.cli import cli
from noteloom.config import load_settings
from noteloom.messages import ImagePart, TextPart
from noteloom.plugins import hookimpl
from noteloom.providers import ModelCapabilities, ProviderType
from noteloom.providers.scripted import ScriptedProvider

PLUGIN = "noteloom_test_attach_plugin"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ScriptedProvider]:
    """A data directory whose model ``rec`` is a scripted model that sees images and PDFs."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("NOTELOOM_HOME", str(home))
    monkeypatch.delenv("NOTELOOM_DATABASE_URL", raising=False)
    provider = ScriptedProvider("rec", [{"text": "Got them."}, {"text": "Again."}],
                                capabilities=ModelCapabilities(vision=True, document=True))
    module = types.ModuleType(PLUGIN)

    @hookimpl
    def register_providers(register: Any) -> None:
        register(ProviderType("recorder", lambda config: provider))

    module.register_providers = register_providers  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, PLUGIN, module)
    monkeypatch.setattr(noteloom.plugins, "DEFAULT_PLUGINS", [*noteloom.plugins.DEFAULT_PLUGINS, PLUGIN])
    (home / "noteloom.toml").write_text('[providers.rec]\ntype = "recorder"\n')
    return home, provider


def test_attached_files_go_with_the_first_message(served: tuple[Path, ScriptedProvider], tmp_path: Path) -> None:
    home, provider = served
    (tmp_path / "plan.pdf").write_bytes(text_pdf(1, "Meet at the harbour at nine"))
    (tmp_path / "dot.png").write_bytes(png_bytes())
    result = CliRunner().invoke(cli, ["chat", "-m", "rec", "--attach", str(tmp_path / "plan.pdf"),
                                      "--attach", str(tmp_path / "dot.png")], input="what is planned?\nthanks\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Got them.\nAgain.\n"
    first, second = provider.requests
    user = first.messages[-1]
    said = "\n".join(p.text for p in user.parts if isinstance(p, TextPart))
    assert "what is planned?" in said and "Meet at the harbour at nine" in said and "<<UNTRUSTED_" in said
    assert [p.media_type for p in user.parts if isinstance(p, ImagePart)] == ["image/png"]
    assert not any(isinstance(p, ImagePart) for p in second.messages[-1].parts)  # only the first message
    app = open_app(load_settings(data_dir=home))
    try:
        with db.read_tx(app.engine) as c:
            names = c.execute(sa.select(t.attachments.c.name).order_by(t.attachments.c.position)).scalars().all()
    finally:
        app.close()
    assert names == ["plan.pdf", "dot.png"]


def test_a_refused_file_is_reported_and_nothing_is_sent(served: tuple[Path, ScriptedProvider], tmp_path: Path) -> None:
    _, provider = served
    (tmp_path / "logo.svg").write_bytes(svg_bytes())
    result = CliRunner().invoke(cli, ["chat", "-m", "rec", "--attach", str(tmp_path / "logo.svg")], input="look\n")
    assert result.exit_code == 0
    assert "logo.svg" in result.stderr and "SVG" in result.stderr
    assert provider.requests == []
    missing = CliRunner().invoke(cli, ["chat", "-m", "rec", "--attach", str(tmp_path / "nope.pdf")], input="x\n")
    assert missing.exit_code == 2 and "--attach" in missing.stderr  # a usage error (the box may wrap the path)
