"""Attachment extraction: a 100-page text PDF read in the child process, time and memory.

Run from the repository root::

    .venv/bin/python -m bench.bench_attachments [--pages 100] [--repeats 5]

The PDF is generated with fpdf2 (fixed seed: every run reads the same file), each page
filled with wrapped prose, about 3,000 characters a page. It is read through the
product's path, ``noteloom.attachments.extract``: a fresh child interpreter under its
address-space and CPU limits, the file on its stdin, the text back on its stdout.

Printed, median and min over ``--repeats``: the wall time the caller waits, the child's
CPU time and its peak resident memory (as the child measured itself, and the largest
``RUSAGE_CHILDREN`` high-water mark for comparison), for the whole document (a text cap
above its length) and with the default cap of 100,000 characters (the child stops reading
pages once it has that much); a one-page PDF for the cost of starting the child; and a
1 GiB PDF bomb, the time until the child is stopped at its memory limit. With the load
average. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import time
from pathlib import Path

from fpdf import FPDF

from noteloom.attachments import AttachmentLimits, Sniffed, extract_with_usage

PDF = Sniffed("pdf", "application/pdf")
WORDS = ("ledger", "harbour", "invoice", "tide", "quarterly", "margin", "cargo", "pilot", "estimate",
         "beacon", "audit", "schedule", "vessel", "forecast", "ballast", "channel", "revenue", "anchor")


def text_pdf(pages: int, seed: int = 11) -> bytes:
    """``pages`` pages of seeded prose, about 3,000 characters each."""
    rng = random.Random(seed)
    pdf = FPDF()
    pdf.set_font("helvetica", size=9)
    for _ in range(pages):
        pdf.add_page()
        words = " ".join(rng.choice(WORDS) for _ in range(420))
        pdf.multi_cell(0, 4.2, words.capitalize() + ".")
    return bytes(pdf.output())


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _measure(label: str, data: bytes, limits: AttachmentLimits, repeats: int) -> None:
    walls: list[float] = []
    cpus: list[float] = []
    rss: list[int] = []
    chars = 0
    status = ""
    for _ in range(repeats):
        started = time.perf_counter()
        found, usage = extract_with_usage(data, PDF, limits)
        walls.append((time.perf_counter() - started) * 1000)
        status = found.status if found.detail is None else f"{found.status} ({found.detail})"
        chars = len(found.text or "")
        if usage is not None:
            cpus.append(usage.cpu_seconds * 1000)
            rss.append(usage.max_rss_kb)
    children_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    line = (f"{label:<34} {status:<8} wall {statistics.median(walls):7.0f} ms (min {min(walls):.0f})")
    if cpus:
        line += (f"  child cpu {statistics.median(cpus):6.0f} ms (min {min(cpus):.0f})"
                 f"  child peak rss {max(rss) / 1024:6.1f} MB")
    print(f"{line}  text {chars:,} chars  [children's peak so far {children_peak / 1024:.0f} MB; {_load()}]",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-bomb", action="store_true", help="leave out the PDF bomb")
    opts, _ = parser.parse_known_args()
    started = time.perf_counter()
    data = text_pdf(opts.pages)
    print(f"{opts.pages}-page text PDF: {len(data) / 1e6:.2f} MB, made in {time.perf_counter() - started:.1f} s "
          f"({_load()})", flush=True)
    limits = AttachmentLimits()
    print(f"limits: {limits.extract_seconds:g} s wall, {limits.extract_memory_mb} MB address space, "
          f"text cap {limits.text_chars:,} chars", flush=True)
    _measure("1 page (the child's start-up)", text_pdf(1), limits, opts.repeats)
    _measure(f"{opts.pages} pages, whole text", data, AttachmentLimits(text_chars=10_000_000), opts.repeats)
    _measure(f"{opts.pages} pages, default cap", data, limits, opts.repeats)
    if not opts.no_bomb:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from attachment_support import pdf_bomb

        _measure("PDF bomb (1 GiB inflated)", pdf_bomb(), limits, 1)


if __name__ == "__main__":
    main()
