"""A ``query_data`` call as one ``SELECT``: filters, order, fields and limit, bound parameters only.

Every name in the statement is a field of the :class:`~noteloom.data.sources.Table` (its
columns were reflected or declared by us, never taken from the caller's text) and every
value is a bound parameter, coerced first to the field's kind. Filters::

    FIELD             equals (a list: any of; null: is empty)
    FIELD_like        contains this text, ignoring case (no wildcards: % and _ are plain text)
    FIELD_min  / FIELD_after    >=
    FIELD_max  / FIELD_before   <=
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from noteloom.data.sources import Field, Table
from noteloom.tools import ToolError
from noteloom.workspace.model import MAX_TIME_MS, iso_time, ms_of

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: The longest text value returned; longer ones are cut (and the result says so).
VALUE_MAX = 2000
#: The most values one equality filter may list.
IN_MAX = 100
OPERATORS: tuple[tuple[str, str], ...] = (
    ("_like", "like"), ("_min", "ge"), ("_after", "ge"), ("_max", "le"), ("_before", "le"),
)
FILTER_HELP = ("filters are FIELD (equals), FIELD_like (contains), FIELD_min or FIELD_after (>=), "
               "FIELD_max or FIELD_before (<=)")
_INT = re.compile(r"^[+-]?\d{1,18}$")


def unknown_field(table: Table, name: str, what: str) -> ToolError:
    fields = ", ".join(f.name for f in table.fields)
    return ToolError(f"{what} {name!r}: {table.name} has no such field; its fields are {fields}")


def build(table: Table, args: Mapping[str, Any]) -> tuple[sa.Select[Any], list[Field], int, bool]:
    """The statement for ``args``, the fields it returns, the limit and whether it was capped."""
    fields = _fields(table, args.get("fields"))
    selected = {f.name for f in fields}
    extra = [table.row_untrusted] if table.row_untrusted and table.row_untrusted not in selected else []
    q = sa.select(*(table.column(f.name).label(f.name) for f in fields),
                  *(table.column(n).label(n) for n in extra)).select_from(table.rows)
    for key, value in (args.get("filters") or {}).items():
        q = q.where(_condition(table, str(key), value))
    order = _sort(table, args.get("sort"))
    q = q.order_by(*(table.column(n).desc() if desc else table.column(n).asc() for n, desc in order))
    asked = int(args.get("limit") or DEFAULT_LIMIT)
    limit = max(1, min(asked, MAX_LIMIT))
    return q.limit(limit + 1), fields, limit, asked > MAX_LIMIT


def run(conn: Connection, table: Table, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """Run the query; its payload and whether it carries text others wrote."""
    q, fields, limit, capped = build(table, args)
    try:
        rows = conn.execute(q).mappings().all()
    except sa.exc.DBAPIError as exc:
        raise ToolError(f"the query on {table.name} failed: {_short(exc)}") from None
    more = len(rows) > limit
    rows = rows[:limit]
    cut = False
    out = []
    for r in rows:
        row: dict[str, Any] = {}
        for f in fields:
            value, was_cut = shown(f, r[f.name])
            row[f.name] = value
            cut = cut or was_cut
        out.append(row)
    untrusted = bool(rows) and (
        any(f.untrusted for f in fields)
        or (table.row_untrusted is not None and any(r[table.row_untrusted] for r in rows))
    )
    payload: dict[str, Any] = {"source": table.name, "rows": out, "count": len(out), "has_more": more,
                               "limit": limit}
    if capped:
        payload["note"] = f"limit is capped at {MAX_LIMIT}; narrow the filters to see the rest"
    if cut:
        payload["values_cut"] = f"text longer than {VALUE_MAX} characters was cut (ends with …)"
    return payload, untrusted


def _fields(table: Table, asked: Sequence[str] | None) -> list[Field]:
    if not asked:
        return list(table.fields)
    out = []
    for name in dict.fromkeys(asked):
        f = table.field(name)
        if f is None:
            raise unknown_field(table, name, "field")
        out.append(f)
    return out


def _sort(table: Table, asked: str | Sequence[str] | None) -> list[tuple[str, bool]]:
    if not asked:
        return list(table.default_sort)
    out = []
    for item in [asked] if isinstance(asked, str) else asked:
        words = item.split()
        name = words[0].lstrip("-") if words else ""
        desc = item.strip().startswith("-")
        if len(words) == 2 and words[1].lower() in ("asc", "desc"):
            desc = words[1].lower() == "desc"
        elif len(words) != 1:
            raise ToolError(f"sort {item!r}: write a field, optionally followed by asc or desc ('due desc')")
        if table.field(name) is None:
            raise unknown_field(table, name, "sort")
        out.append((name, desc))
    return out


def _condition(table: Table, key: str, value: Any) -> ColumnElement[bool]:
    field, op = table.field(key), "eq"
    if field is None:
        for suffix, name in OPERATORS:
            if key.endswith(suffix) and table.field(key[: -len(suffix)]) is not None:
                field, op = table.field(key[: -len(suffix)]), name
                break
    if field is None:
        fields = ", ".join(f.name for f in table.fields)
        raise ToolError(f"filter {key!r}: {table.name} has no such field; its fields are {fields} ({FILTER_HELP})")
    col = table.column(field.name)
    if field.kind in ("json", "binary"):
        raise ToolError(f"filter {key!r}: {field.name} is {field.kind}; it can be read but not filtered on")
    if op == "like":
        text = str(value).strip("%") if value is not None and not isinstance(value, list | dict) else None
        if not text:
            raise ToolError(f"filter {key!r}: give the text to look for")
        target = col if field.kind in ("text", "any") else sa.cast(col, sa.String)
        return target.icontains(text, autoescape=True)
    if op == "eq":
        if value is None:
            return col.is_(None)
        if isinstance(value, list):
            if not value or len(value) > IN_MAX:
                raise ToolError(f"filter {key!r}: list 1 to {IN_MAX} values")
            return col.in_([_bound(table, field, key, v) for v in value])
        equal: ColumnElement[bool] = col == _bound(table, field, key, value)
        return equal
    if value is None or isinstance(value, list | dict):
        raise ToolError(f"filter {key!r}: give one value to compare with")
    bound = _bound(table, field, key, value)
    compared: ColumnElement[bool] = col >= bound if op == "ge" else col <= bound
    return compared


def _bound(table: Table, field: Field, key: str, value: Any) -> Any:
    """``value`` as a bound parameter of ``field``'s kind; a value that does not fit is refused."""
    v = coerce(field, key, value, table.dialect)
    if not table.attached:
        return v  # our own columns carry their types
    # SQLite takes the Python value as it is; PostgreSQL binds it as the column's type.
    col_type = table.rows.c[field.name].type if table.dialect == "postgresql" else sa.types.NullType()
    return sa.literal(v, col_type)


