"""The shared embedding service: one embedder per machine, used by every server process through it."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest

from livesrv import noteloom_serve
from noteloom.errors import EmbeddingError
from noteloom.plugins import hookimpl
from noteloom.semantic import SemanticIndex, open_index
from noteloom.semantic.embed_service import (
    EmbedderSource,
    RemoteEmbedder,
    ServiceEndpoint,
    ServiceProcess,
)
from plugin_site import install_plugin

TESTS = Path(__file__).resolve().parent


class FakeEmbedder:
    """Deterministic vectors from a hash of the text; each call is written to ``$FAKE_EMBED_LOG``
    (``pid kind``), so a test can tell which process embedded."""

    #: Its window: the index cuts chunks to this many "tokens" (words here).
    max_tokens = 64

    def __init__(self, dims: int = 8) -> None:
        self.dims = dims
        self._log("built")

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    @property
    def name(self) -> str:
        return f"fake:{self.dims}"

    @property
    def dimensions(self) -> int:
        return self.dims

    def _vector(self, text: str) -> list[float]:
        """Words hashed into buckets: texts that share words point the same way."""
        v = [0.0] * self.dims
        for word in text.lower().split():
            v[hashlib.sha256(word.strip(".,?!#").encode()).digest()[0] % self.dims] += 1.0
        norm = sum(x * x for x in v) ** 0.5 or 1.0
        return [x / norm for x in v]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self._log("documents")
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self._log("query")
        return self._vector(text)

    @staticmethod
    def _log(kind: str) -> None:
        path = os.environ.get("FAKE_EMBED_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()} {kind}\n")


def fake_embedder(config: Mapping[str, Any], env: Mapping[str, str]) -> FakeEmbedder:
    return FakeEmbedder(int(config.get("dimensions", 8)))


@hookimpl
def register_embedders(register: Callable[[str, Any], None]) -> None:
    """This module is also a plugin (installed for ``noteloom serve`` through an entry point)."""
    register("fake", fake_embedder)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceProcess]:
    svc = ServiceProcess(
        EmbedderSource("test_embed_service:FakeEmbedder", {"dims": 8}), "fake:8", tmp_path, max_tokens=64
    )
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()


def as_float32(vectors: list[list[float]]) -> list[list[float]]:
    return [array("f", v).tolist() for v in vectors]


def test_two_clients_get_the_embedders_own_vectors(service: ServiceProcess) -> None:
    direct = FakeEmbedder(8)
    texts = [f"note number {i} about {'cats' if i % 2 else 'dogs'}" for i in range(50)]
    results: dict[int, Any] = {}

    def use(n: int) -> None:
        client = RemoteEmbedder(service.endpoint)
        try:
            results[n] = (client.name, client.dimensions, client.embed_documents(texts), client.embed_query("cats?"))
        finally:
            client.close()

    threads = [threading.Thread(target=use, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = ("fake:8", 8, as_float32(direct.embed_documents(texts)), as_float32([direct.embed_query("cats?")])[0])
    assert results == {0: expected, 1: expected}


def test_one_client_is_safe_to_share_between_threads(service: ServiceProcess) -> None:
    client = RemoteEmbedder(service.endpoint)
    direct = FakeEmbedder(8)
    failures: list[str] = []

    def use(n: int) -> None:
        for i in range(20):
            text = f"thread {n} text {i}"
            if client.embed_query(text) != as_float32([direct.embed_query(text)])[0]:
                failures.append(text)

    threads = [threading.Thread(target=use, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    client.close()
    assert failures == []
    assert client.embed_documents([]) == []


def test_the_socket_is_the_owners_alone(service: ServiceProcess, tmp_path: Path) -> None:
    address = Path(service.endpoint.address)
    assert stat.S_ISSOCK(address.lstat().st_mode)
    assert stat.S_IMODE(address.lstat().st_mode) == 0o600
    assert stat.S_IMODE(address.parent.lstat().st_mode) == 0o700
    assert address.parent == tmp_path / "run"


def test_a_client_without_the_key_is_refused(service: ServiceProcess) -> None:
    wrong = ServiceEndpoint(service.endpoint.address, b"x" * 32, service.endpoint.name)
    with pytest.raises(EmbeddingError, match="refused this process's key"):
        RemoteEmbedder(wrong).embed_query("hello")


def test_a_stopped_service_gives_a_clear_error_and_a_restarted_one_serves_again(service: ServiceProcess) -> None:
    client = RemoteEmbedder(service.endpoint, connect_timeout=0.2)
    before = client.embed_query("hello")
    assert service.process is not None
    first_pid = client.ping()["pid"]
    service.process.kill()
    service.process.join()
    with pytest.raises(EmbeddingError, match=r"embedding service .* (is not running|went away)"):
        client.embed_query("hello")
    assert service.ensure_running()
    assert client.embed_query("hello") == before
    assert client.ping()["pid"] != first_pid
    assert not service.ensure_running()  # alive: nothing to do
    client.close()


def test_a_service_whose_embedder_fails_says_why(tmp_path: Path) -> None:
    svc = ServiceProcess(EmbedderSource("test_embed_service:no_such_thing"), "fake:8", tmp_path)
    svc.start()
    try:
        with pytest.raises(EmbeddingError, match="no_such_thing"):
            RemoteEmbedder(svc.endpoint).embed_query("hello")
    finally:
        svc.stop()
    assert not Path(svc.endpoint.address).exists()


def test_a_long_home_gets_a_private_folder_for_the_socket(tmp_path: Path) -> None:
    home = tmp_path / ("deep" * 30)
    svc = ServiceProcess(EmbedderSource("test_embed_service:FakeEmbedder"), "fake:8", home)
    svc.start()
    folder = Path(svc.endpoint.address).parent
    try:
        assert stat.S_IMODE(folder.lstat().st_mode) == 0o700
        assert RemoteEmbedder(svc.endpoint).dimensions == 8
    finally:
        svc.stop()
    assert not folder.exists()


def test_an_index_opened_with_a_service_endpoint_embeds_through_it(
    service: ServiceProcess, tmp_path: Path
) -> None:
    from noteloom.app import open_app
    from noteloom.config import load_settings

    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "ws")}), load_entry_points=False)
    try:
        built: list[str] = []

        def factory(config: Mapping[str, Any], env: Mapping[str, str]) -> FakeEmbedder:
            built.append("local")
            return FakeEmbedder(8)

        index = open_index(app.engine, {"type": "fake"}, {"fake": factory}, {}, endpoint=service.endpoint)
        assert isinstance(index, SemanticIndex)
        assert isinstance(index.embedder, RemoteEmbedder)
        assert built == []  # the model lives in the service only
        # Chunks are cut to the model's window as they are by the embedder itself.
        assert index.spec.key == SemanticIndex(app.engine, FakeEmbedder(8)).spec.key
        assert index.spec.max_tokens == 64
        assert index.embedder.count_tokens(["a b c", "d"]) == [3, 1]  # type: ignore[attr-defined]
        app.workspace.create_note(title="Cats", body="whiskers and purring")
        index.sync()
        assert index.status().indexed_notes == 1
        assert [h.title for h in index.search("cats", relevance="loose").hits] == ["Cats"]
    finally:
        app.close()


# -- noteloom serve --workers 2 -------------------------------------------------------------------


def _install_plugin(site: Path) -> None:
    """Install this module as a noteloom plugin (an entry point), for the server's processes."""
    install_plugin(site, "test_embed_service", entry="fake", dist="fake-embedder-plugin", version="0")


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry.parent.name))
    return out


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def _wait(check: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.slow
def test_serve_with_two_workers_loads_the_embedder_once(tmp_path: Path) -> None:
    home, site, log = tmp_path / "home", tmp_path / "site", tmp_path / "embed.log"
    home.mkdir()
    (home / "noteloom.toml").write_text('[embeddings]\ntype = "fake"\ndimensions = 8\n')
    _install_plugin(site)
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")]),
        "FAKE_EMBED_LOG": str(log),
    }
    with noteloom_serve(home, "--workers", "2", log=tmp_path / "serve.log", env=env) as srv:
        auth = srv.server.auth

        def status() -> dict[str, Any]:
            try:
                r = httpx2.get(f"{srv.server.url}/api/v1/index/status", headers=auth, timeout=30)
            except httpx2.TransportError:  # the workers are still starting
                return {}
            return dict(r.json()) if r.status_code == 200 else {}

        _wait(lambda: status().get("state") == "idle", "the index did not come up")
        for i in range(6):
            r = httpx2.post(f"{srv.server.url}/api/v1/notes", headers=auth, timeout=30,
                            json={"title": f"note {i}", "body": f"about subject {i}"})
            assert r.status_code == 201, r.text
        _wait(lambda: status().get("indexed_notes") == 6 and status().get("state") == "idle",
              "the notes were not indexed")
        # Fresh connections reach both workers; each one searches by meaning.
        for _ in range(8):
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "semantic_search_notes", "arguments": {"query": "subject 3", "relevance": "loose"}}}
            r = httpx2.post(f"{srv.server.url}/mcp", json=call, timeout=30,
                            headers={**auth, "Accept": "application/json, text/event-stream"})
            assert r.status_code == 200 and "isError" not in json.dumps(r.json()).replace('"isError": false', ""), r.text
        children = _children(srv.pid)
        built = {line.split()[0] for line in log.read_text().splitlines() if line.endswith(" built")}
        used = {line.split()[0] for line in log.read_text().splitlines() if not line.endswith(" built")}
        # The supervisor builds its own embedder object to learn the model's name (it loads nothing).
        services = built - {str(srv.pid)}
        assert len(services) == 1, (built, children)
        (service_pid,) = services
        assert int(service_pid) in children
        assert used == {service_pid}  # every vector, the indexer's and the searches', came from it
        workers = [p for p in children if str(p) != service_pid and "spawn_main" in Path(f"/proc/{p}/cmdline").read_text()]
        assert len(workers) == 2
        assert not any("libtorch" in _maps(p) for p in workers)
    _wait(lambda: not any(Path(f"/proc/{p}").exists() for p in [*workers, int(service_pid)]),
          "a server process outlived the supervisor", timeout=60)
    assert not list((home / "run").glob("*.sock"))


@pytest.mark.slow
def test_the_service_dies_with_a_supervisor_killed_outright(tmp_path: Path) -> None:
    home, site = tmp_path / "home", tmp_path / "site"
    home.mkdir()
    (home / "noteloom.toml").write_text('[embeddings]\ntype = "fake"\n')
    _install_plugin(site)
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    with noteloom_serve(home, "--workers", "2", log=tmp_path / "serve.log", env=env) as srv:
        _wait(lambda: len(_children(srv.pid)) >= 3, "the service and the workers did not start")
        children = _children(srv.pid)
        os.kill(srv.pid, signal.SIGKILL)
        _wait(lambda: not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in children),
              "a child outlived its supervisor", timeout=60)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_the_module_runs_without_the_model_libraries() -> None:
    """A worker that embeds through the service imports neither torch nor sentence-transformers."""
    code = (
        "import sys, noteloom.semantic.embed_service, noteloom.web.workers, noteloom.semantic.wiring;"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "torch" not in out and "sentence_transformers" not in out
