"""JSON as noteloom takes it in and sends it out.

In: Python's ``json`` accepts more than JSON peers can carry: ``NaN`` and
``Infinity`` literals, numbers that overflow to infinity (``1e999``), integers of
any size, and ``"\\ud800"`` escapes that decode to lone UTF-16 surrogates, which no
UTF-8 encoder takes (SQLite, PostgreSQL and our own answers all fail on them).
:func:`find_problem` names the first such value so that each edge refuses it and
names the field. The rule is I-JSON (RFC 7493): finite numbers, integers within
±(2**53 − 1) (what every JSON client represents exactly; SQLite's signed 64-bit
integers hold them with room for arithmetic), valid Unicode — plus a nesting limit,
since nothing we take nests deeply and deep nesting costs recursion everywhere.

Out: whatever still reaches an answer (an echo, a row written by another program)
must not make it unsendable: :func:`dumps_bytes` replaces each lone surrogate with
U+FFFD and each non-finite number with ``null``, and pays for that only when the
plain encoding fails.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The largest integer an I-JSON peer (a browser's ``JSON.parse`` among them) reads exactly.
MAX_SAFE_INTEGER = 2**53 - 1
#: Deeper than this is refused (tool arguments and API bodies nest a few levels at most).
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Problem:
    """A value JSON peers cannot carry: where it is (dotted, ``""`` = the whole value) and why."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def surrogate_in(text: str) -> str | None:
    """The first lone surrogate in ``text`` as ``\\udXXX``, or ``None`` (ASCII costs nothing)."""
    if text.isascii():
        return None
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        return f"\\u{ord(text[exc.start]):04x}"
    return None


def find_problem(value: Any, path: str = "", *, forbid_nul: bool = False) -> Problem | None:
    """The first value in ``value`` that breaks I-JSON (or nests too deep), or ``None``.

    ``forbid_nul`` also refuses NUL characters in text: valid JSON, but PostgreSQL stores
    no NUL, and no note, title or query of ours holds one.
    Iterative, so that a value nested as deep as the parser allows does not overflow
    the stack here.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            bad = surrogate_in(item)
            if bad is not None:
                return Problem(where, f"the text contains a lone UTF-16 surrogate ({bad}); send valid Unicode")
            if forbid_nul and "\x00" in item:
                return Problem(where, "the text contains a NUL character (U+0000); remove it")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return Problem(where, f"{_short(item)} is out of range; integers must lie within "
                                      f"±{MAX_SAFE_INTEGER} (2**53 - 1)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                if math.isnan(item):
                    return Problem(where, "NaN is not a number JSON can carry; send a finite number")
                return Problem(where, f"{'' if item > 0 else '-'}Infinity (or a number too large, "
                                      "which overflows to it) is not a number JSON can carry; send a finite number")
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                return Problem(where, f"the value nests deeper than {MAX_DEPTH} levels")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            children: list[tuple[Any, str, int]] = []
            for key, child in pairs:
                if isinstance(key, str) and (bad := surrogate_in(key)) is not None:
                    return Problem(where, f"a key contains a lone UTF-16 surrogate ({bad}); send valid Unicode")
                children.append((child, f"{where}.{key}" if where else str(key), depth + 1))
            stack.extend(reversed(children))  # depth first, in document order
    return None


def _short(number: int) -> str:
    if abs(number) < 10**30:
        return str(number)
    # str() of a very long integer is slow, and refused past 4300 digits.
    return f"an integer of about {int(number.bit_length() * math.log10(2)) + 1} digits"


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """Compact JSON text; a non-finite number becomes ``null`` rather than invalid JSON."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=default)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                          default=default)


def dumps_bytes(value: Any) -> bytes:
    """:func:`dumps` as UTF-8, each lone surrogate replaced with U+FFFD."""
    return encodable(dumps(value)).encode()


def encodable(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (unchanged, and uncopied, when it has none)."""
    return text if surrogate_in(text) is None else _SURROGATE.sub("\ufffd", text)


def encodable_values(value: Any) -> Any:
    """``value`` (decoded JSON) with every string made :func:`encodable`: for text from
    outside that must be stored (a model's stream), where refusing is not an option."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable(k) if isinstance(k, str) else k: encodable_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [encodable_values(v) for v in value]
    return value


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
