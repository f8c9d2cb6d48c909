"""The app owns its background work: ``serve`` (one process or every worker) starts the
indexer and the turn runner once and stops them; ``noteloom mcp`` and one-shot commands
start none; scheduled work runs where it is claimed; nothing writes the environment."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import FastAPI

import noteloom
from noteloom.app import App, open_app
from noteloom.config import load_settings
from noteloom.plugins import hookimpl
from noteloom.semantic.embed_service import ServiceEndpoint
from noteloom.services import BackgroundService
from noteloom.web.app import create_web_app, served_app
from noteloom.web.workers import Supervisor, Worker

SRC = Path(noteloom.__file__).parent


class SignallingEmbedder:
    """Hashed-word vectors; ``embedded`` is set once it has embedded a note."""

    name = "signal:8"
    dimensions = 8

    def __init__(self) -> None:
        self.embedded = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.embedded.set()
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        v = [0.0] * self.dimensions
        for word in text.lower().split():
            v[hashlib.sha256(word.encode()).digest()[0] % self.dimensions] += 1.0
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        return [x / norm for x in v]


class EmbedderPlugin:
    def __init__(self) -> None:
        self.embedder = SignallingEmbedder()

    @hookimpl
    def register_embedders(self, register: Callable[[str, Any], None]) -> None:
        register("signal", lambda config, env: self.embedder)


def _home(tmp_path: Path, toml: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "noteloom.toml").write_text(toml, encoding="utf-8")
    return home


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    """An app with semantic search off (its indexer would load the local model)."""
    home = _home(tmp_path, "[embeddings]\nenabled = false\n")
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        yield app
    finally:
        app.close()


@pytest.fixture
def semantic_app(tmp_path: Path) -> Iterator[tuple[App, EmbedderPlugin]]:
    plugin = EmbedderPlugin()
    home = _home(tmp_path, '[embeddings]\ntype = "signal"\n')
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), plugins=[plugin], load_entry_points=False)
    try:
        yield app, plugin
    finally:
        app.close()


def _counted(app: App) -> dict[str, list[str]]:
    """Wrap each of the app's background services to record its starts and stops."""
    log: dict[str, list[str]] = {s.name: [] for s in app.background_services}

    def wrap(service: BackgroundService) -> BackgroundService:
        @asynccontextmanager
        async def start() -> AsyncIterator[Any]:
            log[service.name].append("start")
            async with service.start() as value:
                yield value
            log[service.name].append("stop")

        return BackgroundService(service.name, start, scheduled=service.scheduled)

    app.background_services = [wrap(s) for s in app.background_services]
    return log


def _fastapi(web: Any) -> FastAPI:
    while not isinstance(web, FastAPI):
        web = web.app
    return web


@asynccontextmanager
async def _lifespan(web: Any) -> AsyncIterator[None]:
    """The lifespan the server runs around serving ``web``."""
    api = _fastapi(web)
    async with api.router.lifespan_context(api):
        yield


@pytest.mark.anyio
async def test_serve_runs_the_indexer_and_the_turn_runner_once_and_stops_them(
    semantic_app: tuple[App, EmbedderPlugin],
) -> None:
    from chat_support import settle
    from noteloom.chat import ChatService

    app, plugin = semantic_app
    log = _counted(app)
    app.workspace.create_note("Cats", "whiskers and purring")
    owner = app.workspace.ensure_owner()
    web = create_web_app(app, background=True, claims_scheduled=True)  # as `noteloom serve` makes it
    async with _lifespan(web):
        assert app.running == ("indexer", "chat", "recipes", "scheduler")
        assert isinstance(app.services.chat, ChatService)
        with anyio.fail_after(60):
            # The indexer embeds the note the workspace holds ...
            assert await anyio.to_thread.run_sync(plugin.embedder.embedded.wait, 60)
            # ... and a turn sent to the chat runs to its end.
            sent = await app.services.chat.send(owner, "hello", controls={"model": "echo"})
            view = await settle(app.services.chat, owner, sent.message_id)
        assert view["status"] == "complete", view
    assert log == {"indexer": ["start", "stop"], "chat": ["start", "stop"], "recipes": ["start", "stop"],
                   "scheduler": ["start", "stop"]}
    assert app.running == ()
    assert app.services.chat is None
    assert app.services.scheduler is None


