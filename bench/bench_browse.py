"""The notes app at 100,000 notes: the browse API's answers, and the time to first render of the
note list in Chromium.

Run from the repository root::

    .venv/bin/python -m bench.bench_browse [--notes N] [--loads N]

It builds a workspace of N notes (default 100,000) in 60 notebooks (20 with two sub-notebooks
each), serves it with ``noteloom serve`` and prints the median time of the tree, the first page
of the list, a page half-way down (the cursor costs the same anywhere), a small notebook's list
and the quick switcher; then, in Chromium (when installed), the time from navigation start to
the first row of the list on screen over ``--loads`` reloads. Target: first render < 300 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx

from noteloom import db
from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from noteloom.db import new_id
from noteloom.web.browse_api import encode_cursor

TARGET_MS = 300.0
CHROMIUM = Path("/usr/bin/chromium")
T0 = 1_700_000_000_000
#: Records when the first row of the list is in the page (ms since navigation start).
FIRST_ROW = """
new MutationObserver((_, obs) => {
  if (document.querySelector("#notes li[data-id]")) { window.__firstRow = performance.now(); obs.disconnect(); }
}).observe(document, { childList: true, subtree: true });
"""


def build(home: Path, count: int) -> tuple[str, str]:
    """A workspace of ``count`` notes; the owner's token and a small notebook's id."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        tops = [ws.create_notebook(f"Notebook {i}").id for i in range(20)]
        books = tops + [ws.create_notebook(f"Part {i}", tops[i % 20]).id for i in range(40)]
        small = ws.create_notebook("Small").id
        words = "the quick brown fox jumps over the lazy dog " * 8
        with ws.write() as c:
            for start in range(0, count, 10_000):
                c.execute(db.notes.insert(), [
                    {"id": new_id(), "notebook_id": books[i % len(books)], "title": f"Note {i}", "body": words,
                     "is_todo": i % 7 == 0, "source_url": "", "created_time": T0 + i, "updated_time": T0 + i}
                    for i in range(start, min(count, start + 10_000))])
            c.execute(db.notes.insert(), [
                {"id": new_id(), "notebook_id": small, "title": f"Small {i}", "body": "", "is_todo": False,
                 "source_url": "", "created_time": T0 + i * 5000, "updated_time": T0 + i * 5000} for i in range(20)])
        return access_token(app), small
    finally:
        app.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def median_ms(client: httpx.Client, path: str, runs: int = 7) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        r = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        r.raise_for_status()
    return statistics.median(samples[1:])


def first_render(url: str, token: str, loads: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.add_init_script(FIRST_ROW)
            page = context.new_page()
            page.goto(f"{url}/?token={token}")
            page.wait_for_function("() => window.__firstRow !== undefined", timeout=60_000)
            times = []
            for _ in range(loads):
                # The last load's tree (which counts every note) has been drawn: its query is
                # not still running on the server when the next load starts.
                page.wait_for_selector("#tree .tree-all .count", timeout=60_000)
                page.reload()
                page.wait_for_function("() => window.__firstRow !== undefined", timeout=60_000)
                times.append(float(page.evaluate("() => window.__firstRow")))
            return times
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        token, small = build(home, args.notes)
        print(f"  built {args.notes:,} notes in {time.perf_counter() - started:.1f} s")
        port = free_port()
        noteloom = shutil.which("noteloom", path=str(Path(sys.executable).parent)) or "noteloom"
        env = {k: v for k, v in os.environ.items() if k not in ("NOTELOOM_MODEL", "NOTELOOM_DATABASE_URL")}
        with (home / "server.log").open("wb") as log:
            server = subprocess.Popen([noteloom, "serve", "--home", str(home), "--port", str(port)],
                                      stdout=log, stderr=subprocess.STDOUT, env=env)
            url = f"http://127.0.0.1:{port}"
            try:
                deadline = time.monotonic() + 120
                while True:
                    try:
                        if httpx.get(url + "/health", timeout=10).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"noteloom serve did not start: {(home / 'server.log').read_text()}")
                    time.sleep(0.1)
                with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as c:
                    middle = encode_cursor(T0 + args.notes // 2, "f" * 32)
                    for name, path in [
                        ("tree (counts every note)", "/api/v1/browse/tree"),
                        ("list, first page", "/api/v1/browse/notes?limit=50"),
                        ("list, half-way down", f"/api/v1/browse/notes?limit=50&cursor={middle}"),
                        ("list of a small notebook", f"/api/v1/browse/notes?limit=50&notebook_id={small}"),
                        ("quick switcher, empty", "/api/v1/browse/titles"),
                        ("quick switcher, 'note 4242'", "/api/v1/browse/titles?q=note%204242"),
                    ]:
                        print(f"  {name:<30} {median_ms(c, path):8.1f} ms (median)")
                if not CHROMIUM.exists():
                    print(f"  first render: skipped (no Chromium at {CHROMIUM})")
                    return
                times = first_render(url, token, args.loads)
                p50 = statistics.median(times)
                verdict = "met" if p50 < TARGET_MS else "MISSED"
                print(f"  first render of the list      {p50:8.1f} ms (median of {len(times)} loads; "
                      f"max {max(times):.1f} ms; target < {TARGET_MS:.0f} ms: {verdict})")
            finally:
                server.terminate()
                server.wait(timeout=60)


if __name__ == "__main__":
    main()
