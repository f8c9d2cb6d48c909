"""MCP prompts: what a prompt is made of, for noteloom's own prompts and a plugin's alike.

A prompt is a named, parameterised message template an MCP client offers its user (Claude
Desktop and Claude Code as slash commands). A plugin adds one through the
``register_mcp_prompts`` hook::

    from noteloom.plugins import McpPrompt, PromptArgument, hookimpl, text_message

    async def greet(ctx, arguments):
        return [text_message(f"Say hello to {arguments['name']}.")]

    @hookimpl
    def register_mcp_prompts(register):
        register(McpPrompt("greet", "Greet someone by name.", greet,
                           arguments=[PromptArgument("name", "Who to greet", required=True)]))

``get`` receives the request's :class:`~noteloom.tools.ToolContext` (the asker and their
notebook scope, as tools get it) and the arguments as strings, and returns the messages:
wire-shaped ``PromptMessage`` objects, most easily made by :func:`text_message`,
:func:`resource_message` and :func:`image_message`. A :class:`~noteloom.tools.ToolError` it
raises reaches the client as a -32602 error with its message (a note that is not there, an
argument that makes no sense). This module imports nothing heavy: plugins load it at start-up.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from noteloom.tools import ToolContext

__all__ = [
    "Completer",
    "McpPrompt",
    "PromptArgument",
    "PromptGet",
    "image_message",
    "resource_message",
    "text_message",
]

Role = Literal["user", "assistant"]
#: ``get(ctx, arguments) -> messages``: the prompt's messages for these arguments.
PromptGet = Callable[["ToolContext", dict[str, str]], Awaitable[Sequence[Mapping[str, Any]]]]
#: ``complete(ctx, value, context_arguments) -> values``: what an argument could be, given
#: what the user has typed of it so far and the other arguments already chosen. At most 100
#: values are sent; noteloom puts those starting with ``value`` first.
Completer = Callable[["ToolContext", str, Mapping[str, str]], Awaitable[Sequence[str]]]


#: The ``_meta`` key MCP content carries when its text came from outside the user's notes
#: (a clipped page, someone else's message): clients may show it apart. Prompts set it here;
#: the MCP server (``noteloom.mcp``) sets it on tool results and resources.
UNTRUSTED_META_KEY = "noteloom/untrusted"


@dataclass(frozen=True)
class PromptArgument:
    """One argument of a prompt, always a string (MCP says so)."""

    name: str
    description: str = ""
    required: bool = False
    #: Suggests values for ``completion/complete`` (none: the client gets no suggestions).
    complete: Completer | None = None


@dataclass(frozen=True)
class McpPrompt:
    """A prompt as ``prompts/list`` lists it and ``prompts/get`` builds it."""

    name: str
    description: str
    get: PromptGet
    title: str | None = None
    arguments: Sequence[PromptArgument] = ()
    #: Tools the prompt reads through. It is listed (and served) only while each of them is
    #: enabled and within the asker's token, so a prompt never shows what its tools would not.
    uses_tools: Sequence[str] = ()

    def argument(self, name: str) -> PromptArgument | None:
        """The argument called ``name``, if the prompt has one."""
        return next((a for a in self.arguments if a.name == name), None)


def text_message(text: str, role: Role = "user") -> dict[str, Any]:
    """A message holding text."""
    return {"role": role, "content": {"type": "text", "text": text}}


def resource_message(
    uri: str,
    text: str | None = None,
    *,
    blob: bytes | None = None,
    mime_type: str = "text/markdown",
    role: Role = "user",
    meta: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A message embedding a resource (clients show it as an attachment): its ``text``, or
    its bytes as ``blob``. ``meta`` becomes the content block's ``_meta``."""
    if (text is None) == (blob is None):
        raise ValueError("a resource message holds either text or blob")
    resource: dict[str, Any] = {"uri": uri, "mimeType": mime_type}
    if text is not None:
        resource["text"] = text
    else:
        assert blob is not None
        resource["blob"] = base64.b64encode(blob).decode("ascii")
    content: dict[str, Any] = {"type": "resource", "resource": resource}
    if meta:
        content["_meta"] = dict(meta)
    return {"role": role, "content": content}


def image_message(data: bytes, mime_type: str, role: Role = "user") -> dict[str, Any]:
    """A message holding an image (its bytes; sent base64-encoded)."""
    return {"role": role, "content": {"type": "image", "data": base64.b64encode(data).decode("ascii"),
                                      "mimeType": mime_type}}
