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
from noteloom.mcp import MAX_MESSAGE_BYTES, McpServer, serve_stdio
from noteloom.plugins import hookimpl
from noteloom.tools import ToolDef


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


class Odd:
    """A tool whose answer carries a lone surrogate, and one with a bug."""

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        async def odd(ctx: Any, args: dict[str, Any]) -> Any:
            return {"text": "half \ud800 a pair"}

        async def bug(ctx: Any, args: dict[str, Any]) -> Any:
            raise RuntimeError("a bug")

        register(ToolDef(name="odd", description="odd", input_schema={"type": "object"}, handler=odd))
        register(ToolDef(name="bug", description="bug", input_schema={"type": "object"}, handler=bug))


@pytest.mark.anyio
async def test_no_line_ends_the_loop_each_bad_one_gets_its_error(tmp_path: Path) -> None:
    app = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path)}), plugins=[Odd()], load_entry_points=False)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stdin, feed = os.fdopen(in_r, "rb"), os.fdopen(in_w, "wb")
    stdout, answers = os.fdopen(out_w, "wb"), os.fdopen(out_r, "rb")
    huge = b'{"jsonrpc":"2.0","id":50,"method":"ping","params":{"pad":"' + b"x" * MAX_MESSAGE_BYTES + b'"}}'
    lines = [
        b"\xff\xfe\x00 not UTF-8",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search_notes","arguments":{"query":"\\ud800"}}}',
        huge,
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"note":"\\udfff"}}',
        b"\x00\x01\x02\x1b[31m binary",
        b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"odd","arguments":{}}}',
        b'[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"bug","arguments":{}}},'
        b'{"jsonrpc":"2.0","id":4,"method":"ping"}]',
        b'{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":99,"method":"ping"}',
    ]

    def write_all() -> None:  # from a thread: the huge line fills the pipe until the loop reads it
        for line in lines:
            feed.write(line + b"\n")
        feed.close()

    try:
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve_stdio, McpServer(app), app.workspace.ensure_owner(), stdin, stdout)
                await anyio.to_thread.run_sync(write_all)
            stdout.close()  # the loop returned at the end of input, every answer written
            out = await anyio.to_thread.run_sync(answers.read)
    finally:
        app.close()
        stdin.close()
        answers.close()
    got = [json.loads(line) for line in out.decode("utf-8").splitlines()]  # strict UTF-8: all encodable
    singles = [a for a in got if isinstance(a, dict)]
    by_id = {a["id"]: a for a in singles if a["id"] is not None}
    nulls = sorted(a["error"]["code"] for a in singles if a["id"] is None)
    assert nulls == [-32700, -32700, -32600, -32600]  # two unparseable, the huge line, the bad id
    assert by_id[1]["error"]["code"] == -32602 and "surrogate" in by_id[1]["error"]["message"]
    assert json.loads(by_id[2]["result"]["content"][0]["text"]) == {"text": "half \ufffd a pair"}
    assert by_id[5]["error"]["code"] == -32602 and "params.x" in by_id[5]["error"]["message"]
    assert by_id[99] == {"jsonrpc": "2.0", "id": 99, "result": {}}
    [batch] = [a for a in got if isinstance(a, list)]
    assert sorted((a["id"], "error" in a and a["error"]["code"]) for a in batch) == [(3, -32603), (4, False)]
    assert len(got) == 9  # the notification got nothing