@pytest.mark.anyio
async def test_a_web_app_runs_no_background_service_unless_told(app: App) -> None:
    log = _counted(app)
    async with _lifespan(create_web_app(app)):
        assert app.running == ()
    async with _lifespan(create_web_app(app, background=["chat"])):
        assert app.running == ("chat",)
    # Semantic search is off: no indexer.
    assert log == {"chat": ["start", "stop"], "recipes": [], "scheduler": []}


@pytest.mark.anyio
async def test_scheduled_work_runs_only_in_the_process_that_claims_it(app: App) -> None:
    log = _counted(app)
    async with _lifespan(create_web_app(app, background=True)):
        assert app.running == ("chat", "recipes")
        assert app.services.scheduler is None
    assert log["scheduler"] == []
    async with _lifespan(create_web_app(app, background=True, claims_scheduled=True)):
        assert app.running == ("chat", "recipes", "scheduler")
        assert app.services.scheduler is not None
    assert log["scheduler"] == ["start", "stop"]
    assert Worker(0).claims_scheduled and not Worker(1).claims_scheduled


@pytest.mark.anyio
async def test_a_background_service_runs_once_in_an_app(app: App) -> None:
    async with app.background("chat"):
        with pytest.raises(RuntimeError, match="'chat' already running"):
            async with app.background():
                pass
        assert app.running == ("chat",)
    with pytest.raises(ValueError, match="no background service called 'indexer'"):
        async with app.background("indexer"):
            pass
    assert app.running == ()


class _Recorded:
    """Stands in for a spawned process: records what it would be started with."""

    def __init__(self, target: Any, args: tuple[Any, ...], daemon: bool) -> None:
        self.target, self.args = target, args

    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        return False


class _Spawn:
    def __init__(self) -> None:
        self.started: list[_Recorded] = []

    def Process(self, target: Any, args: tuple[Any, ...], daemon: bool) -> _Recorded:
        process = _Recorded(target, args, daemon)
        self.started.append(process)
        return process


class _Service:
    def __init__(self, endpoint: ServiceEndpoint) -> None:
        self.endpoint = endpoint


def test_each_worker_is_handed_its_settings_and_the_embedding_service_not_the_environment(tmp_path: Path) -> None:
    home = _home(tmp_path, "[embeddings]\nenabled = false\n")
    settings = load_settings(data_dir=home)
    endpoint = ServiceEndpoint("/nowhere.sock", b"k" * 32, "signal:8", 64)
    before = dict(os.environ)
    spawn = _Spawn()
    socks = [object(), object()]
    supervisor = Supervisor(socks, partial(served_app, settings), service=_Service(endpoint))  # type: ignore[arg-type]
    supervisor._ctx = spawn  # type: ignore[assignment]
    for slot in supervisor._slots:
        supervisor._start(slot)
    assert dict(os.environ) == before
    workers = [p.args[2] for p in spawn.started]
    assert workers == [Worker(0, endpoint), Worker(1, endpoint)]
    # What a worker gets crosses to it pickled, as spawn sends it.
    factory, worker = pickle.loads(pickle.dumps((spawn.started[1].args[1], workers[1])))

    # The worker process opens the workspace from what it was handed, with the environment
    # unwritable: nothing on the way writes it.
    class Unwritable(dict[str, str]):
        def _refuse(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the environment was written")

        __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _refuse  # type: ignore[assignment]

    async def serve_once(web: Any, app: App) -> tuple[str, ...]:
        async with _lifespan(web):
            return app.running

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "environ", Unwritable(before))
        web = factory(Worker(1))  # this test's process has no embedding service to reach
        app = _fastapi(web).state.noteloom
        log = _counted(app)
        running = anyio.run(serve_once, web, app)
    assert app.settings == settings
    assert running == ("chat", "recipes")  # the second worker claims no scheduled work
    assert log["scheduler"] == []
    assert worker == Worker(1, endpoint)


def test_a_worker_embeds_through_the_service_it_is_handed(tmp_path: Path) -> None:
    from noteloom.semantic.embed_service import RemoteEmbedder

    home = _home(tmp_path, '[embeddings]\ntype = "signal"\n')
    endpoint = ServiceEndpoint("/nowhere.sock", b"k" * 32, "signal:8", 64)
    plugin = EmbedderPlugin()
    app = open_app(load_settings(data_dir=home), plugins=[plugin], load_entry_points=False, embed_service=endpoint)
    try:
        assert app.services.semantic is not None
        assert isinstance(app.services.semantic.embedder, RemoteEmbedder)
    finally:
        app.close()


