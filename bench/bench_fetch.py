"""fetch_url's reader on a ~1 MB page: how long the main article takes to come out.

Run from the repository root::

    .venv/bin/python -m bench.bench_fetch [--size 1000000] [--repeats 5]

The page is generated (fixed seed) the way a news site's article page is built: a head
with a large inline stylesheet, inline scripts and a JSON state blob, a navigation bar
of a few hundred links, a sidebar, ads, the article itself (headings, paragraphs,
lists, a table, links), a comments section and a link-heavy footer, padded to
``--size`` bytes. It is served from a loopback server (plain and gzip-encoded) and read
through the product's path: ``WebFetcher.fetch`` over the guarded client (allowed to
reach 127.0.0.1), the body decoded with its cap, trafilatura in a worker thread.

Printed: the reader extraction alone (wall and CPU ms of the thread that runs it, median
and min over ``--repeats``), the whole fetch_url path (wall ms, plain and gzip), ``full``
mode's extraction for comparison, and the size of what the model is given, with the load
average. Figures are printed, not asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio

from noteloom.outbound import OutboundPolicy
from noteloom.webtools import WebFetcher, extract

WORDS = ("tide", "harbour", "moon", "current", "wave", "channel", "estuary", "pilot", "vessel", "chart",
         "depth", "sounding", "beacon", "buoy", "ebb", "flood", "neap", "spring", "surge", "gauge", "datum",
         "lighthouse", "keeper", "ferry", "crossing", "quay", "slipway", "dredging", "sediment", "shoal",
         "bar", "mouth", "river", "basin", "lock", "gate", "basin", "mooring", "anchor", "cable", "swell")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 22))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    text = " ".join(_sentence(rng) for _ in range(rng.randint(3, 7)))
    if rng.random() < 0.3:
        text += f' See <a href="https://example.org/{rng.randint(1, 9999)}">the {rng.choice(WORDS)} notes</a>.'
    return f"<p>{text}</p>"


def page(size: int, seed: int = 7) -> str:
    """An article page of about ``size`` bytes (see the module's docstring)."""
    rng = random.Random(seed)
    style = "\n".join(f".c{i} {{ margin: {i % 17}px; color: #{i * 2654435761 % 0xFFFFFF:06x}; }}" for i in range(1500))
    state = json.dumps({"items": [{"id": i, "title": _sentence(rng), "tags": rng.sample(WORDS, 4)} for i in range(400)]})
    script = "\n".join(f"function f{i}(a, b) {{ return a * {i} + b - {rng.randint(1, 99)}; }}" for i in range(1500))
    nav = "".join(f'<li><a href="/section/{i}">{rng.choice(WORDS).title()} {i}</a></li>' for i in range(300))
    side = "".join(f'<li><a href="/story/{i}">{_sentence(rng)}</a></li>' for i in range(120))
    ad = '<div class="ad-slot"><iframe src="https://ads.example/slot"></iframe><span>Advertisement</span></div>'
    head = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>Tides of the estuary | Coastal Weekly</title>"
            f'<meta property="og:title" content="Tides of the estuary"><style>{style}</style>'
            f'<script>window.__STATE__ = {state};</script><script>{script}</script></head><body>'
            f'<header><nav><ul>{nav}</ul></nav></header>{ad}<aside><h3>Most read</h3><ul>{side}</ul></aside>')
    comments = "".join(f'<div class="comment"><b>reader{i}</b><p>{_sentence(rng)}</p></div>' for i in range(150))
    footer = "".join(f'<a href="/about/{i}">{rng.choice(WORDS)}</a> ' for i in range(400))
    tail = (f'<section class="comments"><h3>Comments</h3>{comments}</section>'
            f"<footer>{footer}<p>Copyright Coastal Weekly</p></footer><script>{script[:20000]}</script></body></html>")
    article: list[str] = ["<article><h1>Tides of the estuary</h1>"]
    budget = size - len(head) - len(tail)
    section = 0
    while sum(map(len, article)) < budget:
        section += 1
        article.append(f"<h2>Part {section}: the {rng.choice(WORDS)}</h2>")
        article.extend(_paragraph(rng) for _ in range(6))
        if section % 4 == 0:
            article.append("<ul>" + "".join(f"<li>{_sentence(rng)}</li>" for _ in range(5)) + "</ul>")
        if section % 9 == 0:
            rows = "".join(f"<tr><td>{rng.choice(WORDS)}</td><td>{rng.uniform(0, 9):.2f}</td></tr>" for _ in range(6))
            article.append(f"<table><tr><th>Station</th><th>Height (m)</th></tr>{rows}</table>")
        if section % 5 == 0:
            article.append(ad)
    article.append("</article>")
    return head + "".join(article) + tail


@contextmanager
def serving(body: bytes) -> Iterator[int]:
    """A loopback server answering ``/plain`` and ``/gzip`` with the page; yields its port."""
    zipped = gzip.compress(body, 6)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            data, extra = (zipped, {"Content-Encoding": "gzip"}) if self.path == "/gzip" else (body, {})
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            for k, v in extra.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield int(httpd.server_address[1])
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(30)


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[list[float], list[float], Any]:
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w, c = time.perf_counter(), time.thread_time()
        out = fn()
        cpus.append((time.thread_time() - c) * 1000)
        walls.append((time.perf_counter() - w) * 1000)
    return walls, cpus, out


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values):7.1f} ms  min {min(values):7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="bytes of HTML (default 1000000)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    html = page(args.size)
    body = html.encode()
    print(f"page: {len(body) / 1e6:.2f} MB of HTML ({len(gzip.compress(body, 6)) / 1e3:.0f} kB gzip), "
          f"load {os.getloadavg()[0]:.1f}")
    extract(html[:5000])  # trafilatura's import and first-call setup, outside the figures

    walls, cpus, found = _timed(lambda: extract(html, "reader", url="http://127.0.0.1/"), args.repeats)
    print(f"reader extraction        wall {_ms(walls)}   cpu {_ms(cpus)}")
    print(f"  -> {found.source}, {len(found.text):,} characters to the model"
          f"{f' ({found.truncated:,} cut at the cap)' if found.truncated else ''}; title {found.title!r}")
    walls, cpus, full = _timed(lambda: extract(html, "full"), args.repeats)
    print(f"full extraction          wall {_ms(walls)}   cpu {_ms(cpus)}   -> {len(full.text):,} characters")

    fetcher = WebFetcher(OutboundPolicy(allow=frozenset({"127.0.0.1"})))
    with serving(body) as port:
        for path in ("plain", "gzip"):
            times: list[float] = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                result = anyio.run(fetcher.fetch, f"http://127.0.0.1:{port}/{path}", "reader")
                times.append((time.perf_counter() - started) * 1000)
            assert result.source == "article", result.source
            print(f"fetch_url reader ({path:5}) wall {_ms(times)}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
