"""Images and PDFs on the wire: what the OpenAI-compatible and Anthropic adapters send to a
real HTTP server on 127.0.0.1 for files in a user message and files a tool result hands
over; a file part whose bytes were never read again stops before the wire; the scripted
model keeps what it was sent; the budget's estimate counts a PDF by its pages."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import anyio
import pytest
from fpdf import FPDF

from llm_support import Exchange, LoopbackServer, no_network, tool  # noqa: F401
from noteloom.agent import run
from noteloom.agent.framing import UNTRUSTED_FILES
from noteloom.app import App
from noteloom.messages import (
    DocumentPart,
    ImagePart,
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from noteloom.providers import ModelRequest, Provider
from noteloom.providers.anthropic import AnthropicProvider
from noteloom.providers.base import (
    IMAGE_TOKENS,
    PDF_BYTES_PER_PAGE,
    PDF_MAX_PAGES,
    PDF_PAGE_TOKENS,
    estimate_input_tokens,
    pdf_pages,
)
from noteloom.providers.openai_compat import OpenAICompatProvider
from noteloom.providers.scripted import ScriptedProvider
from noteloom.tools import ToolContext, ToolResult

pytestmark = pytest.mark.anyio


def make_pdf(pages: int) -> bytes:
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for n in range(pages):
        pdf.add_page()
        pdf.cell(text=f"Page {n + 1}: the quarterly figures.")
    return bytes(pdf.output())


PDF = base64.b64encode(make_pdf(2)).decode()
# Any bytes do: the adapters pass them through, and the server here is ours.
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(64))).decode()
IMAGE = ImagePart("image/png", PNG, ref="att-img")
DOCUMENT = DocumentPart("application/pdf", PDF, title="report.pdf", ref="att-pdf")

USER_FILES = (
    Message("user", (TextPart("What do these say?"), IMAGE, DOCUMENT)),
)
TOOL_FILES = (
    Message.user("Open the report."),
    Message("assistant", (
        TextPart("Opening it."),
        ToolCallPart("call_1", "view_attachment", {"ref": "att-pdf"}),
        ToolCallPart("call_2", "add", {"a": 2, "b": 3}),
    )),
    Message("tool", (
        ToolResultPart("call_1", f"report.pdf, 2 pages.\n\n{UNTRUSTED_FILES}", blocks=(DOCUMENT, IMAGE)),
        ToolResultPart("call_2", '{"sum": 5}'),
    )),
)


def _oa(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _an(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


OPENAI_ANSWER = _oa({"role": "assistant", "content": "Seen."}) + _oa({}, "stop") + b"data: [DONE]\n\n"
ANTHROPIC_ANSWER = (
    _an("message_start", {"message": {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [],
                                      "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 1}}})
    + _an("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    + _an("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Seen."}})
    + _an("content_block_stop", {"index": 0})
    + _an("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}})
    + _an("message_stop", {})
)


async def sent(kind: str, messages: tuple[Message, ...]) -> tuple[dict[str, Any], str]:
    """The JSON body the SDK sent to a loopback server for ``messages``, and the answer's text."""
    answer = OPENAI_ANSWER if kind == "openai" else ANTHROPIC_ANSWER

    async def behaviour(ex: Exchange) -> None:
        await ex.start_stream()
        await ex.send(answer)
        await ex.end()

    with anyio.fail_after(20):
        async with LoopbackServer(behaviour) as server:
            provider: Provider
            if kind == "openai":
                provider = OpenAICompatProvider("local", base_url=f"{server.url}/v1", max_retries=0)
            else:
                provider = AnthropicProvider("claude", base_url=server.url, api_key="k", max_retries=0)
            text = ""
            try:
                async for event in provider.stream(ModelRequest("m", messages)):
                    text += getattr(event, "text", "") if type(event).__name__ == "TextDelta" else ""
            finally:
                await provider.aclose()
    assert len(server.exchanges) == 1
    return json.loads(server.exchanges[0].body), text


