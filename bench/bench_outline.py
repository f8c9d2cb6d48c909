"""Benchmark of the outline module on a long, realistic note.

Run from the repository root::

    .venv/bin/python -m bench.bench_outline

The note is built from a seeded generator, so every run measures the same text:
nested ATX and setext headings, wrapped paragraphs with inline markup, nested
bullet, ordered and task lists, fenced code whose comment lines look like
headings, tables, block quotes, HTML blocks and a few CJK paragraphs.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from noteloom.outline import (
    Section,
    _compute_sections,
    _format_outline,
    _headings_fast,
    _headings_markdown_it,
    outline_text,
    resolve_section,
    section_text,
)

TARGET_CHARS = 200_000
OUTLINE_TARGET_MS = 20.0

_WORDS = (  # noqa: SIM905 - a word list reads better as text
    "release build sign notarize upload mirror checksum changelog branch tag "
    "merge review script installer portable desktop mobile server sync conflict "
    "cache index search note notebook attachment resource revision encryption key "
    "profile plugin theme setting keyboard shortcut window menu toolbar editor"
).split()
_INLINE = ("*{}*", "**{}**", "`{}`", "[{}](https://example.org/{})", "~{}~")
_CJK = "同步冲突会在下次启动时自动合并，请先备份笔记本再升级桌面版。"
_LANGS = ("python", "bash", "yaml", "")


def _words(rng: random.Random, n: int) -> str:
    out = []
    for _ in range(n):
        word = rng.choice(_WORDS)
        if rng.random() < 0.08:
            word = rng.choice(_INLINE).format(word, word)
        out.append(word)
    return " ".join(out)


def _paragraph(rng: random.Random) -> str:
    text = _words(rng, rng.randint(20, 90)).capitalize() + "."
    lines, line = [], ""
    for word in text.split(" "):
        if line and len(line) + len(word) > 78:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def _bullets(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(3, 9)):
        marker = rng.choice(("- ", "- [ ] ", "- [x] ", "* "))
        lines.append(marker + _words(rng, rng.randint(3, 14)))
        for _ in range(rng.choice((0, 0, 1, 2))):
            lines.append("  - " + _words(rng, rng.randint(2, 10)))
    return "\n".join(lines)


def _ordered(rng: random.Random) -> str:
    return "\n".join(f"{i}. {_words(rng, rng.randint(4, 16))}" for i in range(1, rng.randint(3, 8)))


def _code(rng: random.Random) -> str:
    fence = rng.choice(("```", "~~~", "````"))
    body = []
    for _ in range(rng.randint(3, 14)):
        if rng.random() < 0.1:
            body.append("")
        if rng.random() < 0.25:
            body.append("# " + _words(rng, rng.randint(2, 6)))
        else:
            body.append(f"{rng.choice(_WORDS)}_{rng.randint(0, 99)} = {rng.choice(_WORDS)}()")
    return "\n".join([fence + rng.choice(_LANGS), *body, fence])


def _table(rng: random.Random) -> str:
    cols = rng.randint(2, 4)
    rows = ["| " + " | ".join(_words(rng, 1) for _ in range(cols)) + " |"]
    rows.append("|" + "---|" * cols)
    for _ in range(rng.randint(2, 8)):
        rows.append("| " + " | ".join(_words(rng, rng.randint(1, 4)) for _ in range(cols)) + " |")
    return "\n".join(rows)


def _quote(rng: random.Random) -> str:
    return "\n".join("> " + line for line in _paragraph(rng).split("\n"))


def _html(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return f"<!-- {_words(rng, 6)}\n\n# {_words(rng, 3)}\n-->"
    return f"<details>\n<summary>{_words(rng, 3)}</summary>\n\n{_paragraph(rng)}\n\n</details>"


def _heading(rng: random.Random, level: int, n: int) -> str:
    text = f"{_words(rng, rng.randint(1, 5)).capitalize()} {n}"
    if rng.random() < 0.1:
        text = f"{_CJK[: rng.randint(2, 8)]} {n}"
    if level <= 2 and rng.random() < 0.15:
        return f"{text}\n{'=' if level == 1 else '-' * len(text)}"
    return f"{'#' * level} {text}"


def build_note(chars: int = TARGET_CHARS, seed: int = 20240601) -> str:
    """A deterministic Markdown note of exactly ``chars`` characters."""
    rng = random.Random(seed)
    blocks = [_paragraph(rng)]
    level, n, size = 1, 0, 0
    blocks_of = (
        *(_paragraph,) * 6,
        *(_bullets,) * 2,
        _ordered,
        *(_code,) * 2,
        _table,
        _quote,
    )
    while size < chars:
        level = max(1, min(4, level + rng.choice((-2, -1, 0, 1, 1))))
        n += 1
        blocks.append(_heading(rng, level, n))
        for _ in range(rng.randint(1, 6)):
            block = rng.choice(blocks_of)(rng)
            if rng.random() < 0.03:
                block = _CJK * rng.randint(1, 4)
            elif rng.random() < 0.02:
                block = _html(rng)
            blocks.append(block)
            size += len(block) + 2
    return "\n\n".join(blocks)[:chars]


def _time_ms(fn: Callable[[], object], runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def _report(label: str, samples: list[float], target_ms: float | None = None) -> None:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    target = f" (target < {target_ms:g} ms)" if target_ms is not None else ""
    print(f"{label}: p50 {p50:.2f} ms, p95 {p95:.2f} ms{target}")


def build_dense_note(chars: int = TARGET_CHARS, seed: int = 7) -> str:
    """A stress case: a heading every ~200 characters, half with inline markup."""
    rng = random.Random(seed)
    parts, n, size = [], 0, 0
    while size < chars:
        n += 1
        text = f"Step {n}: {_words(rng, 4)}"
        if rng.random() < 0.5:
            text = f"Step *{n}*: `{rng.choice(_WORDS)}` {_words(rng, 3)}"
        part = f"{'#' * rng.randint(1, 4)} {text}\n\n{_paragraph(rng)[:160]}\n\n"
        parts.append(part)
        size += len(part)
    return "".join(parts)[:chars]


def _describe(label: str, body: str) -> list[Section]:
    secs = list(_compute_sections(body))
    fast = "fast path" if _headings_fast(body) is not None else "full pass"
    print(
        f"{label}: {len(body)} chars, {body.count(chr(10)) + 1} lines, {len(secs)} sections, {fast}"
    )
    return secs


def main() -> None:
    runs = 50
    body = build_note()
    secs = _describe("note", body)
    _time_ms(lambda: _compute_sections(body), 3)
    _report(
        "outline 200k chars", _time_ms(lambda: _compute_sections(body), runs), OUTLINE_TARGET_MS
    )
    _report(
        "outline_text 200k chars",
        _time_ms(lambda: _format_outline(_compute_sections(body)), runs),
        OUTLINE_TARGET_MS,
    )
    assert _format_outline(_compute_sections(body)) == outline_text(body)
    _report(
        "  for comparison, one full markdown-it pass",
        _time_ms(lambda: _headings_markdown_it(body), 10),
    )

    rng = random.Random(7)
    paths = [rng.choice(secs).path for _ in range(500)]
    titles = [s.heading for s in secs if s.level]
    unique = [h for h in titles if titles.count(h) == 1]
    headings = [rng.choice(unique) for _ in range(500)]
    resolve_section(body, paths[0])
    for label, addresses in (("path", paths), ("heading", headings)):

        def resolve_all(addresses: list[str] = addresses) -> None:
            for address in addresses:
                section_text(body, resolve_section(body, address))

        per_call = [ms * 1000 / len(addresses) for ms in _time_ms(resolve_all, 20)]
        ordered = sorted(per_call)
        print(
            f"resolve_section by {label} + section_text (sections cached): "
            f"p50 {statistics.median(ordered):.1f} us, p95 {ordered[round(0.95 * 19)]:.1f} us per call"
        )

    dense = build_dense_note()
    _describe("stress note", dense)
    _report(
        "outline 200k chars, heading every ~200 chars",
        _time_ms(lambda: _compute_sections(dense), 20),
    )


if __name__ == "__main__":
    main()
