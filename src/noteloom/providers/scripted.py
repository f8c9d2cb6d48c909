"""``scripted``: an offline model that plays prepared responses, for tests and demos.

Each model call takes the next step of the script. A script is a JSON file named in
``noteloom.toml`` (``script = "PATH"`` in a ``[providers.NAME]`` table with
``type = "scripted"``; address it as ``NAME``) or a Python list handed to
``ScriptedProvider``. A model address never names a file: addresses come from API
clients too, and ``scripted:/etc/shadow`` must not make the server read that file.
The file holds a list of steps, or ``{"steps": [...], "loop": true}`` to start over
at the end::

    [
      {"text": "Let me look.", "tool_calls": [{"name": "search_notes", "arguments": {"query": "plan"}}]},
      {"thinking": "Two notes match.", "chunks": ["Found ", "two notes."], "chunk_delay": 0.05},
      {"error": "api_rate_limited"}
    ]

Step keys: ``text`` or ``chunks`` (the answer, whole or in pieces), ``thinking``,
``tool_calls`` (``name``, ``arguments`` as an object or a raw JSON string, optional
``id``), ``usage`` (token counts; estimated when absent), ``delay`` (seconds before
the first event), ``chunk_delay`` (seconds between pieces), ``error`` (an error code
raised after the pieces), ``hang`` (never finish: for cancel tests), ``stop``
(``end_turn``, ``max_tokens``, ``refusal``; ``tool_use`` is implied by tool calls).
A step may also be a function of the request returning such a dict.

What the model reads besides text is the test's choice: ``capabilities=`` (a
``ModelCapabilities``), or ``vision = true`` / ``document = true`` in its table; text-only
otherwise. ``requests`` keeps every request it was sent, so a test can see which images,
documents and tool-result blocks reached the model.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import anyio

from noteloom.errors import ConfigError
from noteloom.messages import (
    FinishReason,
    StreamEnd,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ThinkingDone,
    ThinkingPart,
    ToolCallDone,
    ToolCallPart,
    Usage,
    UsageUpdate,
    usage_from_dict,
)
from noteloom.providers.base import TEXT_ONLY, ModelCapabilities, ModelRequest, ProviderConfig
from noteloom.providers.echo import rough_tokens
from noteloom.providers.errors import ERROR_CODES, ErrorCode, ProviderError, provider_error
from noteloom.providers.pricing import price_of

Step = Mapping[str, Any] | Callable[[ModelRequest], Mapping[str, Any]]
STOP_REASONS: tuple[FinishReason, ...] = ("end_turn", "tool_use", "max_tokens", "refusal")
#: The one model a file-backed script answers to (``NAME`` alone means it too).
SCRIPT_MODEL = "script"
#: A script is a page of JSON; anything larger is a mistake (or a device such as /dev/zero).
MAX_SCRIPT_BYTES = 4 * 1024 * 1024
NO_SCRIPT_HELP = (
    "plays only a script file named in noteloom.toml: add a table [providers.NAME] with "
    'type = "scripted" and script = "PATH", then use -m NAME (a model address never names a file)'
)


@dataclass
class Script:
    """Steps and where the player is in them."""

    steps: list[Step]
    loop: bool = False
    cursor: int = 0


class ScriptedProvider:
    """Plays ``steps`` (or the file named by the model) one model call at a time.

    ``requests`` records every request it was sent, for tests to inspect.
    """

    default_model: str | None = None

    def __init__(
        self,
        name: str = "scripted",
        steps: Sequence[Step] | None = None,
        *,
        loop: bool = False,
        script: str | None = None,
        local: bool = True,
        prices: Mapping[str, Mapping[str, float]] | None = None,
        capabilities: ModelCapabilities = TEXT_ONLY,
    ) -> None:
        self.name = name
        self.model_capabilities = capabilities
        self.loop = loop
        self.local = local
        self.prices = dict(prices or {})
        self.script_path = script
        self.requests: list[ModelRequest] = []
        self._loaded: Script | None = None
        self._fixed = Script(list(steps), loop) if steps is not None else None
        if steps is not None or script:
            self.default_model = SCRIPT_MODEL

    @classmethod
    def from_config(cls, config: ProviderConfig) -> ScriptedProvider:
        script = config.get_str("script")
        if not script:
            raise ConfigError(f"the scripted model {config.name!r} {NO_SCRIPT_HELP}")
        return cls(config.name, script=script, loop=config.get_bool("loop", False), prices=config.get_prices(),
                   local=config.get_bool("local", config.get_bool("private", True)),
                   capabilities=ModelCapabilities(vision=config.get_bool("vision", False),
                                                  document=config.get_bool("document", False)))

    def models(self) -> list[str]:
        return [SCRIPT_MODEL] if self.default_model else []

    def capabilities(self, model: str) -> ModelCapabilities:
        """What the script's model reads besides text: what the test or the table chose."""
        return self.model_capabilities

    def check_model(self, model: str) -> None:
        """Refuse a model name other than the script's: it would look like a file to read."""
        if self._fixed is None and model != SCRIPT_MODEL:
            raise ConfigError(
                f"the scripted model {self.name!r} {NO_SCRIPT_HELP}; address it as {self.name!r}, "
                f"not {self.name}:{model}"
            )

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        # Written prices apply whatever its privacy (a model they do not name is then of
        # unknown price: tests of unknown costs rely on it); with none it costs nothing.
        if self.prices:
            return price_of(usage, model, table=self.prices) if model in self.prices else None
        return Decimal(0)

    async def aclose(self) -> None:
        return None

    def _script(self, model: str) -> Script:
        # ``model`` is deliberately unused: only the path from the settings file is read.
        if self._fixed is not None:
            return self._fixed
        if not self.script_path:
            raise ConfigError(f"the scripted model {self.name!r} {NO_SCRIPT_HELP}")
        if self._loaded is None:
            self._loaded = load_script(Path(self.script_path).expanduser(), loop=self.loop)
        return self._loaded

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        script = self._script(request.model)
        if script.cursor >= len(script.steps):
            if not script.loop or not script.steps:
                raise ProviderError(
                    "api_request_invalid",
                    f"the script {self.script_path or self.name!r} has no step left for call "
                    f"{script.cursor + 1}; add steps to it, or make it loop",
                    provider=self.name,
                )
            script.cursor = 0
        raw = script.steps[script.cursor]
        script.cursor += 1
        step = raw(request) if callable(raw) else raw
        async for event in play(step, request, label=f"Scripted model {self.name!r}"):
            yield event


