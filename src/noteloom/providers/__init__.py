"""LLM providers behind one small protocol, addressed as ``provider:model``.

``Provider`` (in ``base``) is the protocol; ``ProviderRegistry`` finds one by name.
Adapters: ``openai_compat`` (OpenAI and every compatible server), ``anthropic``,
and two offline ones that need no key, ``echo`` and ``scripted``; each is a
``ProviderType`` registered through the ``register_providers`` hook. Failures are
``ProviderError`` with a stable ``code``. The SDKs are imported on first use only. What a
model reads besides text is its provider's optional ``capabilities(model)`` answer
(``ModelCapabilities``; ``capabilities_of`` reads it, text-only without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from noteloom.providers.base import (
    TEXT_ONLY,
    THINKING_LEVELS,
    ModelCapabilities,
    ModelRequest,
    Provider,
    ProviderConfig,
    SystemBlock,
    ThinkingLevel,
    Timeouts,
    ToolSpec,
    capabilities_of,
)
from noteloom.providers.errors import ERROR_CODES, ErrorCode, ProviderError
from noteloom.providers.registry import (
    MODEL_CAPABILITY_SETTINGS,
    NO_MODEL_HELP,
    ProviderFactory,
    ProviderInfo,
    ProviderRegistry,
    ProviderSetting,
    ProviderType,
    build_provider_registry,
    parse_address,
    provider_types,
)

if TYPE_CHECKING:
    import pluggy

__all__ = [
    "ERROR_CODES",
    "MODEL_CAPABILITY_SETTINGS",
    "NO_MODEL_HELP",
    "TEXT_ONLY",
    "THINKING_LEVELS",
    "ErrorCode",
    "ModelCapabilities",
    "ModelRequest",
    "Provider",
    "ProviderConfig",
    "ProviderError",
    "ProviderFactory",
    "ProviderInfo",
    "ProviderRegistry",
    "ProviderSetting",
    "ProviderType",
    "SystemBlock",
    "ThinkingLevel",
    "Timeouts",
    "ToolSpec",
    "build_provider_registry",
    "capabilities_of",
    "parse_address",
    "provider_registry",
    "provider_types",
]


def provider_registry(file: Mapping[str, Any], env: Mapping[str, str], plugins: pluggy.PluginManager) -> ProviderRegistry:
    """The registry the app uses: types from the plugin hook, instances from the settings file
    (``Settings.file``) and the environment."""
    return build_provider_registry(file, env, provider_types(plugins))
