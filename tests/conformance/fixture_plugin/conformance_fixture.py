"""The fixture plugin of the MCP conformance test: what the official suite's server
scenarios (``@modelcontextprotocol/conformance``) call, registered through noteloom's own
plugin hooks, so the suite exercises our server's plumbing (content blocks, log and
progress notifications, elicitation, sampling, resources, prompts, completion) rather
than a stand-in.

Names, arguments and results are the ones the suite's scenarios ask for (read from its
bundled code). The plugin is loaded only by the server tests/test_conformance.py starts:
this directory holds a ``.dist-info`` naming it under the ``noteloom`` entry-point group,
and only that server has the directory on its ``PYTHONPATH``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from noteloom.messages import DocumentPart, ImagePart
from noteloom.plugins import (
    McpPrompt,
    McpResource,
    McpResourceTemplate,
    PromptArgument,
    ToolContext,
    ToolDef,
    ToolError,
    ToolResult,
    hookimpl,
    image_message,
    resource_message,
    text_message,
)

if TYPE_CHECKING:
    from noteloom.tools import ClientChannel

#: A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
PNG_B64 = base64.b64encode(PNG).decode("ascii")


def _wav(samples: int = 800, rate: int = 8000) -> bytes:
    """A tenth of a second of silence: mono, 16-bit PCM."""
    data = b"\x00\x00" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
            + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data)


WAV_B64 = base64.b64encode(_wav()).decode("ascii")
STEP = 0.05  # the ~50 ms the logging and progress scenarios ask between messages

NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
Handler = Callable[[ToolContext, dict[str, Any]], Any]


def _tool(name: str, description: str, handler: Handler, schema: dict[str, Any] | None = None) -> ToolDef:
    return ToolDef(name, description, schema or NO_ARGS, handler, effect="read")


def _string_args(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": list(names)}


def _client(ctx: ToolContext) -> ClientChannel:
    """The MCP client this call serves; outside MCP (the chat, a recipe) there is none."""
    if ctx.client is None:
        raise ToolError("this tool talks to the MCP client that called it, and there is none")
    return ctx.client


# -- tools ----------------------------------------------------------------------------------


async def simple_text(ctx: ToolContext, args: dict[str, Any]) -> str:
    return "This is a simple text response for testing."


async def image_content(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    return ToolResult("A 1x1 red PNG.", blocks=(ImagePart("image/png", PNG_B64),))


async def audio_content(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    return ToolResult("A tenth of a second of silence.", blocks=(DocumentPart("audio/wav", WAV_B64, title="silence.wav"),))


async def embedded_resource(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    text = base64.b64encode(b"This is an embedded resource content.").decode("ascii")
    return ToolResult("An embedded resource.", blocks=(DocumentPart("text/plain", text, title="embedded-resource"),))


async def multiple_content_types(ctx: ToolContext, args: dict[str, Any]) -> ToolResult:
    data = base64.b64encode(json.dumps({"test": "data", "value": 123}).encode()).decode("ascii")
    return ToolResult("Multiple content types test:", blocks=(
        ImagePart("image/png", PNG_B64),
        DocumentPart("application/json", data, title="mixed-content-resource"),
    ))


async def with_logging(ctx: ToolContext, args: dict[str, Any]) -> str:
    client = _client(ctx)
    await client.log("info", "Tool execution started")
    await asyncio.sleep(STEP)
    await client.log("info", "Tool processing data")
    await asyncio.sleep(STEP)
    await client.log("info", "Tool execution completed")
    return "Tool with logging executed successfully"


async def error_handling(ctx: ToolContext, args: dict[str, Any]) -> str:
    raise ToolError("This tool intentionally returns an error for testing")


async def with_progress(ctx: ToolContext, args: dict[str, Any]) -> str:
    client = _client(ctx)
    for done in (0, 50, 100):
        await client.progress(done, 100)
        if done < 100:
            await asyncio.sleep(STEP)
    return "Tool with progress executed successfully"


async def sampling(ctx: ToolContext, args: dict[str, Any]) -> str:
    answer = await _client(ctx).sample({
        "messages": [{"role": "user", "content": {"type": "text", "text": args["prompt"]}}],
        "maxTokens": 100,
    })
    content = answer.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return f"LLM response: {text if isinstance(text, str) else json.dumps(content)}"


async def _elicited(ctx: ToolContext, message: str, schema: dict[str, Any], lead: str) -> str:
    answer = await _client(ctx).elicit(message, schema)
    return f"{lead}: action={answer.get('action')}, content={json.dumps(answer.get('content', {}))}"


async def elicitation(ctx: ToolContext, args: dict[str, Any]) -> str:
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return await _elicited(ctx, args["message"], schema, "User response")


async def elicitation_defaults(ctx: ToolContext, args: dict[str, Any]) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                       "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
    }
    return await _elicited(ctx, "Please review and update the form fields with defaults", schema,
                           "Elicitation completed")


async def elicitation_enums(ctx: ToolContext, args: dict[str, Any]) -> str:
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]}},
        },
    }
    return await _elicited(ctx, "Please select options from the enum fields", schema, "Elicitation completed")


async def json_schema_2020_12(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"received": args}


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@hookimpl
def register_tools(register: Callable[[ToolDef], None]) -> None:
    register(_tool("test_simple_text", "Returns a simple text response", simple_text))
    register(_tool("test_image_content", "Returns a 1x1 red PNG", image_content))
    register(_tool("test_audio_content", "Returns a short WAV", audio_content))
    register(_tool("test_embedded_resource", "Returns an embedded resource", embedded_resource))
    register(_tool("test_multiple_content_types", "Returns text, an image and a resource", multiple_content_types))
    register(_tool("test_tool_with_logging", "Sends three log messages while it runs", with_logging))
    register(_tool("test_error_handling", "Always fails", error_handling))
    register(_tool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100", with_progress))
    register(_tool("test_sampling", "Asks the client's model", sampling, _string_args("prompt")))
    register(_tool("test_elicitation", "Asks the user for a name and an address", elicitation,
                   _string_args("message")))
    register(_tool("test_elicitation_sep1034_defaults", "Asks the user with defaults for every primitive type",
                   elicitation_defaults))
    register(_tool("test_elicitation_sep1330_enums", "Asks the user with every kind of enum", elicitation_enums))
    register(_tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", json_schema_2020_12,
                   JSON_SCHEMA_2020_12))


# -- resources ------------------------------------------------------------------------------


def _template_data(variables: Mapping[str, str]) -> str:
    return json.dumps({"id": variables["id"], "templateTest": True, "data": f"Data for ID: {variables['id']}"})


@hookimpl
def register_mcp_resources(register: Callable[[McpResource | McpResourceTemplate], None]) -> None:
    register(McpResource("test://static-text", "Static Text Resource",
                         lambda: "This is the content of the static text resource.",
                         description="A static text resource for testing"))
    register(McpResource("test://static-binary", "Static Binary Resource", lambda: PNG, mime_type="image/png",
                         description="A static binary resource (a 1x1 PNG) for testing"))
    register(McpResource("test://watched-resource", "Watched Resource", lambda: "Watched resource content",
                         description="A resource to subscribe to"))
    register(McpResourceTemplate("test://template/{id}/data", "Resource Template", _template_data,
                                 mime_type="application/json",
                                 description="A resource template with an id parameter"))


# -- prompts --------------------------------------------------------------------------------


async def simple_prompt(ctx: ToolContext, arguments: dict[str, str]) -> Sequence[Mapping[str, Any]]:
    return [text_message("This is a simple prompt for testing.")]


async def prompt_with_arguments(ctx: ToolContext, arguments: dict[str, str]) -> Sequence[Mapping[str, Any]]:
    return [text_message(f"Prompt with arguments: arg1='{arguments['arg1']}', arg2='{arguments['arg2']}'")]


async def prompt_with_resource(ctx: ToolContext, arguments: dict[str, str]) -> Sequence[Mapping[str, Any]]:
    return [
        resource_message(arguments["resourceUri"], "Embedded resource content for testing.", mime_type="text/plain"),
        text_message("Please process the embedded resource above."),
    ]


async def prompt_with_image(ctx: ToolContext, arguments: dict[str, str]) -> Sequence[Mapping[str, Any]]:
    return [image_message(PNG, "image/png"), text_message("Please analyze the image above.")]


async def complete_arg1(ctx: ToolContext, value: str, context: Mapping[str, str]) -> Sequence[str]:
    return ["paris", "park", "party", "test", "testing"]


@hookimpl
def register_mcp_prompts(register: Callable[[McpPrompt], None]) -> None:
    register(McpPrompt("test_simple_prompt", "A simple prompt without arguments", simple_prompt))
    register(McpPrompt("test_prompt_with_arguments", "A prompt with arguments", prompt_with_arguments, arguments=[
        PromptArgument("arg1", "First test argument", required=True, complete=complete_arg1),
        PromptArgument("arg2", "Second test argument", required=True),
    ]))
    register(McpPrompt("test_prompt_with_embedded_resource", "A prompt with an embedded resource",
                       prompt_with_resource,
                       arguments=[PromptArgument("resourceUri", "URI of the resource to embed", required=True)]))
    register(McpPrompt("test_prompt_with_image", "A prompt with an image", prompt_with_image))
