"""The stdio loop in-process: requests run side by side, and a cancelled one is stopped."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.mcp import McpServer, serve_stdio
from noteloom.plugins import hookimpl
from noteloom.tools import ToolDef


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Waiting:
    """A tool that runs until it is cancelled, and remembers that it was."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.cancelled = False

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        async def wait(ctx: Any, args: dict[str, Any]) -> Any:
            self.started.set()
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                self.cancelled = True
                raise

        register(ToolDef(name="wait", description="waits", input_schema={"type": "object"}, handler=wait))


@pytest.mark.anyio
async def test_a_slow_call_does_not_hold_up_a_ping_and_can_be_cancelled(tmp_path: Path) -> None:
    waiting = Waiting()
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path)}), plugins=[waiting], load_entry_points=False)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stdin, feed = os.fdopen(in_r, "rb"), os.fdopen(in_w, "wb", buffering=0)
    stdout, answers = os.fdopen(out_w, "wb"), anyio.wrap_file(os.fdopen(out_r, "rb"))

    def send(message: Any) -> None:
        feed.write(json.dumps(message).encode() + b"\n")

    try:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_stdio, McpServer(app), app.workspace.ensure_owner(), stdin, stdout)
                send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait", "arguments": {}}})
                await waiting.started.wait()
                send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
                assert json.loads(await answers.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
                send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
                send({"jsonrpc": "2.0", "id": 3, "method": "ping"})
                assert json.loads(await answers.readline())["id"] == 3
                feed.close()  # end of input: the loop returns once nothing runs any more
            assert waiting.cancelled
            stdout.close()
            assert await answers.read() == b""  # the cancelled call got no answer
    finally:
        app.close()
        stdin.close()
        await answers.aclose()
