"""The names other modules code against (the chat, the tools, the web page's API) stay
importable from ``noteloom.attachments`` with the shapes agreed."""

from __future__ import annotations

import dataclasses
import inspect
from typing import get_args

import noteloom.attachments as attachments
from noteloom.attachments import AttachmentLimits, Encoded, Extraction, Kind, Mode, Sniffed, encode


def test_the_agreed_names_are_exported() -> None:
    agreed = {
        "Kind", "Sniffed", "sniff", "AttachmentLimits", "check_size", "Extraction", "extract", "BlobStore",
        "Mode", "Encoded", "encode", "refusal_for_model",
    }
    assert agreed <= set(attachments.__all__)
    assert all(hasattr(attachments, name) for name in attachments.__all__)


def test_the_agreed_shapes() -> None:
    assert set(get_args(Kind)) == {"image", "pdf", "text", "html"}
    assert set(get_args(Mode)) == {"extract", "on_demand", "original"}
    assert [f.name for f in dataclasses.fields(Sniffed)] == ["kind", "mime"]
    assert [f.name for f in dataclasses.fields(Extraction)] == ["status", "text", "detail"]
    assert [f.name for f in dataclasses.fields(Encoded)] == ["text", "blocks", "note"]
    assert {f.name: f.default for f in dataclasses.fields(AttachmentLimits)} == {
        "image_bytes": 5_000_000, "pdf_bytes": 10_000_000, "text_bytes": 2_000_000, "per_message": 5,
        "text_chars": 100_000, "extract_seconds": 30.0, "extract_memory_mb": 512,
    }
    params = inspect.signature(encode).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    assert {"name", "sniffed", "extraction", "load", "mode", "caps", "ref"} <= set(params)
