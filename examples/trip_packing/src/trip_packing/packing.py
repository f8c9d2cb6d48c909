"""Earlier packing lists and notes about a place, read and merged into a new list.

Nothing here touches the workspace: :mod:`trip_packing.tool` finds the notes and hands
their text over. A packing list is a note whose Markdown list items are things to pack;
headings group them (``## Clothes``), and a heading naming a companion (``## For the dog``)
holds what only that companion needs. A line near the top may say how long that trip was
(``4 days``, ``3 nights``, ``a week``) and for how many people, which is what lets a
quantity written then (``8 socks``) be scaled to this trip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from trip_packing.catalogue import PET_ITEMS, Kind, kind_of, picture_of, words_of

#: Longest item name kept from a list line; a longer line is a sentence, not an item.
MAX_NAME = 80
#: No quantity is scaled past this (a typo such as "400 socks" stays a typo, not a pallet).
MAX_QUANTITY = 999

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_NUMBER = r"(\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_DAYS = re.compile(r"\b" + _NUMBER + r"[\s-]*(day|night|week)s?\b", re.IGNORECASE)
_WEEKEND = re.compile(r"\bweekend\b", re.IGNORECASE)
_PEOPLE = re.compile(r"\b" + _NUMBER + r"\s+(?:people|persons|adults|of us)\b", re.IGNORECASE)
_COUNTED = re.compile(_NUMBER + r"\s+(.+)$", re.IGNORECASE)
_ALONG = re.compile(r"\s*(?:,|\band\b|&|\+)\s*", re.IGNORECASE)

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s*)?(.*)$")
_LEADING_QTY = re.compile(r"^(\d{1,3})\s*(?:x|×|\*)?\s+(.+)$", re.IGNORECASE)
_TRAILING_QTY = re.compile(r"^(.+?)(?:\s+[x×]\s*(\d{1,3})|\s*\((\d{1,3})\)|\s*:\s*(\d{1,3}))$", re.IGNORECASE)
_PAIRS = re.compile(r"^(?:pairs?|sets?)\s+of\s+", re.IGNORECASE)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"[*_`]+")
_ASIDE = re.compile(r"\s+[—–-]\s+.*$|\s*\([^)]*\)")

#: Who may come along, by the words people use for them.
_COMPANION_WORDS = {
    "dog": "dog", "puppy": "dog", "cat": "cat", "kitten": "cat",
    "kid": "child", "child": "child", "children": "child", "son": "child", "daughter": "child",
    "baby": "baby", "toddler": "baby", "infant": "baby",
    "partner": "partner", "wife": "partner", "husband": "partner", "girlfriend": "partner",
    "boyfriend": "partner", "friend": "friend",
}
PETS = frozenset({"dog", "cat"})

#: Sentences in notes about a place that name something to bring along.
_BRING = re.compile(
    r"\b(?:bring|pack|don'?t forget|do not forget|remember|you(?:'ll| will)? need|we(?:'ll| will)? need)\s+"
    r"([^.;:!?\n]+)",
    re.IGNORECASE,
)
_BRING_HEADING = re.compile(r"\b(bring|pack|packing|take|kit|gear|need|what to)\b", re.IGNORECASE)
_CUT = re.compile(r"\s+(?:for|to|in|on|at|because|as|if|when|since|so|unless|otherwise|even|just|with|before|"
                  r"after|during|while|from)\b.*$", re.IGNORECASE)
_SPLIT = re.compile(r"\s*(?:,|\band\b|&|\bor\b|/)\s*", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:a|an|some|the|your|my|our|plenty of|lots of|enough|extra|spare|good|proper)\s+",
                      re.IGNORECASE)
_NOT_THINGS = frozenset({"it", "them", "this", "that", "these", "those", "everything", "anything", "something",
                         "care", "time", "you", "us", "me", "one", "lot", "lots", "more", "less"})


def number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def trip_days(text: str) -> int | None:
    """How many days a trip described by ``text`` lasts: ``"4 days"``, ``"3 nights"`` (4 days),
    ``"a week"``, ``"weekend"`` (2); ``None`` when it does not say."""
    m = _DAYS.search(text)
    if m is not None:
        n, unit = number(m.group(1)), m.group(2).lower()
        days = n * 7 if unit == "week" else n + 1 if unit == "night" else n
        return days if days > 0 else None
    return 2 if _WEEKEND.search(text) else None


def trip_people(text: str) -> int | None:
    m = _PEOPLE.search(text)
    return number(m.group(1)) or None if m is not None else None


@dataclass(frozen=True)
class Party:
    """Who goes: how many people (the user and every human companion), which pets, and
    every kind of companion named (``dog``, ``child``, ``partner``)."""

    people: int
    pets: tuple[str, ...]
    kinds: frozenset[str]


def party_of(companions: Iterable[str]) -> Party:
    """``["my dog", "2 kids", "Sam"]`` → 4 people (the user, two children and Sam) and a dog;
    ``"2 kids and a dog"`` as one entry says the same."""
    people, pets, kinds = 1, [], set()
    for text in (part for raw in companions for part in _ALONG.split(raw) if part.strip()):
        count = 1
        m = _COUNTED.match(text.strip())
        if m is not None and m.group(1).lower() not in ("a", "an"):
            count, text = number(m.group(1)), m.group(2)
        named = {_COMPANION_WORDS[w] for w in words_of(text) if w in _COMPANION_WORDS}
        kinds |= named
        pet = next((k for k in named if k in PETS), None)
        if pet is not None:
            pets += [pet] * count
        else:
            people += count
    return Party(people, tuple(dict.fromkeys(pets)), frozenset(kinds))


def companion_of(heading: str) -> str | None:
    """The kind of companion a heading is for (``"For the dog"`` → ``dog``), if it names one."""
    for w in words_of(heading):
        if w in _COMPANION_WORDS:
            return _COMPANION_WORDS[w]
    return None


@dataclass(frozen=True)
class Entry:
    """One line of an earlier list."""

    name: str
    quantity: int | None
    #: The heading it sits under, as the user wrote it.
    category: str | None
    #: The companion its heading is for: only packed when they come too.
    companion: str | None


@dataclass(frozen=True)
class PackingList:
    note_id: str
    title: str
    updated_time: int
    days: int | None
    people: int | None
    entries: tuple[Entry, ...]


def plain(text: str) -> str:
    """``text`` without Markdown links and emphasis, its spaces collapsed."""
    return " ".join(_MARKS.sub("", _LINK.sub(r"\1", text)).split())


def clean_name(text: str) -> str:
    """An item's name: plain text without asides (``"socks (wool) - the grey ones"`` → ``"socks"``)."""
    return " ".join(_ASIDE.sub("", plain(text)).split()).strip(" .,;:")


