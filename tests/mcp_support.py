"""An in-process MCP client for tests: requests to one ``McpServer`` as a person, with the
settings a token's scopes narrowed (``pre``) or those read now, and the answer's result or
error."""

from __future__ import annotations

from typing import Any

import anyio

from noteloom.mcp import McpServer, Preflight
from noteloom.mcp.session import McpSession
from noteloom.workspace import User


class InProcess:
    """Requests to ``server``; on ``session`` when one is given (subclasses make one)."""

    session: McpSession | None = None

    def __init__(self, server: McpServer, user: User | None = None, pre: Preflight | None = None) -> None:
        self.server, self.user, self.pre = server, user, pre

    async def call(self, method: str, params: dict[str, Any] | None = None, *, stateless: bool = False) -> dict[str, Any]:
        """The whole answer (``result`` or ``error``)."""
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
        pre = self.pre if self.pre is not None else await anyio.to_thread.run_sync(self.server.preflight)
        reply = await self.server.handle(message, self.user, preflight=pre,
                                         session=None if stateless else self.session)
        body: dict[str, Any] = reply.body
        return body

    async def ok(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.call(method, params)
        assert "result" in body, body
        result: dict[str, Any] = body["result"]
        return result

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.call(method, params)
        assert "error" in body, body
        error: dict[str, Any] = body["error"]
        return error
