"""The app's services, and the background work the app owns.

The composition root (``noteloom.app.open_app``) builds them in dependency order::

    embedders ─► semantic       the index (None when semantic search is off)
                 memory_vectors the memories' vectors beside it (embedding while the indexer runs)
    providers                   the model providers (the chat, ``ask``, tools that call a model)
    tools                       each registered once the services it requires exist
    chat                        while the turn runner runs (``App.background``)
    recipes                     the recipes (saving and reading anywhere; runs where its runner runs)
    scheduler                   the recipes' scheduler, in the one process that claims scheduled work

A service that is off is ``None``. A tool names the services it needs by these names
(``ToolDef.requires``); :meth:`Services.get` is that lookup by name, and the item syntax
(``services["providers"]``) stays for callers written before the attributes.

A :class:`BackgroundService` is work that runs for a process's life (the semantic indexer,
the chat's turn runner, later the scheduler): a name and an async context manager that
starts it on entry and stops it on exit. ``App.background`` enters the ones a process runs;
nothing else starts them.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from noteloom.memory.similarity import MemoryVectors
from noteloom.providers.registry import ProviderRegistry
from noteloom.semantic.index import SemanticIndex

if TYPE_CHECKING:
    from noteloom.chat.service import ChatService
    from noteloom.recipes.scheduler import Scheduler
    from noteloom.recipes.service import RecipeService


@dataclass
class Services:
    """What the app runs with, by name and typed."""

    providers: ProviderRegistry
    semantic: SemanticIndex | None = None
    #: The chat, while its turn runner runs in this process.
    chat: ChatService | None = None
    #: The recipes: saved, listed and stopped from any process; run where ``App.background``
    #: runs their runner.
    recipes: RecipeService | None = None
    #: The recipes' scheduler, in the process that claims scheduled work.
    scheduler: Scheduler | None = None
    #: Memories as vectors for the chat's and the recipes' memory context: on with ``semantic``,
    #: embedding while the indexer runs. Part of semantic search, not a service tools require.
    memory_vectors: MemoryVectors | None = None
    #: Services plugins provide, by name (``add``).
    extra: dict[str, Any] = field(default_factory=dict)

    #: The names of the typed services.
    NAMES: ClassVar[tuple[str, ...]] = ("providers", "semantic", "chat", "recipes", "scheduler")

    def get(self, name: str) -> Any:
        """The service called ``name``, or ``None`` when it is off or unknown."""
        if name in self.NAMES:
            return getattr(self, name)
        return self.extra.get(name)

    def add(self, name: str, service: Any) -> None:
        """Add a service of a plugin under ``name`` (tools ask for it in ``requires``)."""
        if name in self.NAMES or name in self.extra:
            raise ValueError(f"a service called {name!r} exists already")
        self.extra[name] = service

    def known(self, name: str) -> bool:
        """Whether this app has a service called ``name`` (on or off)."""
        return name in self.NAMES or name in self.extra

    def on(self) -> list[str]:
        """The names of the services that are on."""
        return [n for n in (*self.NAMES, *self.extra) if self.get(n) is not None]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __getitem__(self, name: str) -> Any:
        service = self.get(name)
        if service is None:
            raise KeyError(name)
        return service

    def __setitem__(self, name: str, service: Any) -> None:
        if name in self.NAMES:
            setattr(self, name, service)
        else:
            self.extra[name] = service


@dataclass(frozen=True)
class BackgroundService:
    """Work that runs for the life of a process: ``start()`` is entered to start it and
    left to stop it (a task group it owns ends with it)."""

    name: str
    start: Callable[[], AbstractAsyncContextManager[Any]]
    #: Run only in the process that claims scheduled work (one per server, however many
    #: workers it has), not in every process that serves.
    scheduled: bool = False