async def play(step: Mapping[str, Any], request: ModelRequest, *, label: str) -> AsyncIterator[StreamEvent]:
    """The events of one script step."""
    delay = float(step.get("delay", 0) or 0)
    pause = float(step.get("chunk_delay", 0) or 0)
    if delay:
        await anyio.sleep(delay)
    thinking = str(step.get("thinking", "") or "")
    if thinking:
        yield ThinkingDelta(thinking)
        yield ThinkingDone(ThinkingPart(thinking, signature=step.get("signature")))
    chunks = step.get("chunks")
    pieces = [str(c) for c in chunks] if isinstance(chunks, list) else ([str(step["text"])] if step.get("text") else [])
    for i, piece in enumerate(pieces):
        if i and pause:
            await anyio.sleep(pause)
        yield TextDelta(piece)
    if step.get("hang"):
        await anyio.sleep_forever()
    error = step.get("error")
    if error:
        if error not in ERROR_CODES:
            raise ConfigError(f"script step error {error!r} is not one of: {', '.join(ERROR_CODES)}")
        raise provider_error(cast(ErrorCode, error), label, "scripted failure")
    calls = [_call(c, n) for n, c in enumerate(step.get("tool_calls") or [])]
    for call in calls:
        yield ToolCallDone(call)
    usage = step.get("usage")
    if isinstance(usage, Mapping):
        yield UsageUpdate(usage_from_dict(usage))
    else:
        seen = request.system_text + "".join(m.text for m in request.messages)
        yield UsageUpdate(Usage(rough_tokens(seen), rough_tokens("".join(pieces) + thinking) + 8 * len(calls)))
    stop = step.get("stop") or ("tool_use" if calls else "end_turn")
    if stop not in STOP_REASONS:
        raise ConfigError(f"script step stop {stop!r} is not one of: {', '.join(STOP_REASONS)}")
    yield StreamEnd(cast(FinishReason, stop))


def _call(data: Any, n: int) -> ToolCallPart:
    if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
        raise ConfigError(f"script tool call {data!r} needs a name")
    call_id = str(data.get("id") or f"call_{n + 1}")
    args = data.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return ToolCallPart(call_id, data["name"], {}, f"the arguments are not valid JSON ({exc}); send one JSON object")
    if not isinstance(args, dict):
        return ToolCallPart(call_id, data["name"], {}, f"the arguments must be a JSON object, not {type(args).__name__}")
    return ToolCallPart(call_id, data["name"], args)


def load_script(path: Path, *, loop: bool = False) -> Script:
    """Read a script file: a list of steps or ``{"steps": [...], "loop": bool}``."""
    try:
        data = json.loads(_read_script(path))
    except ValueError as exc:
        raise ConfigError(f"script {str(path)!r} is not valid JSON: {exc}") from None
    if isinstance(data, Mapping):
        steps, loop = data.get("steps"), bool(data.get("loop", loop))
    else:
        steps = data
    if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
        raise ConfigError(f"script {str(path)!r} must hold a list of steps (JSON objects)")
    return Script(list(steps), loop)


def _read_script(path: Path) -> str:
    """The text of a regular file of at most ``MAX_SCRIPT_BYTES``; a ``ConfigError`` otherwise."""
    where = f"script {str(path)!r}"
    try:
        # Without blocking (a FIFO would wait for a writer), and checked on the open file,
        # so a path swapped after a check cannot slip a device in.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ConfigError(f"{where} is not a regular file; name a JSON file in script = in noteloom.toml")
            raw = f.read(MAX_SCRIPT_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"no script file at {str(path)!r}; fix script = in noteloom.toml") from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read ({exc.strerror}); check the path in noteloom.toml") from None
    if len(raw) > MAX_SCRIPT_BYTES:
        mib = MAX_SCRIPT_BYTES // (1024 * 1024)
        raise ConfigError(f"{where} is larger than {mib} MiB; a script is a short list of steps")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not UTF-8 text: {exc}") from None
