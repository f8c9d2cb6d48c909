"""Real files for the attachment tests (and the chat's, the web page's): PDFs with and
without a text layer, a padded PDF, a PDF bomb, images of each accepted format, SVG, HTML
with scripts. Each is a function returning bytes; the costly ones are made once."""

from __future__ import annotations

import io
import struct
import zlib
from datetime import UTC, datetime
from functools import lru_cache

from fpdf import FPDF
from PIL import Image

HTML_WITH_SCRIPTS = (
    "<!DOCTYPE html>\n<html><head><title>Trip notes</title>\n"
    "<style>body { color: red } .secret-style { display: none }</style>\n"
    "<script>var secretScript = 'exfiltrate'; alert(1)</script></head>\n"
    "<body><h1>Packing for Lisbon</h1><p>Bring the <b>blue</b> raincoat.</p>\n"
    "<script src='x.js'>console.log('secretScript too')</script>\n"
    "<noscript>enable scripts</noscript></body></html>\n"
)


def text_pdf(pages: int = 1, text: str = "Hello from the attachment") -> bytes:
    """A PDF of ``pages`` pages, each carrying ``text`` (wrapped) in a text layer."""
    pdf = _pdf()
    pdf.set_font("helvetica", size=11)
    for _ in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def scanned_pdf(pages: int = 1) -> bytes:
    """A PDF whose pages are only pictures (of a scanned page): no text layer at all."""
    pdf = _pdf()
    picture = io.BytesIO(png_bytes(64, 80, (230, 230, 220)))
    for _ in range(pages):
        pdf.add_page()
        pdf.image(picture, x=10, y=10, w=180)
    return bytes(pdf.output())


def padded_pdf(text: str = "Padded but readable", padding: int = 600) -> bytes:
    """A text PDF after ``padding`` bytes of binary junk (a mail gateway's leftovers): its
    header sits past the first bytes, inside the 1024 that readers search."""
    junk = (b"\x00\x01JUNK\xfe" * (padding // 7 + 1))[:padding]
    return junk + text_pdf(1, text)


def png_bytes(width: int = 4, height: int = 4, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    return _image("PNG", width, height, color)


def jpeg_bytes(width: int = 4, height: int = 4) -> bytes:
    return _image("JPEG", width, height, (30, 200, 30))


def gif_bytes(width: int = 4, height: int = 4) -> bytes:
    return _image("GIF", width, height, (30, 30, 200))


def webp_bytes(width: int = 4, height: int = 4) -> bytes:
    return _image("WEBP", width, height, (120, 120, 20))


def svg_bytes() -> bytes:
    """An SVG image with a script in it, as an XML document."""
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>\n'
        b"<!-- drawn by hand -->\n"
        b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="alert(1)">'
        b"<script>alert(document.cookie)</script><rect width='10' height='10'/></svg>\n"
    )


def html_with_scripts() -> bytes:
    return HTML_WITH_SCRIPTS.encode()


@lru_cache(maxsize=2)
def pdf_bomb(inflated: int = 1 << 30) -> bytes:
    """A one-page PDF of about 1 MB whose content stream inflates to ``inflated`` bytes (1 GiB).

    The deflate stream is one block of 16 MiB of spaces, ended by a full flush (so the same
    compressed bytes stand for every further 16 MiB), repeated: making it costs a checksum
    over the inflated size, not a compression of it."""
    head = b"BT /F1 12 Tf 72 720 Td (boom) Tj ET\n"
    chunk = b" " * (1 << 24)
    z = zlib.compressobj(9)
    first = z.compress(head) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(chunk) + z.flush(zlib.Z_FULL_FLUSH)
    count = max(1, inflated // len(chunk))
    adler = zlib.adler32(head)
    for _ in range(count):
        adler = zlib.adler32(chunk, adler)
    # A final empty fixed-Huffman block, then the zlib trailer (Adler-32 of all inflated bytes).
    stream = first + block * count + b"\x03\x00" + struct.pack(">I", adler)
    return _raw_pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
            b" /Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        ]
    )


def _pdf() -> FPDF:
    pdf = FPDF()
    pdf.set_creation_date(datetime(2026, 1, 1, tzinfo=UTC))
    return pdf


def _raw_pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (the first is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _image(fmt: str, width: int, height: int, color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format=fmt)
    return out.getvalue()
