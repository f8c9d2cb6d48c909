"""The one exception tree of noteloom.

Every error that noteloom raises on purpose derives from ``NoteloomError``::

    NoteloomError
    ├── ConfigError          bad settings file, unknown provider, missing key
    ├── StorageError         the database could not be opened or migrated
    ├── WorkspaceError       a domain rule said no
    │   ├── NotFound         no such note / notebook / tag / revision / attachment
    │   ├── Conflict         the thing exists already, or is in the wrong state
    │   └── InvalidInput     a value is malformed (a date, an id, a title)
    ├── QueryError           a search query could not be parsed
    ├── EmbeddingError       an embedder failed (model missing, endpoint down, bad answer)
    ├── SectionError         a section address resolves to nothing or to several headings
    ├── ImportExportError    an import or export could not be carried out
    ├── AuthError            a missing, wrong or revoked token
    ├── ToolError            (tools.py) a tool call failed in a way the model can recover from
    │   └── ToolArgumentError    the arguments do not match the tool's schema
    ├── UnknownTool          (tools.py) no enabled tool by that name
    └── ProviderError        (providers/errors.py) an LLM call failed; ``.code`` is a stable
                             ``api_*`` code, the message is meant for users

The last three live beside the layer that raises them, so this module imports nothing.

Domain errors know nothing of HTTP or MCP: each surface maps them once
(an HTTP status, an MCP ``isError`` result, a line on stderr). Messages name
the thing (``{id!r}``) and say what to do next.
"""

from __future__ import annotations


class NoteloomError(Exception):
    """Base of every error noteloom raises on purpose."""


class ConfigError(NoteloomError):
    """The configuration is wrong; the message says which setting and how to fix it."""


class StorageError(NoteloomError):
    """The database could not be opened, migrated or written."""


class WorkspaceError(NoteloomError):
    """A rule of the workspace refused the operation."""


class NotFound(WorkspaceError):
    """The named thing does not exist (or is outside what the caller may see)."""


class Conflict(WorkspaceError):
    """The operation clashes with the current state."""


class InvalidInput(WorkspaceError):
    """A value is malformed; the message names the value and the expected form."""


class QueryError(NoteloomError):
    """A search query is malformed; the message says where and why."""


class EmbeddingError(NoteloomError):
    """An embedder could not turn text into vectors; the message says which embedder and why."""


class SectionError(NoteloomError):
    """A section address matched no heading, or several (the candidates are listed)."""


class ImportExportError(NoteloomError):
    """An import or export failed; the workspace is left as it was."""


class AuthError(NoteloomError):
    """Missing, wrong or revoked credentials."""
