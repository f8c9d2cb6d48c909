"""The theme's contract, read from the files: every page loads theme.js in its <head>, not
deferred (so a chosen theme is set before the first paint), and every colour a style sheet
uses is a variable that noteloom.css defines for light, for the OS's dark and for the switch's
dark (no hard-coded colour outside the palettes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

WEB = Path(__file__).resolve().parents[1] / "src" / "noteloom" / "web"
STATIC, TEMPLATES = WEB / "static", WEB / "templates"
THEME_TAG = '<script src="/static/theme.js"></script>'
NAMES = ["--bg", "--fg", "--muted", "--surface", "--surface-2", "--line", "--input-border", "--accent", "--accent-fg",
         "--focus", "--danger", "--ok", "--warn", "--code-bg", "--selection", "--diff-add", "--diff-del"]
PAGES = sorted(p for p in TEMPLATES.glob("*.html") if "<head>" in p.read_text(encoding="utf-8"))
SHEETS = sorted(STATIC.glob("*.css"))


def palettes() -> dict[str, set[str]]:
    """The variables each palette block of noteloom.css defines."""
    css = (STATIC / "noteloom.css").read_text(encoding="utf-8")
    blocks = {
        "light": r':root, html\[data-theme="light"\][^{]*\{([^}]*)\}',
        "os dark": r'html:not\(\[data-theme="light"\]\)\s*\{([^}]*)\}',
        "switch dark": r'\nhtml\[data-theme="dark"\]\s*\{([^}]*)\}',
    }
    found = {}
    for name, pattern in blocks.items():
        m = re.search(pattern, css)
        assert m is not None, f"noteloom.css has no {name} palette"
        found[name] = set(re.findall(r"(--[a-z0-9-]+)\s*:", m.group(1)))
    return found


def test_there_are_pages_and_style_sheets() -> None:
    assert len(PAGES) >= 5 and any(p.name == "error.html" for p in PAGES)
    assert len(SHEETS) >= 3


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_sets_the_theme_before_its_first_paint(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    head = html[html.index("<head>"):html.index("</head>")]
    assert html.count("/static/theme.js") == 1 and THEME_TAG in head, page.name
    assert head.index('href="/static/noteloom.css"') < head.index(THEME_TAG), "the palette loads before the script reads it"


def test_every_palette_defines_every_name() -> None:
    for name, defined in palettes().items():
        assert set(NAMES) <= defined, (name, sorted(set(NAMES) - defined))
        assert defined <= set(NAMES), (name, sorted(defined - set(NAMES)))


@pytest.mark.parametrize("sheet", SHEETS, ids=lambda p: p.name)
def test_style_sheets_take_colours_from_the_theme(sheet: Path) -> None:
    css = re.sub(r"/\*.*?\*/", "", sheet.read_text(encoding="utf-8"), flags=re.S)
    own = set(re.findall(r"(--[a-z0-9-]+)\s*:", css))
    for var, fallback in re.findall(r"var\((--[a-z0-9-]+)\s*(,)?", css):
        assert var in NAMES or var in own or fallback, f"{sheet.name}: var({var}) is not a theme colour"
    if sheet.name == "noteloom.css":
        css = re.sub(r"(:root|html)[^{]*\{[^}]*\}", "", css)  # the palettes themselves
    # Colours in data: URLs (an icon's mask) are not painted colours.
    css = re.sub(r'url\("data:[^"]*"\)', "", css)
    assert not re.findall(r"#[0-9a-fA-F]{3,8}\b", css), f"{sheet.name} hard-codes a colour"