PDF_URL = f"data:application/pdf;base64,{PDF}"
PNG_URL = f"data:image/png;base64,{PNG}"
OA_FILE = {"type": "file", "file": {"filename": "report.pdf", "file_data": PDF_URL}}
OA_IMAGE = {"type": "image_url", "image_url": {"url": PNG_URL}}
AN_DOCUMENT = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
               "title": "report.pdf"}
AN_IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


async def test_openai_compatible_user_files_are_image_url_and_file_parts() -> None:
    body, text = await sent("openai", USER_FILES)
    assert text == "Seen."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What do these say?"}, OA_IMAGE, OA_FILE]},
    ]


async def test_openai_compatible_tool_files_follow_the_tool_messages_in_a_user_message() -> None:
    body, _ = await sent("openai", (*TOOL_FILES, Message.user("And now?")))
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    first, second = body["messages"][2], body["messages"][3]
    # The tool messages carry the text only (the API takes no files there).
    assert first == {"role": "tool", "tool_call_id": "call_1", "content": f"report.pdf, 2 pages.\n\n{UNTRUSTED_FILES}"}
    assert second == {"role": "tool", "tool_call_id": "call_2", "content": '{"sum": 5}'}
    assert body["messages"][4] == {"role": "user", "content": [
        {"type": "text", "text": "The files returned by tool call call_1 (view_attachment):"}, OA_FILE, OA_IMAGE,
    ]}
    assert body["messages"][5] == {"role": "user", "content": "And now?"}


async def test_openai_compatible_files_wait_for_the_last_of_consecutive_tool_messages() -> None:
    split = (
        *TOOL_FILES[:2],
        Message("tool", (TOOL_FILES[2].parts[0],)),
        Message("tool", (TOOL_FILES[2].parts[1],)),
    )
    body, _ = await sent("openai", split)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "tool", "user"]
    assert body["messages"][-1]["content"][1:] == [OA_FILE, OA_IMAGE]


async def test_anthropic_user_files_are_image_and_document_blocks() -> None:
    body, text = await sent("anthropic", USER_FILES)
    assert text == "Seen."
    [message] = body["messages"]
    assert message["role"] == "user"
    text_block, image, document = message["content"]
    assert text_block == {"type": "text", "text": "What do these say?"}
    assert image == AN_IMAGE
    # The newest block carries the cache breakpoint.
    assert document == {**AN_DOCUMENT, "cache_control": {"type": "ephemeral"}}


async def test_anthropic_tool_files_travel_inside_the_tool_result() -> None:
    body, _ = await sent("anthropic", TOOL_FILES)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    first, second = body["messages"][2]["content"]
    assert first == {
        "type": "tool_result", "tool_use_id": "call_1", "is_error": False,
        "content": [{"type": "text", "text": f"report.pdf, 2 pages.\n\n{UNTRUSTED_FILES}"}, AN_DOCUMENT, AN_IMAGE],
    }
    assert second["type"] == "tool_result" and second["content"] == '{"sum": 5}'


def test_the_anthropic_blocks_match_the_installed_sdks_types() -> None:
    """The shapes above, as the anthropic SDK declares them (a document may sit in a
    tool_result's content list and has a title)."""
    from typing import get_args, get_type_hints

    from anthropic.types import tool_result_block_param as trb
    from anthropic.types.base64_pdf_source_param import Base64PDFSourceParam
    from anthropic.types.document_block_param import DocumentBlockParam

    content_kinds = {get_type_hints(t)["type"].__args__[0] for t in get_args(trb.Content)}
    assert {"text", "image", "document"} <= content_kinds
    assert {"source", "type", "title"} <= set(DocumentBlockParam.__annotations__)
    assert set(AN_DOCUMENT["source"]) == set(Base64PDFSourceParam.__annotations__)


def test_the_openai_parts_match_the_installed_sdks_types() -> None:
    from openai.types.chat.chat_completion_content_part_param import File, FileFile

    assert set(OA_FILE) <= set(File.__annotations__)
    assert set(OA_FILE["file"]) <= set(FileFile.__annotations__)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("where", ["user", "tool"])
