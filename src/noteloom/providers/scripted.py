"""``scripted``: an offline model that plays prepared responses, for tests and demos.

Each model call takes the next step of the script. A script is a JSON file (address
it as ``scripted:PATH``, or set ``script = "PATH"`` in a ``[providers.NAME]`` table
with ``type = "scripted"``) or a Python list handed to ``ScriptedProvider``. The file
holds a list of steps, or ``{"steps": [...], "loop": true}`` to start over at the end::

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
"""

from __future__ import annotations

import json
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
from noteloom.providers.base import ModelRequest, ProviderConfig
from noteloom.providers.echo import rough_tokens
from noteloom.providers.errors import ERROR_CODES, ErrorCode, ProviderError, provider_error
from noteloom.providers.pricing import price_of

Step = Mapping[str, Any] | Callable[[ModelRequest], Mapping[str, Any]]
STOP_REASONS: tuple[FinishReason, ...] = ("end_turn", "tool_use", "max_tokens", "refusal")


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
    ) -> None:
        self.name = name
        self.loop = loop
        self.local = local
        self.prices = dict(prices or {})
        self.script_path = script
        self.requests: list[ModelRequest] = []
        self._scripts: dict[str, Script] = {}
        self._fixed = Script(list(steps), loop) if steps is not None else None
        if steps is not None or script:
            self.default_model = "script"

    @classmethod
    def from_config(cls, config: ProviderConfig) -> ScriptedProvider:
        return cls(config.name, script=config.get_str("script"), loop=config.get_bool("loop", False),
                   prices=config.get_prices())

    def models(self) -> list[str]:
        return [self.script_path] if self.script_path else []

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        if self.prices:
            return price_of(usage, model, table=self.prices) if model in self.prices else None
        return Decimal(0) if self.local else None

    async def aclose(self) -> None:
        return None

    def _script(self, model: str) -> Script:
        if self._fixed is not None:
            return self._fixed
        path = self.script_path or model
        if path not in self._scripts:
            self._scripts[path] = load_script(Path(path), loop=self.loop)
        return self._scripts[path]

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        script = self._script(request.model)
        if script.cursor >= len(script.steps):
            if not script.loop or not script.steps:
                raise ProviderError(
                    "api_request_invalid",
                    f"the script {self.script_path or request.model!r} has no step left for call "
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
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no script file at {str(path)!r}; give -m scripted:PATH with a JSON list of steps") from None
    except ValueError as exc:
        raise ConfigError(f"script {str(path)!r} is not valid JSON: {exc}") from None
    if isinstance(data, Mapping):
        steps, loop = data.get("steps"), bool(data.get("loop", loop))
    else:
        steps = data
    if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
        raise ConfigError(f"script {str(path)!r} must hold a list of steps (JSON objects)")
    return Script(list(steps), loop)