def coerce(field: Field, key: str, value: Any, dialect: str) -> Any:
    kind = field.kind
    if isinstance(value, dict | list):
        raise ToolError(f"filter {key!r}: give a single value, not {type(value).__name__}")
    if kind == "integer":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT.match(value.strip()):
            return int(value)
        raise ToolError(f"filter {key!r}: {field.name} holds whole numbers, not {value!r}")
    if kind == "number":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return value
        try:
            return float(Decimal(str(value).strip()))
        except ArithmeticError:
            raise ToolError(f"filter {key!r}: {field.name} holds numbers, not {value!r}") from None
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise ToolError(f"filter {key!r}: {field.name} is true or false, not {value!r}")
    if kind in ("time_ms", "datetime", "date"):
        when = _parse_time(key, value)
        if kind == "time_ms":
            ms = ms_of(when)
            if not 0 <= ms <= MAX_TIME_MS:
                raise ToolError(f"filter {key!r}: {value!r} is outside 1970 … 9999")
            return ms
        if kind == "date":
            return when.date().isoformat() if dialect == "sqlite" else when.date()
        # Times compare in UTC without an offset: SQLite keeps them as text (its own form has
        # a space), PostgreSQL reads a naive value in the session's zone.
        naive = when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo is not None else when
        return naive.isoformat(sep=" ") if dialect == "sqlite" else naive
    if isinstance(value, bool) or kind == "text" or kind == "other":
        return str(value)
    return value


def _parse_time(key: str, value: Any) -> datetime:
    text = str(value).strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"filter {key!r}: {value!r} is not an ISO 8601 date; write it like 2026-12-01 or "
                        "2026-12-01T09:30:00Z") from None
    return when if when.tzinfo is not None or len(text) > 10 else when.replace(tzinfo=UTC)


def shown(field: Field, value: Any) -> tuple[Any, bool]:
    """A value as JSON shows it, and whether it was cut."""
    if value is None:
        return None, False
    if field.kind == "time_ms" and isinstance(value, int):
        return iso_time(value), False
    if field.kind == "boolean" and isinstance(value, int):
        return bool(value), False
    if isinstance(value, bool | int | float):
        return value, False
    if isinstance(value, Decimal):
        return (int(value) if value == value.to_integral_value() else float(value)), False
    if isinstance(value, datetime | date):
        return value.isoformat(), False
    if isinstance(value, bytes | memoryview):
        return f"<{len(value)} bytes>", False
    if isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, default=str)
        return (value, False) if len(text) <= VALUE_MAX else (text[:VALUE_MAX] + "…", True)
    text = str(value)
    return (text, False) if len(text) <= VALUE_MAX else (text[:VALUE_MAX] + "…", True)


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split())[:200]