async def test_a_file_part_without_its_bytes_never_reaches_the_wire(kind: str, where: str) -> None:
    stored = DocumentPart("application/pdf", "", title="report.pdf", ref="att-pdf")
    if where == "user":
        messages: tuple[Message, ...] = (Message("user", (TextPart("Read it."), stored)),)
    else:
        messages = (*TOOL_FILES[:2], Message("tool", (ToolResultPart("call_1", "report.pdf", blocks=(stored,)),
                                                      ToolResultPart("call_2", "5"))))
    seen: list[Exchange] = []

    async def behaviour(ex: Exchange) -> None:
        seen.append(ex)
        await ex.respond(500, b"{}")

    with anyio.fail_after(20):
        async with LoopbackServer(behaviour) as server:
            provider: Provider = (
                OpenAICompatProvider("local", base_url=f"{server.url}/v1", max_retries=0) if kind == "openai"
                else AnthropicProvider("claude", base_url=server.url, api_key="k", max_retries=0)
            )
            with pytest.raises(ValueError, match=r"document part \(ref 'att-pdf'\) reached the provider without its "
                                                 r"bytes: read the attachment again by its ref"):
                async for _ in provider.stream(ModelRequest("m", messages)):
                    pass
            await provider.aclose()
    assert seen == []


async def test_the_scripted_model_keeps_the_files_a_tool_handed_over(app: App) -> None:
    async def view(ctx: ToolContext, args: dict[str, Any]) -> Any:
        return ToolResult({"name": "report.pdf", "pages": 2}, blocks=(DOCUMENT, IMAGE))

    provider = ScriptedProvider(steps=[
        {"tool_calls": [{"name": "view_attachment", "arguments": {"ref": "att-pdf"}}]},
        {"text": "The report shows the quarterly figures."},
    ])
    result = await run(provider, "script", "You help.", [Message("user", (TextPart("Look"), IMAGE))],
                       [tool("view_attachment", view)], app.tool_context())
    assert result.text == "The report shows the quarterly figures."
    first, second = provider.requests
    assert first.messages[0].parts[1] == IMAGE
    [answer] = second.messages[-1].tool_results
    assert answer.blocks == (DOCUMENT, IMAGE)
    assert answer.content.endswith(UNTRUSTED_FILES) and "UNTRUSTED" in answer.content.split("\n")[0]


def test_the_estimate_counts_an_image_once_and_a_pdf_by_its_pages() -> None:
    text_only = estimate_input_tokens(ModelRequest("m", (Message.user("hi"),)))
    with_image = estimate_input_tokens(ModelRequest("m", (Message("user", (TextPart("hi"), IMAGE)),)))
    assert with_image - text_only == IMAGE_TOKENS
    five = base64.b64encode(make_pdf(5)).decode()
    assert pdf_pages(five) == 5
    with_pdf = estimate_input_tokens(ModelRequest("m", (Message("user", (TextPart("hi"), DocumentPart(
        "application/pdf", five))),)))
    assert with_pdf - text_only == 5 * PDF_PAGE_TOKENS
    # In a tool result as in a user message.
    in_tool = ModelRequest("m", (Message("tool", (ToolResultPart("c", "", blocks=(DocumentPart(
        "application/pdf", five), IMAGE)),)),))
    assert estimate_input_tokens(in_tool) >= 5 * PDF_PAGE_TOKENS + IMAGE_TOKENS


def test_a_pdf_whose_pages_cannot_be_counted_is_estimated_from_its_size() -> None:
    # Page objects packed in compressed object streams: nothing to count.
    packed = b"%PDF-1.7\n" + random.Random(15).randbytes(10 * PDF_BYTES_PER_PAGE - 9)
    assert pdf_pages(base64.b64encode(packed).decode()) == 10
    huge = b"%PDF-1.7\n" + bytes(200 * PDF_BYTES_PER_PAGE)
    assert pdf_pages(base64.b64encode(huge).decode()) == PDF_MAX_PAGES
    assert pdf_pages("") == 1 and pdf_pages("not base64!") == 1
