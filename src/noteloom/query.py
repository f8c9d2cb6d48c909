"""The search query language: words, "phrases", prefixes, negation and filters.

A query is a list of items separated by spaces::

    word            notes containing the word (in the title or the body)
    "two words"     the words next to each other, in this order
    pre*            words starting with "pre" (also the last word of a phrase: "new yo*")
    -word           notes without it (also -"a phrase", -tag:x, -notebook:x …)
    title:word      the word in the title; body:word in the body (quoted phrases too)
    tag:name        tagged "name"; * is a wildcard; tag:* = has a tag, -tag:* = has none
    notebook:title  in that notebook or below it; several notebook: filters are ORed
    created:VALUE   created on or after VALUE; -created:VALUE before it (same for updated:, due:)
                    VALUE = YYYYMMDD, YYYYMM, YYYY, or day-N, week-N, month-N, year-N ago
    type:note|todo  iscompleted:0|1  id:NOTEID  sourceurl:URL (* wildcards)
    any:1           match notes that satisfy any of the words and filters, not all

Items are ANDed unless ``any:1`` is given; then the words and the positive
filters are ORed, while negated items still exclude and ``notebook:`` still
restricts. Filter names and words are case-insensitive; filter values may be
quoted (``notebook:"My Book"``).

``parse_query`` turns the text into a :class:`Query` or raises
:class:`~noteloom.errors.QueryError` with a message that says what is wrong
and how to write it. Words become index *tokens* here (letters and digits;
CJK runs become overlapping character pairs, as in the index), so nothing the
user types ever reaches the full-text engine as syntax.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from typing import Literal

from noteloom.db import CJK_CHARS
from noteloom.db import now_ms as _now_ms
from noteloom.errors import QueryError
from noteloom.jsonvalues import surrogate_in

__all__ = [
    "CompletedFilter",
    "DateFilter",
    "Filter",
    "IdFilter",
    "NotebookFilter",
    "Query",
    "SourceUrlFilter",
    "TagFilter",
    "TextTerm",
    "Token",
    "TypeFilter",
    "index_tokens",
    "parse_query",
]

#: Above this many items a query is refused (the engines nest one node per item).
MAX_ITEMS = 40
#: Above this many index tokens in all a query is refused.
MAX_TOKENS = 200

FILTER_NAMES = (
    "title", "body", "tag", "notebook", "created", "updated", "due",
    "type", "iscompleted", "any", "id", "sourceurl",
)
_FILTER_LIST = ", ".join(f"{n}:" for n in FILTER_NAMES)
_DATE_FORMS = "YYYYMMDD, YYYYMM, YYYY, or day-N, week-N, month-N, year-N (N units ago)"

_WORD = re.compile(r"[^\W_]+")
_CJK_SPLIT = re.compile(f"([{CJK_CHARS}]+)")
_FILTER = re.compile(r"([A-Za-z]+):")
_ABSOLUTE_DATE = re.compile(r"(\d{4})(\d{2})?(\d{2})?")
_RELATIVE_DATE = re.compile(r"(day|week|month|year)-(\d{1,5})")
_NOTE_ID = re.compile(r"[0-9a-f]{32}")

Field = Literal["all", "title", "body"]
DateField = Literal["created", "updated", "due"]


@dataclass(frozen=True)
class Token:
    """One token as the keyword index stores it; ``prefix`` matches every token it starts."""

    text: str
    prefix: bool = False
    cjk: bool = False


@dataclass(frozen=True)
class TextTerm:
    """A word or phrase to find. ``tokens`` are what the index is asked for, in order."""

    text: str
    tokens: tuple[Token, ...]
    field: Field = "all"
    phrase: bool = False
    prefix: bool = False
    negated: bool = False


@dataclass(frozen=True)
class TagFilter:
    """Notes tagged with a tag whose title matches ``pattern`` (lower case, ``*`` wildcards)."""

    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class NotebookFilter:
    """Notes in a notebook whose title matches ``pattern`` (lower case, ``*``), or below it."""

    pattern: str
    negated: bool = False


@dataclass(frozen=True)
class DateFilter:
    """``field`` on or after ``since`` (milliseconds); negated: before it."""

    field: DateField
    since: int
    negated: bool = False


@dataclass(frozen=True)
class TypeFilter:
    todo: bool
    negated: bool = False


@dataclass(frozen=True)
class CompletedFilter:
    """To-dos that are (or are not) completed."""

    completed: bool
    negated: bool = False


@dataclass(frozen=True)
class IdFilter:
    note_id: str
    negated: bool = False


@dataclass(frozen=True)
class SourceUrlFilter:
    """Notes whose source URL matches ``pattern`` (lower case, ``*`` wildcards)."""

    pattern: str
    negated: bool = False


Filter = TagFilter | NotebookFilter | DateFilter | TypeFilter | CompletedFilter | IdFilter | SourceUrlFilter


@dataclass(frozen=True)
class Query:
    """A parsed query: text terms, filters, and whether they are ORed (``any:1``)."""

    terms: tuple[TextTerm, ...] = ()
    filters: tuple[Filter, ...] = ()
    match_any: bool = False

    @property
    def positive_terms(self) -> tuple[TextTerm, ...]:
        return tuple(t for t in self.terms if not t.negated)

    @property
    def negative_terms(self) -> tuple[TextTerm, ...]:
        return tuple(t for t in self.terms if t.negated)

    @property
    def body_terms(self) -> tuple[TextTerm, ...]:
        """Positive terms that can match the body: they anchor snippets and sections."""
        return tuple(t for t in self.positive_terms if t.field != "title")


@dataclass(frozen=True)
class _Item:
    """One space-separated item of the query text, before interpretation."""

    negated: bool
    name: str | None  # filter name as typed, None for a plain word or phrase
    value: str
    quoted: bool
    star: bool  # a * right after a closing quote
    raw: str


_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def parse_query(text: str, *, now_ms: int | None = None, tz: tzinfo | None = None) -> Query:
    """Parse ``text``; relative dates count back from ``now_ms`` in ``tz`` (local time by default)."""
    if not isinstance(text, str):
        raise QueryError("the query must be text")
    bad = surrogate_in(text)
    if bad is not None:  # no database can bind it
        raise QueryError(f"the query contains a lone UTF-16 surrogate ({bad}); send valid Unicode text")
    # Control characters (NUL above all, which PostgreSQL refuses in text) separate words.
    items = _lex(unicodedata.normalize("NFC", _CONTROL_CHARS.sub(" ", text)))
    if len(items) > MAX_ITEMS:
        raise QueryError(
            f"the query has {len(items)} words and filters; use at most {MAX_ITEMS} "
            "(the most distinctive words are enough)"
        )
    now = _now_ms() if now_ms is None else now_ms
    terms: list[TextTerm] = []
    filters: list[Filter] = []
    match_any = False
    for item in items:
        if item.name is None:
            term = _term(item, "all")
            if term is not None:
                terms.append(term)
            continue
        name = item.name.lower()
        if name == "any":
            match_any = _any_value(item)
        elif name in ("title", "body"):
            term = _term(item, "title" if name == "title" else "body")
            if term is None:
                raise QueryError(
                    f"{item.raw!r} has no letters or digits to look for; write {name}:word "
                    f'or {name}:"some words"'
                )
            terms.append(term)
        else:
            filters.append(_filter(name, item, now, tz))
    if not terms and not filters:
        if any(i.name is None for i in items):
            raise QueryError(
                f"the query {text.strip()!r} has no letters or digits to search for; "
                "type a word, a \"phrase\" or a filter such as tag:name"
            )
        raise QueryError("the query is empty; type a word, a \"phrase\" or a filter such as tag:name")
    if sum(len(t.tokens) for t in terms) > MAX_TOKENS:
        raise QueryError(f"the query is too long; use fewer than {MAX_TOKENS} words")
    return Query(tuple(terms), tuple(filters), match_any)


def index_tokens(text: str, *, prefix: bool = False) -> tuple[Token, ...]:
    """The index tokens of ``text``, in order: runs of letters and digits, CJK runs as
    overlapping character pairs (a lone CJK character as a prefix of the pairs it starts).
    With ``prefix`` the last token matches as a prefix."""
    out: list[Token] = []
    for word in _WORD.findall(unicodedata.normalize("NFC", text)):
        for k, piece in enumerate(_CJK_SPLIT.split(word)):
            if not piece:
                continue
            if k % 2 == 0:
                out.append(Token(piece))
            elif len(piece) == 1:
                out.append(Token(piece, prefix=True, cjk=True))
            else:
                out.extend(Token(piece[i : i + 2], cjk=True) for i in range(len(piece) - 1))
    if prefix and out:
        out[-1] = Token(out[-1].text, prefix=True, cjk=out[-1].cjk)
    return tuple(out)


# -- lexing -----------------------------------------------------------------------------


def _lex(text: str) -> list[_Item]:
    items: list[_Item] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        start = i
        negated = False
        if text[i] == "-" and i + 1 < n and not text[i + 1].isspace():
            negated = True
            i += 1
        name: str | None = None
        m = _FILTER.match(text, i)
        if m:
            followed = m.end() < n and not text[m.end()].isspace()
            # A known filter is a filter even without a value (that is an error, said later);
            # an unknown "word:" alone or a URL ("https://…") is just text.
            if m.group(1).lower() in FILTER_NAMES or (followed and not text.startswith("//", m.end())):
                name = m.group(1)
                i = m.end()
        if i < n and text[i] == '"':
            close = text.find('"', i + 1)
            if close < 0:
                raise QueryError(
                    f"the quote opened at character {i + 1} is never closed; close it "
                    '(write "two words") or leave the quote out'
                )
            value = text[i + 1 : close]
            i = close + 1
            star = i < n and text[i] == "*"
            if star:
                i += 1
            items.append(_Item(negated, name, value, True, star, text[start:i]))
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] != '"':
            j += 1
        value = text[i:j]
        i = j
        items.append(_Item(negated, name, value, False, False, text[start:i]))
    return items


# -- interpretation ---------------------------------------------------------------------


def _term(item: _Item, field: Field) -> TextTerm | None:
    value = item.value
    prefix = item.star
    if value.endswith("*"):
        prefix = True
        value = value.rstrip("*")
    tokens = index_tokens(value, prefix=prefix)
    if not tokens:
        return None
    return TextTerm(
        text=value,
        tokens=tokens,
        field=field,
        phrase=item.quoted or len(tokens) > 1,
        prefix=prefix,
        negated=item.negated,
    )


def _any_value(item: _Item) -> bool:
    value = item.value.strip()
    if item.negated:
        raise QueryError(f"{item.raw!r}: any: cannot be negated; write any:1 or any:0")
    if value not in ("0", "1"):
        raise QueryError(f"{item.raw!r}: any: takes 1 (match any item) or 0 (match all items)")
    return value == "1"


def _filter(name: str, item: _Item, now: int, tz: tzinfo | None) -> Filter:
    value = item.value.strip()
    neg = item.negated
    if name not in FILTER_NAMES:
        raise QueryError(
            f"unknown filter {item.name}: in {item.raw!r}; the filters are {_FILTER_LIST}. "
            f'To search for the text itself, put it in quotes: "{item.name}:{item.value}"'
        )
    if not value:
        raise QueryError(f"{item.raw!r}: the filter {name}: needs a value, e.g. {_example(name)}")
    if name == "tag":
        return TagFilter(_pattern(value), neg)
    if name == "notebook":
        return NotebookFilter(_pattern(value), neg)
    if name == "sourceurl":
        return SourceUrlFilter(_pattern(value), neg)
    if name in ("created", "updated", "due"):
        field: DateField = "created" if name == "created" else "updated" if name == "updated" else "due"
        return DateFilter(field, _date_ms(name, value, now, tz), neg)
    if name == "type":
        kind = value.lower()
        if kind not in ("note", "todo"):
            raise QueryError(f"{item.raw!r}: type: takes note or todo")
        return TypeFilter(kind == "todo", neg)
    if name == "iscompleted":
        if value not in ("0", "1"):
            raise QueryError(f"{item.raw!r}: iscompleted: takes 1 (completed to-dos) or 0 (open to-dos)")
        return CompletedFilter(value == "1", neg)
    if name == "id":
        note_id = value.lower()
        if not _NOTE_ID.fullmatch(note_id):
            raise QueryError(f"{item.raw!r}: id: takes a note id (32 hexadecimal characters)")
        return IdFilter(note_id, neg)
    raise AssertionError(f"filter {name!r} is listed but not handled")  # pragma: no cover


def _example(name: str) -> str:
    return {
        "tag": "tag:recipes or tag:\"to read\"",
        "notebook": 'notebook:Work or notebook:"My Book"',
        "sourceurl": "sourceurl:*example.org*",
        "created": "created:20240131 or created:day-7",
        "updated": "updated:202401 or updated:week-2",
        "due": "due:2024 or -due:day-0",
        "type": "type:todo",
        "iscompleted": "iscompleted:1",
        "id": "id:0123456789abcdef0123456789abcdef",
    }.get(name, f"{name}:word")


def _pattern(value: str) -> str:
    """A filter value as a lower-case pattern; whitespace runs collapse to one space."""
    return " ".join(value.lower().split())


def _date_ms(name: str, value: str, now: int, tz: tzinfo | None) -> int:
    bad = f"{name}:{value} is not a date; {name}: takes {_DATE_FORMS}"
    try:
        m = _ABSOLUTE_DATE.fullmatch(value)
        if m:
            year = int(m.group(1))
            month = int(m.group(2) or 1)
            day = int(m.group(3) or 1)
            return _midnight_ms(date(year, month, day), tz)
        m = _RELATIVE_DATE.fullmatch(value.lower())
        if m:
            return _midnight_ms(_relative_day(m.group(1), int(m.group(2)), now, tz), tz)
    except (ValueError, OverflowError, OSError) as exc:
        raise QueryError(bad) from exc
    raise QueryError(bad)


def _today(now: int, tz: tzinfo | None) -> date:
    moment = datetime.fromtimestamp(now / 1000, tz) if tz else datetime.fromtimestamp(now / 1000)
    return moment.date()


def _relative_day(unit: str, count: int, now: int, tz: tzinfo | None) -> date:
    """The first day of the ``unit`` that lies ``count`` units before the current one."""
    today = _today(now, tz)
    if unit == "day":
        return today - timedelta(days=count)
    if unit == "week":  # weeks start on Monday
        return today - timedelta(days=today.weekday() + 7 * count)
    if unit == "month":
        months = today.year * 12 + today.month - 1 - count
        return date(months // 12, months % 12 + 1, 1)
    return date(today.year - count, 1, 1)


def _midnight_ms(day: date, tz: tzinfo | None) -> int:
    """The start of ``day`` in ``tz`` (local time when None), in milliseconds."""
    start = datetime(day.year, day.month, day.day, tzinfo=tz)
    return int(start.timestamp() * 1000)
