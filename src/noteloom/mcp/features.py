"""What the MCP server offers beyond tools, each feature in its own module of this package.

Each feature module has ``install(server)``, which adds its methods
(:meth:`McpServer.add_method`) and declares its capability (:meth:`McpServer.declare`).
:func:`install_features` runs them all when a server is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from noteloom.mcp import McpServer


def install_features(server: McpServer) -> None:
    """Install every feature module's methods and capabilities on ``server``."""
    from noteloom.mcp import resources

    resources.install(server)
    from noteloom.mcp import completion, prompts

    prompts.install(server)
    completion.install(server)
    from noteloom.mcp import tasks

    tasks.install(server)
