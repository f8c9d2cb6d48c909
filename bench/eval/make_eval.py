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
  ``cross-language`` (the paraphrase in German, French or Spanish).

The output is deterministic: running this again gives the same file.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from bench.corpus import generate
from bench.eval.items import ITEMS

OUT = Path(__file__).with_name("eval.json")
BACKGROUND = 250
LONG_CHARS = 20_000
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
    return {"version": 1, "notes": notes, "queries": queries}


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for q in data["queries"]:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    print(f"wrote {OUT.name}: {len(data['notes'])} notes, {len(data['queries'])} queries {kinds}")


if __name__ == "__main__":
    main()
