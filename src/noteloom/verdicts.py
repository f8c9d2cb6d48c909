"""A pipeline verdict's way from the model's answer to a checked value, and the instruction
that asks for it.

The recipes' runner calls three functions per item (``noteloom.pipeline`` states the loop):

- :func:`output_instruction` renders a job's ``verdict_schema`` as the text that tells the
  model what to answer;
- :func:`extract_verdict` finds the first JSON object in the answer, past any ``<think>``
  remnant and any prose around it;
- :func:`check_verdict` checks that object against the same schema and returns it normalised.

Instruction and checker read the one schema, so they cannot disagree about what a valid
verdict is. Both failures raise :class:`InvalidVerdict`, whose message the model reads on its
one retry: one sentence per problem, each naming the field by its path (``events[0].date``).

The schemas are the JSON Schema (draft 2020-12) subset jobs use: objects with
``properties``, ``required`` and ``additionalProperties: false``; ``type`` string, integer,
number, boolean, array or object; ``enum``; ``minimum``/``maximum``;
``minLength``/``maxLength``; ``pattern`` (with a ``description`` saying the form in words);
arrays with ``minItems``/``maxItems`` and ``items``. Anything else is still checked (by
``jsonschema``) and reported in ``jsonschema``'s own words.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from noteloom.errors import InvalidInput

__all__ = ["InvalidVerdict", "check_verdict", "extract_verdict", "output_instruction"]

#: Problems told to the model at once: past a handful it is better to fix those and retry.
MAX_PROBLEMS = 8
#: Characters of a wrong value quoted back in a problem (``got "…"``).
MAX_QUOTED = 60


class InvalidVerdict(InvalidInput):
    """The model's answer holds no usable verdict; the message says why, in words meant for
    the model's one retry.

    An ``InvalidInput`` (``field``: the path of the first field at fault, ``None`` when no
    JSON object was found), so the runner answers it exactly as it answers a job's
    ``validate_verdict`` refusal, which raises ``InvalidInput``: one ``except``, one retry,
    and every surface already maps it. ``problems`` holds the sentences one by one.
    """

    def __init__(self, message: str, *, field: str | None = None, problems: Sequence[str] = ()) -> None:
        super().__init__(message, field=field)
        self.problems = tuple(problems) or (message,)

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt_verdict, (str(self), self.field, self.problems)


def _rebuilt_verdict(message: str, field: str | None, problems: tuple[str, ...]) -> InvalidVerdict:
    return InvalidVerdict(message, field=field, problems=problems)


# -- extract --------------------------------------------------------------------------------

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)


def reasoning(text: str) -> list[tuple[int, int]]:
    """Where ``text`` reasons rather than answers, as ``(start, end)`` spans: whole
    ``<think>…</think>`` blocks, everything up to a closing tag whose opening one was cut off
    (servers that strip it) when the answer's first ``{`` comes after it, and an unclosed
    ``<think>`` with all after it (an answer cut off mid-thought).

    The answer itself is read from the text as it is: a tag quoted inside the verdict's own
    strings (a red flag quoting a page's ``<think>``) stays part of it, and only a ``{`` that
    starts inside a span is never taken for the answer."""
    spans = [(m.start(), m.end()) for m in _THINK_BLOCK.finditer(text)]

    def free(i: int) -> bool:
        return not any(a <= i < b for a, b in spans)

    closes = [m for m in _THINK_CLOSE.finditer(text) if free(m.start()) and not _inside_object(text, m.start())]
    if closes:
        spans.append((0, closes[-1].end()))
    opened = next((m for m in _THINK_OPEN.finditer(text) if free(m.start())), None)
    if opened is not None:
        spans.append((opened.start(), len(text)))
    return spans


def _inside_object(text: str, at: int) -> bool:
    """Whether ``at`` lies inside a JSON object of ``text`` that starts before it (a tag the
    verdict quotes, not one that ends reasoning)."""
    known: dict[int, int | None] = {}
    pos = text.find("{")
    while 0 <= pos < at:
        end = known[pos] if pos in known else _balanced_ends(text, pos, known)
        if end is not None and end > at:
            try:
                if isinstance(json.loads(text[pos : end + 1], parse_constant=_reject_constant), dict):
                    return True
            except ValueError:
                pass
        pos = text.find("{", pos + 1)
    return False


def strip_think(text: str) -> str:
    """``text`` without what :func:`reasoning` finds."""
    spans = reasoning(text)
    return "".join(ch for i, ch in enumerate(text) if not any(a <= i < b for a, b in spans))


def _reject_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity; JSON has neither, and no verdict field wants them.
    raise ValueError(f"{name} is not a JSON value")


def _balanced_ends(text: str, start: int, known: dict[int, int | None]) -> int | None:
    """Where the ``{`` at ``start`` is closed (string-aware), or ``None``.

    Records the end of every ``{`` met outside a string on the way in ``known``: from such
    a brace on, a scan of its own would see exactly the same strings, so it need not be made.
    That keeps prose full of stray braces linear rather than quadratic.
    """
    opens: list[int] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            opens.append(i)
        elif ch == "}":
            known[opens.pop()] = i
            if not opens:
                return i
    for i in opens:
        known[i] = None
    return None


def extract_verdict(text: str) -> dict[str, Any]:
    """The first balanced ``{…}`` of ``text`` that is a JSON object and does not start in its
    reasoning (:func:`reasoning`).

    Braces inside JSON strings (and escaped quotes in them) do not count; a balanced
    candidate that is not valid JSON is passed over for the next ``{``. Raises
    :class:`InvalidVerdict` saying what was found instead.
    """
    if not isinstance(text, str):
        raise InvalidVerdict(f"the answer must be text, not {type(text).__name__}")
    spans = reasoning(text)
    if not strip_think(text).strip():
        said = "it holds only reasoning (<think>)" if text.strip() else "it is empty"
        raise InvalidVerdict(f"the answer has no JSON object: {said}; answer with the JSON object alone")
    answer = text

    def next_brace(after: int) -> int:
        i = answer.find("{", after)
        while i >= 0 and any(a <= i < b for a, b in spans):
            i = answer.find("{", i + 1)
        return i

    known: dict[int, int | None] = {}
    first_error: str | None = None
    unclosed: int | None = None
    pos = next_brace(0)
    if pos < 0:
        raise InvalidVerdict("the answer has no JSON object (no '{' in it); answer with the JSON object alone")
    while pos >= 0:
        end = known[pos] if pos in known else _balanced_ends(answer, pos, known)
        if end is None:
            unclosed = pos if unclosed is None else unclosed
        else:
            try:
                value = json.loads(answer[pos : end + 1], parse_constant=_reject_constant)
            except ValueError as e:
                if first_error is None:
                    reason = e.msg if isinstance(e, json.JSONDecodeError) else str(e)
                    first_error = f"the {{…}} at character {pos} of the answer is not valid JSON ({reason})"
            else:
                if isinstance(value, dict):
                    return value
        pos = next_brace(pos + 1)
    if first_error is not None:
        raise InvalidVerdict(f"{first_error}; answer with one valid JSON object, double-quoted names and strings")
    raise InvalidVerdict(
        f"the answer's JSON object is cut off: the '{{' at character {unclosed} is never closed; "
        "answer with the whole JSON object"
    )


# -- check ----------------------------------------------------------------------------------

_TYPE_WORDS = {
    "string": "text",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _path(parts: Sequence[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _quoted(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 1] + "…"


def _listed(values: Sequence[Any]) -> str:
    return ", ".join(v if isinstance(v, str) else json.dumps(v) for v in values)


def _type_words(t: Any) -> str:
    if isinstance(t, list):
        return " or ".join(_TYPE_WORDS.get(x, str(x)) for x in t)
    return _TYPE_WORDS.get(t, str(t))


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _problem(e: ValidationError) -> tuple[str, str]:
    """``(field path, one sentence)`` for one ``jsonschema`` error."""
    parts = list(e.absolute_path)
    where = _path(parts)
    name = f'"{where}"' if where else "the verdict"
    # Typed as maybe-unset by jsonschema; an error from iter_errors always has them.
    v, s, got = cast(Any, e.validator), cast(Any, e.validator_value), cast(Any, e.instance)
    owner: Mapping[str, Any] = e.schema if isinstance(e.schema, Mapping) else {}
    if v == "required":
        # One error per missing field; jsonschema names it only in its message, as repr.
        missing = next((k for k in s if e.message == f"{k!r} is a required property"), None)
        if missing is None:
            missing = next((k for k in s if isinstance(got, Mapping) and k not in got), "?")
        full = _path([*parts, missing])
        return full, f'"{full}" is missing: it is required'
    if v == "additionalProperties" and isinstance(got, Mapping):
        allowed = list(owner.get("properties", {}))
        extra = [k for k in got if k not in allowed]
        return _path([*parts, extra[0]]) if extra else where, (
            f"{name} has {'a field' if len(extra) == 1 else 'fields'} it does not take: "
            f"{', '.join(_quoted(k) for k in extra)} "
            f"(its fields are {_listed(allowed) or 'none'})"
        )
    if v == "type":
        return where, f"{name} must be {_type_words(s)} (got {_quoted(got)})"
    if v == "enum":
        return where, f"{name} must be one of {_listed(s)} (got {_quoted(got)})"
    if v == "const":
        return where, f"{name} must be {_quoted(s)} (got {_quoted(got)})"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        word = {"minimum": "at least", "exclusiveMinimum": "more than",
                "maximum": "at most", "exclusiveMaximum": "less than"}[v]
        return where, f"{name} must be {word} {s} (got {_quoted(got)})"
    if v in ("minLength", "maxLength"):
        word = "at least" if v == "minLength" else "at most"
        if v == "minLength" and s == 1:
            return where, f"{name} must not be empty"
        return where, f"{name} must be {word} {_plural(s, 'character')} long (got {len(got)})"
    if v in ("minItems", "maxItems"):
        word = "at least" if v == "minItems" else "at most"
        return where, f"{name} must have {word} {_plural(s, 'item')} (got {len(got)})"
    if v == "pattern":
        form = owner.get("description")
        wanted = f"be written as {form}" if form else f"match the regular expression {s}"
        return where, f"{name} must {wanted} (got {_quoted(got)})"
    return where, f"{name}: {e.message}"


def _order(e: ValidationError) -> tuple[Any, ...]:
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in e.absolute_path)


def _normalised(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` (already valid) as the job receives it: a whole number given as ``7.0``
    under ``"type": "integer"`` becomes ``7``. JSON Schema counts ``7.0`` as an integer (JSON
    has one kind of number), so it is accepted rather than spent on the retry; the job then
    stores an ``int`` and never a float into an integer column."""
    t = schema.get("type")
    if t == "integer" and isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _normalised(props.get(k, {}), x) for k, x in value.items()}
    if isinstance(value, list):
        items = schema.get("items", {})
        return [_normalised(items if isinstance(items, Mapping) else {}, x) for x in value]
    return value


def check_verdict(schema: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """``value`` checked against ``schema`` and normalised (see :func:`_normalised`), or
    :class:`InvalidVerdict` with one sentence per problem (at most :data:`MAX_PROBLEMS`)."""
    errors = sorted(Draft202012Validator(schema).iter_errors(value), key=_order)
    if not errors:
        if not isinstance(value, dict):  # a schema without "type": "object" let it through
            raise InvalidVerdict(f"the verdict must be a JSON object (got {_quoted(value)})")
        normalised: dict[str, Any] = _normalised(schema, value)
        return normalised
    # A field of the wrong type also breaks its enum, bounds …: the type is the one to say.
    wrong_type = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    problems: list[tuple[str, str]] = []
    for e in errors:
        if e.validator != "type" and tuple(e.absolute_path) in wrong_type:
            continue
        p = _problem(e)
        if p not in problems:
            problems.append(p)
    shown = [sentence for _, sentence in problems[:MAX_PROBLEMS]]
    more = len(problems) - len(shown)
    message = "; ".join(shown) + (f"; and {_plural(more, 'more problem')}" if more else "")
    raise InvalidVerdict(message, field=problems[0][0] or None, problems=shown)


# -- instruct -------------------------------------------------------------------------------


def _describe(schema: Mapping[str, Any]) -> str:
    """One field's kind, values and bounds in words (the checker's rules, said)."""
    t = schema.get("type")
    if "enum" in schema:
        text = "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    elif "const" in schema:
        text = "exactly " + json.dumps(schema["const"], ensure_ascii=False)
    elif t == "array":
        text = "a list"
    else:
        text = _type_words(t) if t is not None else "any JSON value"
    bounds = []
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if lo is not None and hi is not None:
        bounds.append(f"from {lo} to {hi}")
    elif lo is not None:
        bounds.append(f"at least {lo}")
    elif hi is not None:
        bounds.append(f"at most {hi}")
    if "exclusiveMinimum" in schema:
        bounds.append(f"more than {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema:
        bounds.append(f"less than {schema['exclusiveMaximum']}")
    if "minLength" in schema:
        bounds.append(f"at least {_plural(schema['minLength'], 'character')}")
    if "maxLength" in schema:
        bounds.append(f"at most {_plural(schema['maxLength'], 'character')}")
    if "minItems" in schema:
        bounds.append(f"at least {_plural(schema['minItems'], 'item')}")
    if "maxItems" in schema:
        bounds.append(f"at most {_plural(schema['maxItems'], 'item')}")
    if "pattern" in schema:
        form = schema.get("description")
        bounds.append(f"written as {form}" if form else f"matching the regular expression {schema['pattern']}")
    if bounds:
        text += ", " + ", ".join(bounds)
    items = schema.get("items")
    if t == "array" and isinstance(items, Mapping) and items.get("type") != "object":
        text += f"; each item: {_describe(items)}"
    if "description" in schema and "pattern" not in schema:
        text += f". {schema['description']}"
    return text


def _object_lines(schema: Mapping[str, Any], indent: str) -> list[str]:
    props: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    lines = []
    for key, sub in props.items():
        need = "required" if key in required else "optional, leave it out when it does not apply"
        lines.append(f'{indent}- "{key}" ({need}): {_describe(sub)}')
        nested = sub.get("items") if sub.get("type") == "array" else sub
        if isinstance(nested, Mapping) and nested.get("type") == "object" and "properties" in nested:
            lines.append(f"{indent}  {'Each item is' if nested is not sub else 'It is'} an object with these fields:")
            lines += _object_lines(nested, indent + "  ")
    if schema.get("additionalProperties") is False:
        lines.append(f"{indent}  No other fields." if indent else "No other fields.")
    return lines


def output_instruction(schema: Mapping[str, Any]) -> str:
    """What the model is told to answer, rendered from the very schema :func:`check_verdict`
    checks: every field with its kind, allowed values, bounds, whether it is required, and
    the fields of objects inside lists."""
    return "\n".join([
        "Respond with ONLY one JSON object: no text before or after it, no code fence. "
        "Use double quotes for names and strings. Its fields:",
        *_object_lines(schema, ""),
    ])
