"""Build ``eval.json``, the retrieval evaluation set: ``python -m bench.eval.make_eval``.

From the hand-written facts in ``items.py`` and deterministic background notes
from ``bench.corpus`` it writes:

- notes: each fact as a short note (two in three) or buried ~80 % deep in a
  long note of ~20,000 characters with headings (one in three); each fact's
  distractor; ~250 background notes on everyday topics;
- queries, each with the ids of the notes that answer it and a kind:
  ``paraphrase`` (the fact in other words; a short note answers it),
  ``deep`` (the same, answered deep inside a long note),
  ``keyword`` (an identifier or name only the fact's note contains),
  ``cross-language`` (the paraphrase in German, French or Spanish),
  ``deep-chunk`` (a fact of ``DEEP_ITEMS`` in the middle of a paragraph of a long
  note shaped like real vaults' long tail, 25,000-60,000 characters under a few
  headings: it starts at least ``CHUNK_DEPTH`` characters, about 70 word pieces, into
  every chunk that holds it, so an index that embeds only the start of its chunks
  misses it).

Items added later come after the earlier ones, with a random stream of their own,
so the earlier notes and queries stay as they were.

The output is deterministic: running this again gives the same file.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from bench.corpus import generate
from bench.eval.items import DEEP_ITEMS, ITEMS
from noteloom.chunks import chunk_note

OUT = Path(__file__).with_name("eval.json")
BACKGROUND = 250
LONG_CHARS = 20_000
#: How far (in characters of the body) a deep-chunk fact starts into each chunk that holds it.
CHUNK_DEPTH = 320
LANGS = {"wie": "de", "was": "de", "welche": "de", "sollte": "de", "das": "de", "mein": "de", "der": "de",
         "die": "de", "neue": "de", "wo": "de", "schmerzen": "de", "heuschnupfen": "de"}


def _id(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:32]


def _lang(text: str) -> str:
    first = text.split()[0].lower()
    if first in LANGS:
        return "de"
    if any(ch in text for ch in "ñ¿¡") or first in {"por", "cómo", "mi", "lista", "deducir", "tocar", "ruido",
                                                    "rodilla", "liberar", "el", "zumbido"}:
        return "es"
    return "fr"


def _background() -> list[dict[str, Any]]:
    corpus = generate(BACKGROUND * 2, seed=11)
    out = []
    for n in corpus.iter_notes():
        if n.lang != "en" or len(out) >= BACKGROUND:
            continue
        out.append({"id": n.id, "title": n.title, "body": n.body[:4000], "tags": list(n.tags)[:3]})
    return out


def _long_body(rng: random.Random, filler: list[str], fact: str, title: str) -> str:
    """~LONG_CHARS of sectioned text with ``fact`` in a section about 80 % of the way down."""
    sections: list[str] = []
    size = 0
    k = 0
    while size < LONG_CHARS:
        paragraph = " ".join(rng.sample(filler, min(6, len(filler))))
        heading = f"## Part {k + 1}: {rng.choice(['notes', 'log', 'ideas', 'details', 'misc', 'follow-up'])}"
        text = f"{heading}\n\n{paragraph}\n"
        sections.append(text)
        size += len(text)
        k += 1
    at = int(len(sections) * 0.8)
    sections[at] = sections[at].rstrip("\n") + f"\n\n{fact}\n"
    return f"# {title}\n\n" + "\n".join(sections)


def _code(rng: random.Random) -> str:
    names = ["config", "rows", "path", "batch", "result", "items", "total"]
    lines = [f"{rng.choice(names)} = {rng.choice(names)}.get({rng.randint(1, 99)})" for _ in range(rng.randint(2, 8))]
    return "```python\n" + "\n".join(lines) + "\n```"


def _long_tail_body(rng: random.Random, filler: list[str], fact: str) -> tuple[str, int]:
    """(body, where the fact starts): 25,000-60,000 characters shaped as real vaults' long
    notes are (about one heading per 1,500-4,000 characters, at most 12; paragraphs of
    120-900 characters, lists, a few code fences), the fact in the middle of a paragraph."""
    target = rng.randint(25_000, 60_000)
    headings = min(12, int(target / 1500 * (0.4 + 1.2 * rng.random())))
    per = target / (headings + 1)
    at = rng.uniform(0.2, 0.9) * target
    blocks: list[str] = []
    size = 0
    placed = -1
    for sec in range(headings + 1):
        if sec:
            blocks.append(f"## {' '.join(rng.sample(filler, 1)[0].split()[:rng.randint(1, 5)]).rstrip('.,;:')}")
            size += len(blocks[-1]) + 2
        while size < per * (sec + 1):
            p = rng.random()
            if placed < 0 and size >= at:
                # Sentences before the fact (at least CHUNK_DEPTH characters), a few after it.
                before: list[str] = []
                while sum(len(x) + 2 for x in before) < CHUNK_DEPTH + 80:
                    before.append(rng.choice(filler))
                after = [rng.choice(filler) for _ in range(rng.randint(1, 2))]
                head = ". ".join(before) + ". "
                block = head + fact + " " + ". ".join(after) + "."
                placed = size + len(head)
            elif p < 0.7:
                block = ""
                while len(block) < rng.randint(120, 900):
                    block += rng.choice(filler) + ". "
                block = block.strip()
            elif p < 0.93:
                block = "\n".join(f"- {rng.choice(filler)}" for _ in range(rng.randint(2, 7)))
            else:
                block = _code(rng)
            blocks.append(block)
            size += len(block) + 2
    return "\n\n".join(blocks), placed


def _deep_chunk_note(rng: random.Random, filler: list[str], note_id: str, title: str, fact: str) -> str:
    """A long-tail body whose fact starts at least CHUNK_DEPTH characters into every chunk
    that holds any of it, cut as the index cuts notes by default (another draw otherwise)."""
    for _ in range(50):
        body, at = _long_tail_body(rng, filler, fact)
        assert body[at : at + len(fact)] == fact
        holding = [c for c in chunk_note(note_id, title, body) if c.start < at + len(fact) and c.end > at]
        if holding and all(at - c.start >= CHUNK_DEPTH for c in holding):
            return body
    raise RuntimeError(f"could not bury {fact[:40]!r} deep enough in a chunk")


def build() -> dict[str, Any]:
    rng = random.Random("eval:1")
    notes = _background()
    filler = [s for n in notes for s in n["body"].split(". ") if 40 < len(s) < 200 and "#" not in s]
    queries: list[dict[str, Any]] = []
    for i, item in enumerate(ITEMS):
        target = _id("target", i)
        deep = i % 3 == 2
        if deep:
            body = _long_body(rng, filler, item.fact, item.title)
        else:
            body = f"{item.fact}\n\nWritten down so I do not forget.\n"
        notes.append({"id": target, "title": item.title, "body": body, "tags": []})
        notes.append({"id": _id("distractor", i), "title": item.distractor_title, "body": item.distractor, "tags": []})
        kind = "deep" if deep else "paraphrase"
        queries.append({"id": f"q{i}-{kind}", "kind": kind, "text": item.query, "relevant": [target], "lang": "en"})
        queries.append({"id": f"q{i}-keyword", "kind": "keyword", "text": item.key, "relevant": [target], "lang": "en"})
        queries.append(
            {"id": f"q{i}-x", "kind": "cross-language", "text": item.xquery, "relevant": [target], "lang": _lang(item.xquery)}
        )
    rng.shuffle(notes)
    deep_rng = random.Random("eval:deep-chunk:1")
    added: list[dict[str, Any]] = []
    for i, deep_item in enumerate(DEEP_ITEMS):
        target = _id("deep-chunk", i)
        body = _deep_chunk_note(deep_rng, filler, target, deep_item.title, deep_item.fact)
        added.append({"id": target, "title": deep_item.title, "body": body, "tags": []})
        added.append(
            {"id": _id("deep-chunk-distractor", i), "title": deep_item.distractor_title, "body": deep_item.distractor, "tags": []}
        )
        queries.append({"id": f"d{i}-deep-chunk", "kind": "deep-chunk", "text": deep_item.query, "relevant": [target], "lang": "en"})
    deep_rng.shuffle(added)
    return {"version": 2, "notes": notes + added, "queries": queries}


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for q in data["queries"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    print(f"wrote {OUT.name}: {len(data['notes'])} notes, {len(data['queries'])} queries {kinds}")


if __name__ == "__main__":
    main()