# -- nothing writes the environment --------------------------------------------------------

#: Library switches that their libraries read only from the environment, when they are first
#: imported: set (never overridden) just before the local model's libraries load, so that
#: they cannot reach the network. Nothing of noteloom's own travels through them.
ALLOWED = {("embedders.py", "setdefault", "HF_HUB_OFFLINE"), ("embedders.py", "setdefault", "TRANSFORMERS_OFFLINE")}
WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def _environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def environment_writes(path: Path) -> list[tuple[str, str, str]]:
    """``(file, how, key)`` for each write to ``os.environ`` (or ``putenv``) in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        key = ""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if _environ(node.func.value) and node.func.attr in WRITES:
                if node.args and isinstance(node.args[0], ast.Constant):
                    key = str(node.args[0].value)
                found.append((path.name, node.func.attr, key))
            elif isinstance(node.func.value, ast.Name) and node.func.value.id == "os" and node.func.attr in (
                "putenv", "unsetenv"
            ):
                found.append((path.name, node.func.attr, key))
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                inner = target.value if isinstance(target, ast.Subscript) else target
                if _environ(inner):
                    found.append((path.name, type(node).__name__, ""))
    return found


def test_no_code_writes_the_environment() -> None:
    writes = [w for path in sorted(SRC.rglob("*.py")) for w in environment_writes(path)]
    assert [w for w in writes if w not in ALLOWED] == []


def test_the_environment_check_sees_each_way_of_writing_it(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom os import environ\n"
        "os.environ['A'] = '1'\nos.environ.update({'B': '2'})\nos.environ.setdefault('C', '3')\n"
        "environ['D'] = '4'\ndel os.environ['E']\nos.environ |= {'F': '6'}\nos.putenv('G', '7')\n"
        "os.environ.pop('H')\nx = os.environ.get('I')\n",
        encoding="utf-8",
    )
    assert sorted(how for _, how, _ in environment_writes(sample)) == sorted([
        "Assign", "update", "setdefault", "Assign", "Delete", "AugAssign", "putenv", "pop",
    ])


# -- what each command starts ---------------------------------------------------------------

PROBE = """
import json, sys
import noteloom.app as a
record, original = sys.argv[1], a.App.background
def background(self, *names, **kwargs):
    with open(record, "a", encoding="utf-8") as f:
        f.write(json.dumps({"names": list(names), "claims_scheduled": kwargs.get("claims_scheduled", False)}) + "\\n")
    return original(self, *names, **kwargs)
a.App.background = background
from noteloom.cli import main
sys.argv = ["noteloom", *sys.argv[2:]]
main()
"""


def _run(home: Path, tmp_path: Path, args: list[str], stdin: str) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    record = tmp_path / f"background-{args[0]}.jsonl"
    env = {**os.environ, "NOTELOOM_HOME": str(home)}
    env.pop("NOTELOOM_DATABASE_URL", None)
    proc = subprocess.run([sys.executable, "-c", PROBE, str(record), *args], env=env, input=stdin,
                          capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path)
    entered = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return proc, entered


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("commands") / "home"
    subprocess.run([sys.executable, "-m", "noteloom", "init", "--home", str(home)], check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)
    return home


def test_mcp_over_stdio_starts_no_background_service(cli_home: Path, tmp_path: Path) -> None:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_notebooks", "arguments": {}}},
    ]
    proc, entered = _run(cli_home, tmp_path, ["mcp"], "".join(json.dumps(m) + "\n" for m in messages))
    assert proc.returncode == 0, proc.stderr
    replies = {r["id"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert replies[2]["result"]["isError"] is False  # a tool ran ...
    assert entered == []  # ... and no background service started


def test_a_one_shot_question_starts_no_background_service(cli_home: Path, tmp_path: Path) -> None:
    proc, entered = _run(cli_home, tmp_path, ["ask", "-m", "echo", "hello"], "")
    assert proc.returncode == 0, proc.stderr
    assert "hello" in proc.stdout
    assert entered == []


def test_a_terminal_chat_runs_the_chat_only(cli_home: Path, tmp_path: Path) -> None:
    proc, entered = _run(cli_home, tmp_path, ["chat", "-m", "echo"], "hello\n")
    assert proc.returncode == 0, proc.stderr
    assert "hello" in proc.stdout
    assert entered == [{"names": ["chat"], "claims_scheduled": False}]
