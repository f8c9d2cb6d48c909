"""``echo``: an offline model that answers with the prompt. No key, no network, no cost."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from decimal import Decimal

from noteloom.messages import StreamEnd, StreamEvent, TextDelta, Usage, UsageUpdate
from noteloom.providers.base import TEXT_ONLY, ModelCapabilities, ModelRequest, ProviderConfig

_WORDS = re.compile(r"\S+\s*|\s+")


def rough_tokens(text: str) -> int:
    """About four characters a token: good enough for an offline model's usage."""
    return (len(text) + 3) // 4


class EchoProvider:
    """Repeats the latest user message, streamed word by word."""

    local = True
    default_model: str | None = "echo"

    def __init__(self, name: str = "echo") -> None:
        self.name = name

    @classmethod
    def from_config(cls, config: ProviderConfig) -> EchoProvider:
        return cls(config.name)

    def models(self) -> list[str]:
        return ["echo"]

    def capabilities(self, model: str) -> ModelCapabilities:
        """Text only: it repeats words, and has none to repeat from a file."""
        return TEXT_ONLY

    def cost(self, model: str, usage: Usage) -> Decimal | None:
        return Decimal(0)

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        prompt = next((m.text for m in reversed(request.messages) if m.role == "user" and m.text), "")
        answer = prompt or "(there was nothing to echo)"
        for piece in _WORDS.findall(answer):
            yield TextDelta(piece)
        seen = request.system_text + "".join(m.text for m in request.messages)
        yield UsageUpdate(Usage(input_tokens=rough_tokens(seen), output_tokens=rough_tokens(answer)))
        yield StreamEnd("end_turn")