def item_of(text: str) -> tuple[str, int | None]:
    """A list line's item name and the quantity written with it."""
    name, quantity = split_quantity(plain(text))
    return clean_name(name), quantity


def split_quantity(text: str) -> tuple[str, int | None]:
    """``"4 × wool socks"``, ``"socks x4"``, ``"socks (4)"``, ``"socks: 4"`` → ``("wool socks", 4)``."""
    text = " ".join(text.split())
    quantity: int | None = None
    m = _LEADING_QTY.match(text)
    if m is not None:
        quantity, text = int(m.group(1)), m.group(2)
    else:
        m = _TRAILING_QTY.match(text)
        if m is not None:
            quantity, text = int(next(g for g in m.groups()[1:] if g)), m.group(1)
    text = _PAIRS.sub("", text)
    return text, quantity


def list_items(body: str) -> Iterable[tuple[str, list[str]]]:
    """Each list item's text with the headings it sits under (outermost first); not inside fences."""
    headings: list[tuple[int, str]] = []
    fenced = False
    for line in body.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        h = _HEADING.match(line)
        if h is not None:
            level = len(h.group(1))
            headings = [(lv, t) for lv, t in headings if lv < level] + [(level, h.group(2))]
            continue
        m = _ITEM.match(line)
        if m is not None:
            yield m.group(1), [t for lv, t in headings if lv > 1]


def read_list(note_id: str, title: str, body: str, updated_time: int) -> PackingList:
    """A packing list's items, and the trip it was for as its title or first lines say."""
    head = " ".join([title, *body.strip().splitlines()[:3]])
    entries: list[Entry] = []
    for text, headings in list_items(body):
        if "~~" in text:  # struck through: not packed after all
            continue
        name, quantity = item_of(text)
        if not name or len(name) > MAX_NAME or not any(c.isalpha() for c in name):
            continue
        companion = next((c for c in map(companion_of, reversed(headings)) if c is not None), None)
        entries.append(Entry(name, quantity, headings[-1] if headings else None, companion))
    return PackingList(note_id, title, updated_time, trip_days(head), trip_people(head), tuple(entries))


