"""The one exception tree of noteloom.

Every error that noteloom raises on purpose derives from ``NoteloomError``::

    NoteloomError
    ├── ConfigError          bad settings file, unknown provider, missing key
    ├── StorageError         the database could not be opened or migrated
    ├── Unavailable          a service, runner or model is not running or cannot be reached:
    │   │                    start it, or try again (``retry_after`` seconds, when waiting helps)
    │   └── EmbedderUnavailable  the embedder's endpoint or service is down (an EmbeddingError too)
    ├── WorkspaceError       a domain rule said no
    │   ├── NotFound         no such note / notebook / tag / revision / attachment
    │   ├── Forbidden        the person may see it but not do this (a read-only share; admins only)
    │   ├── Conflict         the operation clashes with the state: change the state first
    │   │   └── Busy         other work holds the thing right now: the same request may pass later
    │   └── InvalidInput     a value is malformed (a date, an id, a title); ``field`` names it
    │       └── OutboundRefused  a URL noteloom will not request (scheme, a private address, a cap);
    │                            ``address`` is the refused address, when one was
    ├── QueryError           a search query could not be parsed
    ├── EmbeddingError       an embedder failed (model missing, bad answer)
    ├── SectionError         a section address resolves to nothing or to several headings
    ├── ImportExportError    an import or export could not be carried out
    ├── AuthError            a missing, wrong or revoked token
    │   ├── Locked           the user's vault is locked: unlock it to read sealed content
    │   └── WrongPassphrase  a vault passphrase or recovery key did not open the vault
    ├── ToolError            (tools.py) a tool call failed in a way the model can recover from
    │   └── ToolArgumentError    the arguments do not match the tool's schema
    ├── UnknownTool          (tools.py) no enabled tool by that name
    └── ProviderError        (providers/errors.py) an LLM call failed; ``.code`` is a stable
                             ``api_*`` code, the message is meant for users

The last three live beside the layer that raises them, so this module imports nothing of
noteloom.

Domain errors know nothing of HTTP or MCP: each surface maps them once, in one table from
class to answer, looked up along the error's MRO (:func:`mapped`): the web's statuses
(``web/api_base.py``), what a tool's caller reads (``tools.py``; MCP answers it with
``isError``), the command line's exit codes (``cli/common.py``). A test walks this tree and
fails for a class that a surface does not map. What a surface needs travels as attributes
(``InvalidInput.field``, ``retry_after``), never in the wording: no surface reads a message.
Messages name the thing (``{id!r}``) and say what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class NoteloomError(Exception):
    """Base of every error noteloom raises on purpose."""


class ConfigError(NoteloomError):
    """The configuration is wrong; the message says which setting and how to fix it."""


class StorageError(NoteloomError):
    """The database could not be opened, migrated or written."""


class Unavailable(NoteloomError):
    """A service, runner or model is not running here or cannot be reached; the message says
    what to start. ``retry_after``: seconds after which the same request may pass, when
    waiting is what helps (``None``: something has to be started or fixed first)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), str(self), {"retry_after": self.retry_after})


class WorkspaceError(NoteloomError):
    """A rule of the workspace refused the operation."""


class NotFound(WorkspaceError):
    """The named thing does not exist (or is outside what the caller may see)."""


class Forbidden(WorkspaceError):
    """The person asking may not do this: a notebook shared with them to read only, a
    change only an admin may make. Never for what they may not see (that is ``NotFound``)."""


class Conflict(WorkspaceError):
    """The operation clashes with the current state; the message says what to change first."""


class Busy(Conflict):
    """Other work holds the thing right now (a running turn, an import, an index being
    built): the same request may pass once it is done. ``retry_after`` as for ``Unavailable``."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), str(self), {"retry_after": self.retry_after})


class InvalidInput(WorkspaceError):
    """A value is malformed; the message names the value and the expected form.

    ``field`` is the value's name as the caller gave it (``limit``, ``note_context.note_id``),
    for surfaces to point at: the web's ``field``, the command line's option. ``None`` when
    no single value is at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), str(self), {"field": self.field})

    def led_by_field(self) -> str:
        """The message, led by the field unless it starts with the field's name already
        (``"limit must be …"`` stays, ``"the query is empty"`` becomes ``"query: the query …"``)."""
        text = str(self)
        if self.field is None or text.startswith(self.field):
            return text
        return f"{self.field}: {text}"


class OutboundRefused(InvalidInput):
    """An outbound request (a webhook, a fetched page) was refused before or while it was
    sent: not http(s), credentials in the URL, a non-public address the operator did not
    allow (``address``), a body over a cap, too many redirects (``noteloom.outbound``)."""

    def __init__(self, message: str, *, field: str | None = "url", address: str | None = None) -> None:
        super().__init__(message, field=field)
        self.address = address

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), str(self), {"field": self.field, "address": self.address})


class QueryError(NoteloomError):
    """A search query is malformed; the message says where and why."""


class EmbeddingError(NoteloomError):
    """An embedder could not turn text into vectors; the message says which embedder and why."""


class EmbedderUnavailable(EmbeddingError, Unavailable):
    """The embedder's endpoint or service does not answer (down, starting, gone away)."""


class SectionError(NoteloomError):
    """A section address matched no heading, or several (the candidates are listed)."""


class ImportExportError(NoteloomError):
    """An import or export failed; the workspace is left as it was."""


class AuthError(NoteloomError):
    """Missing, wrong or revoked credentials."""


class Locked(AuthError):
    """Sealed content needs the user's unlock window, and it is closed (``noteloom.vault``)."""


class WrongPassphrase(AuthError):
    """A vault passphrase or recovery key did not open the vault (``noteloom.vault``)."""


def mapped(table: Mapping[type[BaseException], T], exc: BaseException) -> T:
    """A surface's answer to ``exc``: the entry of its class, or of the nearest ancestor along
    its MRO. Every surface's table has one for ``NoteloomError``; ``KeyError`` for an error
    from outside the tree that the table does not name either."""
    for cls in type(exc).__mro__:
        if cls in table:
            return table[cls]
    raise KeyError(type(exc).__name__)


def _rebuilt(cls: type[NoteloomError], message: str, attributes: dict[str, Any]) -> NoteloomError:
    """An error carried across processes (pickle), with the attributes its surfaces read."""
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(attributes)
    return error
