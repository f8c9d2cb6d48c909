"""A tool that hands over whole files: an MCP client receives them as ``ImageContent`` and an
embedded PDF (``EmbeddedResource`` with ``BlobResourceContents``) beside the result's text,
through the official client over real HTTP and on the wire in every protocol era."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as mt
import pytest
from fpdf import FPDF
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from livesrv import LiveServer, live_server
from noteloom.app import App, access_token, open_app
from noteloom.config import load_settings
from noteloom.mcp import ATTACHMENT_URI, TITLE_META_KEY, UNTRUSTED_META_KEY
from noteloom.messages import DocumentPart, ImagePart
from noteloom.plugins import hookimpl
from noteloom.tools import ToolDef, ToolResult
from noteloom.web.app import create_web_app


def _pdf() -> bytes:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text="Quarterly figures")
    return bytes(pdf.output())


PDF = _pdf()
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PAYLOAD = {"name": "report.pdf", "pages": 1, "note": "the files follow"}


class FilesPlugin:
    """A plugin tool returning a payload and two whole files."""

    @hookimpl
    def register_tools(self, register: Callable[[ToolDef], None]) -> None:
        async def show(ctx: Any, args: dict[str, Any]) -> Any:
            return ToolResult(PAYLOAD, blocks=(
                ImagePart("image/png", base64.b64encode(PNG).decode(), ref="img/1"),
                DocumentPart("application/pdf", base64.b64encode(PDF).decode(), title="report.pdf", ref="att-7"),
            ))

        register(ToolDef(name="show_files", description="Shows the files.",
                         input_schema={"type": "object", "properties": {}}, handler=show))


@pytest.fixture
def files_app(tmp_path: Path) -> Iterator[App]:
    a = open_app(load_settings({"NOTELOOM_HOME": str(tmp_path / "home")}), plugins=[FilesPlugin()],
                 load_entry_points=False)
    try:
        yield a
    finally:
        a.close()


@pytest.fixture
def live(files_app: App) -> Iterator[LiveServer]:
    with live_server(files_app) as srv:
        yield srv


@pytest.mark.anyio
async def test_the_official_client_receives_the_image_and_the_embedded_pdf(live: LiveServer) -> None:
    http = httpx2.AsyncClient(headers=live.auth, timeout=httpx2.Timeout(120))
    with anyio.fail_after(60):
        async with Client(streamable_http_client(live.mcp_url, http_client=http), mode="legacy") as client:  # type: ignore[arg-type]
            result = await client.call_tool("show_files", {})
    assert result.is_error is False
    text, image, embedded = result.content
    assert isinstance(text, mt.TextContent) and json.loads(text.text) == PAYLOAD
    assert isinstance(image, mt.ImageContent)
    assert image.mime_type == "image/png" and base64.b64decode(image.data) == PNG
    assert isinstance(embedded, mt.EmbeddedResource)
    blob = embedded.resource
    assert isinstance(blob, mt.BlobResourceContents)
    assert blob.uri == f"{ATTACHMENT_URI}att-7" and blob.mime_type == "application/pdf"
    assert base64.b64decode(blob.blob) == PDF
    # Structured content is the payload as before; the files make the result untrusted.
    assert result.structured_content == PAYLOAD
    assert result.meta is not None and result.meta[UNTRUSTED_META_KEY] is True


@pytest.mark.anyio
@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2025-11-25"])
async def test_the_wire_carries_camel_case_fields_in_every_era(files_app: App, version: str) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": f"Bearer {access_token(files_app)}", "MCP-Protocol-Version": version}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "show_files", "arguments": {}}}
    transport = httpx2.ASGITransport(app=create_web_app(files_app))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
        r = await http.post("/mcp", content=json.dumps(body).encode(), headers=headers)
    assert r.status_code == 200
    result = r.json()["result"]
    kinds = [c["type"] for c in result["content"]]
    assert kinds == ["text", "image", "resource"]
    image, embedded = result["content"][1:]
    assert image == {"type": "image", "mimeType": "image/png", "data": base64.b64encode(PNG).decode()}
    assert embedded["resource"] == {"uri": "noteloom://attachment/att-7", "mimeType": "application/pdf",
                                    "blob": base64.b64encode(PDF).decode()}
    assert embedded["_meta"] == {TITLE_META_KEY: "report.pdf"}
    assert result["structuredContent"] == PAYLOAD and result["isError"] is False


def test_a_ref_is_quoted_into_the_uri_and_a_file_without_bytes_is_a_bug() -> None:
    from noteloom.mcp import file_content

    doc = file_content(DocumentPart("application/pdf", "JVBERg==", ref="a/b c"))
    assert doc["resource"]["uri"] == "noteloom://attachment/a%2Fb%20c"
    named = file_content(DocumentPart("application/pdf", "JVBERg==", title="Q3 report.pdf"))
    assert named["resource"]["uri"] == "noteloom://file/Q3%20report.pdf"
    linked = file_content(ImagePart("image/png", url="https://example.com/x.png"))
    assert linked == {"type": "resource_link", "uri": "https://example.com/x.png", "name": "image",
                      "mimeType": "image/png"}
    with pytest.raises(ValueError, match="without its bytes"):
        file_content(DocumentPart("application/pdf", "", ref="att-7"))