def things_to_bring(body: str) -> list[str]:
    """What a note about a place says to bring: the items of a list under a heading such as
    "What to bring" or "Kit", and what sentences tell the reader to bring or pack."""
    found: list[str] = []
    for text, headings in list_items(body):
        if headings and _BRING_HEADING.search(headings[-1]) and "~~" not in text:
            found.append(item_of(text)[0])
    prose = "\n".join(line for line in body.splitlines() if not _ITEM.match(line) and not _HEADING.match(line))
    for m in _BRING.finditer(prose):
        phrase = _CUT.sub("", m.group(1))
        for piece in _SPLIT.split(phrase):
            found.append(piece)
    out: list[str] = []
    for raw in found:
        name = _ARTICLE.sub("", clean_name(raw))
        name = _ARTICLE.sub("", name)
        words = name.split()
        if not 1 <= len(words) <= 4 or len(name) > MAX_NAME or name.lower() in _NOT_THINGS:
            continue
        if words[0].lower() in ("to", "be", "not", "no") or not any(c.isalpha() for c in name):
            continue
        if all(w in _COMPANION_WORDS or w in _NOT_THINGS or w in ("family", "everyone") for w in words_of(name)):
            continue
        if name.lower() not in (o.lower() for o in out):
            out.append(name)
    return out


@dataclass(frozen=True)
class PlaceNote:
    """A note about the destination: what it says to bring."""

    note_id: str
    title: str
    things: tuple[str, ...]


@dataclass
class Planned:
    """One item of the new list."""

    name: str
    quantity: int
    category: str
    picture: str
    sources: list[str] = field(default_factory=list)
    why: str = ""


def key_of(name: str) -> str:
    return " ".join(words_of(name))


def scaled(quantity: int | None, kind: Kind | None, days: int, people: int, then: PackingList | None) -> int:
    """How many to pack now, from what a list (``then``) said for its own trip."""
    then_days = then.days if then is not None else None
    then_people = (then.people if then is not None else None) or 1
    per = kind.per if kind is not None else "trip"
    if per == "day_person":
        if quantity is not None and then_days:
            n = quantity / then_days / then_people * days * people
        else:
            n = days * people
    elif per == "person":
        n = (quantity or 1) / then_people * people
    elif per == "day":
        n = quantity / then_days * days if quantity is not None and then_days else days
    else:
        n = quantity or 1
    return max(1, min(MAX_QUANTITY, math.ceil(n - 1e-9)))


def _why(quantity: int | None, kind: Kind | None, then: PackingList) -> str:
    said = f"from '{then.title}'"
    if quantity is not None:
        said += f" ({quantity}" + (f" for {then.days} days" if then.days else "") + ")"
    how = {"day_person": "per day and person", "person": "per person", "day": "per day"}.get(
        kind.per if kind is not None else "trip"
    )
    return f"{said}, counted {how}" if how else said


def plan(
    destination: str,
    days: int,
    party: Party,
    lists: Sequence[PackingList],
    places: Sequence[PlaceNote],
) -> list[Planned]:
    """The new list: the items of ``lists`` (the first one that has an item sets its
    quantity and category; every list holding it is a source), scaled to ``days`` and
    ``party``; what ``places`` say to bring for the destination; and what a pet needs
    when no list had a section for it. Grouped by category, in the order categories
    first appear."""
    items: dict[str, Planned] = {}
    companions_listed: set[str] = set()
    for earlier in lists:
        for entry in earlier.entries:
            if entry.companion is not None:
                companions_listed.add(entry.companion)
                if entry.companion not in party.kinds:
                    continue
            key = key_of(entry.name)
            if not key:
                continue
            if key in items:
                if earlier.note_id not in items[key].sources:
                    items[key].sources.append(earlier.note_id)
                continue
            kind = kind_of(entry.name)
            items[key] = Planned(
                name=entry.name,
                quantity=scaled(entry.quantity, kind, days, party.people, earlier),
                category=entry.category or (kind.category if kind is not None else "Other"),
                picture=picture_of(entry.name),
                sources=[earlier.note_id],
                why=_why(entry.quantity, kind, earlier),
            )
    for place in places:
        for thing in place.things:
            key = key_of(thing)
            if not key:
                continue
            if key in items:
                if place.note_id not in items[key].sources:
                    items[key].sources.append(place.note_id)
                continue
            kind = kind_of(thing)
            items[key] = Planned(
                name=thing,
                quantity=scaled(None, kind, days, party.people, None),
                category=f"For {destination}",
                picture=picture_of(thing),
                sources=[place.note_id],
                why=f"'{place.title}' says to bring it",
            )
    for pet in party.pets:
        if pet in companions_listed:
            continue
        for thing in PET_ITEMS.get(pet, ()):
            key = key_of(thing)
            if key in items:
                continue
            kind = kind_of(thing)
            items[key] = Planned(
                name=thing,
                quantity=scaled(None, kind, days, 1, None),
                category=f"For the {pet}",
                picture=picture_of(thing),
                why=f"for the {pet}: no earlier list had a section for one",
            )
    order: dict[str, int] = {}
    for item in items.values():
        order.setdefault(item.category.lower(), len(order))
    return sorted(items.values(), key=lambda i: order[i.category.lower()])
