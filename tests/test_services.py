"""The app's services: typed, built in dependency order, and a tool that needs one that is
off is left out and said so."""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.plugins import hookimpl
from noteloom.providers.registry import ProviderRegistry
from noteloom.semantic import SemanticIndex
from noteloom.services import Services
from noteloom.tools import ToolContext, ToolDef


class HashEmbedder:
    """Deterministic vectors from hashed words (no model)."""

    name = "hash:8"
    dimensions = 8

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dimensions
        for word in text.lower().split():
            v[hashlib.sha256(word.encode()).digest()[0] % self.dimensions] += 1.0
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class Needs:
    """Registers one tool per entry of ``requires``; records what happened, in order."""

    def __init__(self, *requires: tuple[str, ...], with_embedder: bool = False) -> None:
        self.requires = requires
        self.with_embedder = with_embedder
        self.order: list[str] = []
        self.seen: list[Any] = []

    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        if self.with_embedder:
            def build(config: Mapping[str, Any], env: Mapping[str, str]) -> HashEmbedder:
                self.order.append("embedder")
                return HashEmbedder()

            register("hash", build)

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        self.order.append("tools")
        for needs in self.requires:
            async def handler(ctx: ToolContext, args: dict[str, Any], needs: tuple[str, ...] = needs) -> Any:
                self.seen.append([ctx.services.get(n) for n in needs])
                return {"ok": True}

            name = "needs_" + "_".join(needs)
            register(ToolDef(name=name, description=f"needs {needs}", input_schema={"type": "object"},
                             handler=handler, requires=needs))


def _names(app: App) -> set[str]:
    return {t.name for t in app.registry.all()}


def _open(home: Path, *plugins: Any, toml: str = "[embeddings]\nenabled = false\n") -> App:
    home.mkdir(parents=True, exist_ok=True)
    (home / "noteloom.toml").write_text(toml, encoding="utf-8")
    return open_app(load_settings({"NOTELOOM_HOME": str(home)}), plugins=list(plugins), load_entry_points=False)


def test_a_plugin_tool_requiring_the_providers_is_registered_and_gets_them(tmp_path: Path) -> None:
    plugin = Needs(("providers",))
    app = _open(tmp_path / "h", plugin)
    try:
        assert "needs_providers" in _names(app)
        # Semantic search is off, and reindex with it (no folder is shared: read_file and list_dir
        # are left out too).
        assert sorted(t.tool for t in app.left_out if t.off not in (("folders",), ("web_search",))) == [
            "reindex", "semantic_search_notes"]
        result = anyio.run(app.registry.call, app.tool_context(), "needs_providers", {})
        assert result.payload == {"ok": True}
        assert plugin.seen == [[app.services.providers]]
        assert isinstance(plugin.seen[0][0], ProviderRegistry)
    finally:
        app.close()


def test_a_tool_requiring_a_service_that_is_off_is_left_out_and_said_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = Needs(("semantic",), ("providers", "weather"), ("providers",))
    with caplog.at_level(logging.INFO, logger="noteloom.app"):
        app = _open(tmp_path / "h", plugin)
    try:
        names = _names(app)
        assert "needs_providers" in names
        assert "needs_semantic" not in names and "needs_providers_weather" not in names
        # Ours too: semantic search is off here.
        assert "semantic_search_notes" not in names
        left = {t.tool: t for t in app.left_out}
        assert left["needs_semantic"].off == ("semantic",) and left["needs_semantic"].unknown == ()
        assert left["needs_providers_weather"].off == () and left["needs_providers_weather"].unknown == ("weather",)
        assert left["semantic_search_notes"].off == ("semantic",)
        warned = {r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING}
        assert "tool 'needs_semantic' is left out: it requires 'semantic', and 'semantic' is off" in warned
        assert ("tool 'needs_providers_weather' is left out: it requires 'weather', and this app has no "
                "service called 'weather'") in warned
        # A keyword-only workspace is not news: our own tool is told at INFO only.
        assert not any("semantic_search_notes" in m for m in warned)
        assert any("semantic_search_notes" in r.getMessage() for r in caplog.records)
    finally:
        app.close()


def test_the_services_are_built_in_dependency_order_before_the_tools(tmp_path: Path) -> None:
    plugin = Needs(("semantic", "providers"), with_embedder=True)
    app = _open(tmp_path / "h", plugin, toml='[embeddings]\ntype = "hash"\n')
    try:
        # The embedder was built (for the semantic index) before the tools registered, and
        # a tool needing the index and the providers found both.
        assert plugin.order == ["embedder", "tools"]
        assert "needs_semantic_providers" in _names(app)
        assert "semantic_search_notes" in _names(app)
        assert [t for t in app.left_out if t.off not in (("folders",), ("web_search",))] == []  # no folder shared, no search engine set
        assert isinstance(app.services.semantic, SemanticIndex)
        assert app.services.on() == ["providers", "semantic", "recipes", "data", "web"]
        anyio.run(app.registry.call, app.tool_context(), "needs_semantic_providers", {})
        assert plugin.seen == [[app.services.semantic, app.services.providers]]
    finally:
        app.close()


def test_a_tool_context_carries_the_apps_services_object(app: App) -> None:
    ctx = app.tool_context()
    assert ctx.services is app.services
    assert isinstance(ctx.services, Services)
    # A context made without an app has no services.
    bare = ToolContext(workspace=app.workspace)
    assert bare.services.semantic is None and bare.services.get("providers") is None


def test_services_answer_by_name_as_by_attribute(app: App) -> None:
    services = app.services
    assert services.get("providers") is services.providers is services["providers"]
    assert "providers" in services
    assert "chat" not in services and services.get("chat") is None  # not running here
    with pytest.raises(KeyError):
        services["chat"]
    marker = object()
    services.add("weather", marker)
    assert services.get("weather") is marker and "weather" in services and services.known("weather")
    with pytest.raises(ValueError, match="exists already"):
        services.add("semantic", marker)
    with pytest.raises(ValueError, match="exists already"):
        services.add("weather", marker)
    assert services.get("nothing") is None and not services.known("nothing")


def test_the_tool_list_says_which_tools_are_left_out_and_why(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _open(home).close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOTELOOM_")}
    done = subprocess.run([sys.executable, "-m", "noteloom", "tools", "list", "--home", str(home)],
                          capture_output=True, text=True, env=env, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "semantic_search_notes" not in done.stdout
    assert "note: tool 'semantic_search_notes' is left out: it requires 'semantic', and 'semantic' is off" in done.stderr
