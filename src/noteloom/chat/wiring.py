"""What the chat needs from the app, its settings, and its stores.

The chat is a service: it never imports the composition root. It takes a ``Host`` —
anything shaped like ``noteloom.app.App`` — and reads its ``[chat]`` settings::

    [chat]
    model = "local:qwen3:14b"        # the default chat model (else [providers] default)
    system_prompt = "You are …"      # the default voice (a conversation's instructions win)
    temperature = 0.3                # defaults for the controls a conversation leaves unset
    history_bytes = 204800           # history cap sent to the model
    stale_after = 10                 # seconds without a heartbeat before a turn counts as interrupted

    [chat.tool_policies]
    update_note = "auto"             # auto | confirm | deny, per tool

    [attachments]                    # caps on the files a message carries (noteloom.attachments)
    pdf_bytes = 10000000
    per_message = 5
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from noteloom.agent.events import Budgets
from noteloom.attachments import AttachmentLimits
from noteloom.chat.attachments import ChatAttachments
from noteloom.chat.conversations import Conversations
from noteloom.chat.edits import Edits
from noteloom.chat.history import DEFAULT_HISTORY_BYTES
from noteloom.chat.records import Controls, check_controls
from noteloom.chat.sealing import ChatSeal
from noteloom.chat.transcript import Transcript
from noteloom.config import Settings
from noteloom.errors import ConfigError, InvalidInput
from noteloom.providers.registry import ProviderRegistry
from noteloom.tools import ToolContext, ToolRegistry
from noteloom.vault import Vault
from noteloom.workspace import User, Workspace

if TYPE_CHECKING:
    from noteloom.services import Services

#: Run-time setting (``Workspace.set_setting``) for the default voice; wins over the file.
SYSTEM_PROMPT_KEY = "chat.system_prompt"
#: Run-time setting: whether memory is on in a conversation that leaves it to the default
#: (``true`` unless set): memory earns its keep when it is usually on, and one setting turns
#: it off for the whole workspace.
MEMORY_DEFAULT_KEY = "chat.memory_default"


def memory_default(value: Any) -> bool:
    """The memory default from the setting's stored value (unset or not a boolean: on)."""
    return value if isinstance(value, bool) else True


class Host(Protocol):
    """The parts of the app the chat uses (``noteloom.app.App`` is one)."""

    settings: Settings
    workspace: Workspace
    registry: ToolRegistry
    services: Services

    def tool_context(self, user: User | None = None, **extra: Any) -> ToolContext: ...


@dataclass(frozen=True)
class ChatSettings:
    """The ``[chat]`` table, checked."""

    model: str | None = None
    system_prompt: str | None = None
    defaults: Controls = field(default_factory=Controls)
    history_bytes: int = DEFAULT_HISTORY_BYTES
    tool_policies: dict[str, Any] = field(default_factory=dict)
    #: How often a running turn looks for a cancel made in another process, in seconds.
    cancel_poll: float = 0.5
    #: How often a running turn proves it is alive, and when silence means it is not (a turn
    #: whose runner is provably gone is settled without waiting; see ``noteloom.runs.liveness``).
    heartbeat: float = 2.0
    stale_after: float = 10.0
    #: ``[agent]`` in noteloom.toml: the budgets a conversation leaves unset.
    budgets: Budgets = field(default_factory=Budgets)
    #: ``[attachments]`` in noteloom.toml: the caps on the files a message carries.
    attachments: AttachmentLimits = field(default_factory=AttachmentLimits)

    @classmethod
    def from_file(cls, file: dict[str, Any]) -> ChatSettings:
        table = file.get("chat", {})
        if not isinstance(table, dict):
            raise ConfigError("[chat] in noteloom.toml must be a table")
        model = table.get("model")
        prompt = table.get("system_prompt")
        history = table.get("history_bytes", DEFAULT_HISTORY_BYTES)
        policies = table.get("tool_policies", {})
        stale = table.get("stale_after", cls.stale_after)
        if model is not None and not isinstance(model, str):
            raise ConfigError("[chat] model must be an address like \"local:qwen3:14b\"")
        if prompt is not None and not isinstance(prompt, str):
            raise ConfigError("[chat] system_prompt must be text")
        if isinstance(history, bool) or not isinstance(history, int) or history < 1024:
            raise ConfigError(f"[chat] history_bytes must be a whole number of at least 1024, not {history!r}")
        if isinstance(stale, bool) or not isinstance(stale, int | float) or not 5 <= stale <= 86_400:
            raise ConfigError(f"[chat] stale_after must be a number of seconds from 5 to 86400, not {stale!r}")
        if not isinstance(policies, dict):
            raise ConfigError("[chat.tool_policies] must be a table of tool = \"auto\" | \"confirm\" | \"deny\"")
        known = ("temperature", "top_p", "max_tokens", "thinking_level")
        try:
            defaults = check_controls(Controls(**{k: table[k] for k in known if k in table}))
        except InvalidInput as exc:
            raise ConfigError(f"[chat] {exc}") from None
        section = file.get("attachments", {})
        if not isinstance(section, dict):
            raise ConfigError("[attachments] in noteloom.toml must be a table")
        return cls(model=model, system_prompt=prompt, defaults=defaults, history_bytes=history,
                   tool_policies=dict(policies), stale_after=float(stale), budgets=Budgets.from_file(file),
                   attachments=AttachmentLimits.from_settings(section))


@dataclass
class Stores:
    """The chat's tables, behind one object."""

    conversations: Conversations
    transcript: Transcript
    edits: Edits
    attachments: ChatAttachments

    @classmethod
    def open(cls, workspace: Workspace, limits: AttachmentLimits | None = None) -> Stores:
        """The stores of ``workspace``; attachments' bytes under its ``attachments/chat``."""
        conversations = Conversations(workspace.engine, ChatSeal(Vault(workspace.engine)))
        files = ChatAttachments(workspace.engine, workspace.attachments_dir / "chat", limits or AttachmentLimits())
        return cls(conversations, Transcript(workspace.engine, conversations), Edits(workspace), files)

    @property
    def seal(self) -> ChatSeal:
        return self.conversations.seal


def providers_of(host: Host) -> ProviderRegistry:
    return host.services.providers
