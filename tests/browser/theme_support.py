"""What the theme, error-page and accessibility tests share: a served home with a note in a
notebook, a recipe with a finished run and a plugin route that fails (a 500 without a test
route in the product), and WCAG contrast."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from page_support import Live, served

from noteloom.app import access_token, open_app
from noteloom.config import load_settings
from plugin_site import install_plugin

NOTE = """# Packing

We leave on **Friday**.

- [x] socks
- [ ] tent

| item | count |
|------|-------|
| socks | 6 |

```python
print("hi")
```
"""
PLUGIN = '''
from noteloom.plugins import hookimpl


@hookimpl
def register_web_routes(register):
    from fastapi import APIRouter

    router = APIRouter()

    @router.get("/fail")
    async def fail():
        raise RuntimeError("boom_probe failed on purpose")

    register("boom_probe", router)
'''
ANSWER = "Your notes say: leave Friday, bring the tent."


@contextmanager
def themed_home(home: Path) -> Iterator[Live]:
    """``noteloom serve`` on a prepared ``home``; ``Live.notes`` names the note, its notebook,
    a recipe and its finished run."""
    app = open_app(load_settings({"NOTELOOM_HOME": str(home)}), load_entry_points=False)
    try:
        ws = app.workspace
        book = ws.create_notebook("Travel")
        ids = {"notebook": book.id, "note": ws.create_note("Packing", NOTE, book.id).id}
        ws.create_note("Receipts", "a receipt", book.id)
        token = access_token(app)
    finally:
        app.close()
    site = install_plugin(home / "site", "boom_probe", PLUGIN)
    script = home / "answer.json"
    script.write_text(json.dumps({"steps": [{"text": ANSWER}], "loop": True}), encoding="utf-8")
    (home / "noteloom.toml").write_text(
        f'[providers]\ndefault = "answer"\n\n[providers.answer]\ntype = "scripted"\nscript = "{script}"\nloop = true\n',
        encoding="utf-8")
    with served(home, pythonpath=site) as url:
        live = Live(url, token, home, ids)
        recipe = live.api("POST", "/api/v1/recipes", json={"name": "Trip digest", "prompt": "Summarise the trip."})
        ids["recipe"] = recipe["id"]
        ids["run"] = live.api("POST", f"/api/v1/recipes/{recipe['id']}/runs")["run_id"]
        deadline = time.monotonic() + 120
        while live.api("GET", f"/api/v1/recipes/runs/{ids['run']}")["status"] in ("queued", "running"):
            if time.monotonic() > deadline:
                raise RuntimeError("the recipe's run did not finish")
            time.sleep(0.1)
        yield live


def luminance(rgb: tuple[float, float, float]) -> float:
    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def parse_rgb(css: str) -> tuple[float, float, float]:
    """``rgb(…)``/``rgba(…)`` as Chromium computes a colour (opaque colours only here)."""
    m = re.fullmatch(r"rgba?\(([\d.]+),\s*([\d.]+),\s*([\d.]+)(?:,\s*([\d.]+))?\)", css.strip())
    if m is None:
        raise ValueError(f"not an rgb colour: {css!r}")
    if m.group(4) is not None and float(m.group(4)) < 1:
        raise ValueError(f"a translucent colour cannot be measured alone: {css!r}")
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def contrast(a: str, b: str) -> float:
    """The WCAG 2 contrast ratio of two computed CSS colours."""
    la, lb = sorted((luminance(parse_rgb(a)), luminance(parse_rgb(b))), reverse=True)
    return (la + 0.05) / (lb + 0.05)
