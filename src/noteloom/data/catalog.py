"""The data sources a user opted in, from ``[data]`` in ``noteloom.toml``, and what one call may read.

::

    [data]
    workspace = ["notes", "todos", "tags", "notebooks", "recipes", "recipe_runs", "conversations"]

    [data.sources.crm]                       # an attached database, opened read-only
    url = "sqlite:////home/me/crm.db"        # or postgresql://user@host/db
    [data.sources.crm.tables.customers]      # each table opted in one by one
    description = "Customers: name, city, signup date"
    exclude = ["internal_notes"]             # never shown, besides credential-like columns
    untrusted = ["bio"]                      # text others wrote: a result with it is fenced

Defaults deny: nothing is readable until named here. A table's source name is
``DATABASE.TABLE`` (``crm.customers``). A call's allowlist (``ToolContext.data_sources``:
a chat's or a recipe's) narrows the sources further; it may name a whole database
(``crm``). A source outside it reads exactly like one that does not exist.

Each call reads as the person it acts for: the workspace's sources hold only the rows of
notebooks they may see (their own chats and recipes), and the attached databases, which the
owner configured on their own machine, exist only for calls acting for the owner.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import Connection

from noteloom.data import query as q
from noteloom.data.sources import WORKSPACE, AttachedDatabase, AttachedTable, Table
from noteloom.errors import ConfigError
from noteloom.tools import ToolContext, ToolError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")
#: The longest description the catalog line carries per source.
DESCRIPTION_MAX = 200


def missing(name: str) -> str:
    """The one message for a source that does not exist, is not opted in or not allowed here."""
    return f"no data source is called {name!r}; describe_data lists the ones you can read"


class DataCatalog:
    """The opted-in sources; built once by the composition root from the parsed settings file."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        section = settings.get("data", {})
        if not isinstance(section, Mapping):
            raise ConfigError("[data] in noteloom.toml must be a table")
        unknown = set(section) - {"workspace", "sources"}
        if unknown:
            raise ConfigError(f"[data] has no setting {sorted(unknown)[0]!r}; it takes workspace and sources")
        chosen = section.get("workspace", [])
        if not isinstance(chosen, list) or not all(isinstance(n, str) for n in chosen):
            raise ConfigError("[data] workspace must be a list of names, like [\"notes\", \"todos\"]")
        for n in chosen:
            if n not in WORKSPACE:
                raise ConfigError(f"[data] workspace: {n!r} is not one of the workspace's sources "
                                  f"({', '.join(WORKSPACE)})")
        self.workspace: tuple[str, ...] = tuple(dict.fromkeys(chosen))
        self.databases: dict[str, AttachedDatabase] = {}
        self.tables: dict[str, AttachedTable] = {}
        sources = section.get("sources", {})
        if not isinstance(sources, Mapping):
            raise ConfigError("[data.sources] must be a table of databases")
        for db_name, spec in sources.items():
            self._add_database(str(db_name), spec)

    def _add_database(self, name: str, spec: Any) -> None:
        key = f"[data.sources.{name}]"
        if not _NAME.match(name):
            raise ConfigError(f"{key}: a source's name is letters, digits and _, starting with a letter")
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{key} must be a table with url and tables")
        unknown = set(spec) - {"url", "tables"}
        if unknown:
            raise ConfigError(f"{key} has no setting {sorted(unknown)[0]!r}; it takes url and tables")
        url = spec.get("url")
        if not isinstance(url, str) or "://" not in url:
            raise ConfigError(f"{key} url must be a database URL (sqlite:////path/to.db or postgresql://…)")
        self.databases[name] = AttachedDatabase(name, url, f"{key} url")
        tables = spec.get("tables", {})
        if not isinstance(tables, Mapping) or not tables:
            raise ConfigError(f"{key}: opt its tables in one by one under [data.sources.{name}.tables.TABLE]")
        for table, tspec in tables.items():
            self._add_table(name, str(table), tspec)

    def _add_table(self, database: str, table: str, spec: Any) -> None:
        key = f"[data.sources.{database}.tables.{table}]"
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{key} must be a table with a description")
        unknown = set(spec) - {"description", "exclude", "untrusted"}
        if unknown:
            raise ConfigError(f"{key} has no setting {sorted(unknown)[0]!r}; it takes description, exclude, untrusted")
        description = spec.get("description")
        if not isinstance(description, str) or not description.strip():
            raise ConfigError(f"{key} description: say in one line what the table holds")
        lists: dict[str, frozenset[str]] = {}
        for what in ("exclude", "untrusted"):
            value = spec.get(what, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{key} {what} must be a list of column names")
            lists[what] = frozenset(value)
        spec_ = AttachedTable(database, table, " ".join(description.split()), lists["exclude"], lists["untrusted"])
        self.tables[spec_.name] = spec_

    # --- what a call may see ---------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every opted-in source, workspace first."""
        return [*self.workspace, *self.tables]

    def description(self, name: str) -> str:
        return WORKSPACE[name].description if name in WORKSPACE else self.tables[name].description

    def allowed(self, ctx: ToolContext) -> list[str]:
        """The sources this call may read: opted in, and in its allowlist when it has one."""
        allow = ctx.data_sources
        names = self.names() if _for_owner(ctx) else list(self.workspace)
        if allow is None:
            return names
        return [n for n in names if n in allow or (n in self.tables and self.tables[n].database in allow)]

    @contextmanager
    def open(self, ctx: ToolContext, name: str) -> Iterator[tuple[Table, Connection]]:
        """Source ``name`` as this call sees it, and the read-only transaction to read it in."""
        if name not in self.allowed(ctx):
            raise ToolError(missing(name))
        if name in WORKSPACE:
            with ctx.workspace.read() as conn:
                yield WORKSPACE[name].table(ctx, conn), conn
            return
        spec = self.tables[name]
        database = self.databases[spec.database]
        with database.connect() as conn:
            yield database.table(conn, spec), conn

    # --- the tools' work (blocking: run in a worker thread) ------------------------------------------

    def describe(self, ctx: ToolContext, names: Sequence[str] | None) -> dict[str, Any]:
        """The catalog (no names), or each named source's fields."""
        allowed = self.allowed(ctx)
        if not names:
            out: dict[str, Any] = {"sources": [{"name": n, "description": self.description(n)} for n in allowed]}
            if not allowed:
                out["message"] = ("No data sources are opted in for you here; the user lists them under [data] in "
                                  "noteloom.toml (and a chat's or recipe's data sources).")
            return out
        described, not_found = [], []
        for name in dict.fromkeys(names):
            if name not in allowed:
                not_found.append(name)
                continue
            with self.open(ctx, name) as (table, _conn):
                described.append({
                    "name": table.name,
                    "description": table.description,
                    "fields": [{"name": f.name, "type": _TYPE_NAMES[f.kind], **({"untrusted": True} if f.untrusted else {})}
                               for f in table.fields],
                    **({"owner": "only your own rows"} if table.owner_scoped else {}),
                })
        out = {"sources": described, "filters": q.FILTER_HELP + "; times in ISO 8601",
               "limit": f"default {q.DEFAULT_LIMIT}, at most {q.MAX_LIMIT}"}
        if not_found:
            out["not_found"] = not_found
            out["message"] = missing(not_found[0]) if len(not_found) == 1 else (
                f"no data sources are called {', '.join(repr(n) for n in not_found)}; "
                "describe_data without names lists the ones you can read")
        return out

    def query(self, ctx: ToolContext, args: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Rows of one source; the payload and whether it carries text others wrote."""
        with self.open(ctx, str(args["source"])) as (table, conn):
            return q.run(conn, table, args)


def _for_owner(ctx: ToolContext) -> bool:
    """Whether the call acts for the workspace's owner (no user: its own command line)."""
    return ctx.user is None or ctx.user.role == "owner"


_TYPE_NAMES = {"text": "string", "integer": "integer", "number": "number", "boolean": "boolean",
               "datetime": "date-time (ISO 8601)", "date": "date (ISO 8601)", "time_ms": "date-time (ISO 8601)",
               "json": "object", "binary": "bytes (shown as a size)", "any": "any", "other": "string"}


def catalog_line(ctx: ToolContext) -> str:
    """One line for a system prompt naming the sources this call may read ("" when none): the
    schema is not in it, ``describe_data`` gives it on demand."""
    catalog = ctx.services.get("data")
    if not isinstance(catalog, DataCatalog):
        return ""
    names = catalog.allowed(ctx)
    if not names:
        return ""
    listed = "; ".join(f"{n} ({_clip(catalog.description(n))})" for n in names)
    return f"Data you can read with query_data (call describe_data for a source's fields first): {listed}."


def _clip(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DESCRIPTION_MAX else flat[: DESCRIPTION_MAX - 1] + "…"
