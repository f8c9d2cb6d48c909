"""The configured providers, by name; a model is addressed as ``name:model``.

Provider *types* (``openai``, ``anthropic``, ``echo``, ``scripted`` and any a plugin
adds) register through the ``register_providers`` hook. Named *instances* come from
``[providers.NAME]`` tables in ``noteloom.toml``::

    [providers]
    default = "local:qwen3:14b"          # used when no -m is given

    [providers.local]
    type = "openai"                      # any OpenAI-compatible /v1/chat/completions server
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "LOCAL_API_KEY"        # optional

    [providers.claude]
    type = "anthropic"

``openai`` and ``anthropic`` exist without a table when ``OPENAI_API_KEY`` /
``ANTHROPIC_API_KEY`` is set; ``echo`` always exists, and so does ``scripted``, which
plays nothing until a table names its script (``script = "PATH"``). A key in the
environment wins over ``api_key`` in the file; ``NOTELOOM_MODEL`` wins over
``[providers] default``. Instances are built on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from noteloom.errors import ConfigError
from noteloom.providers.base import Provider, ProviderConfig
from noteloom.providers.scripted import ScriptedProvider

if TYPE_CHECKING:
    import pluggy

log = logging.getLogger("noteloom.providers")

ProviderFactory = Callable[[ProviderConfig], Provider]
#: Where the built-in types look for a key when the table names no ``api_key_env``
#: (only for the vendor's own endpoint: a local server never gets the vendor's key).
VENDOR_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
OFFLINE = ("echo", "scripted")
NO_MODEL_HELP = (
    "no model is configured. Set OPENAI_API_KEY or ANTHROPIC_API_KEY, add a [providers.NAME] table "
    "to noteloom.toml, or try the offline model now with -m echo"
)


def parse_address(address: str) -> tuple[str, str | None]:
    """``"local:qwen3:14b"`` → ``("local", "qwen3:14b")``; ``"echo"`` → ``("echo", None)``."""
    name, _, model = address.strip().partition(":")
    return name, (model or None)


@dataclass(frozen=True)
class ProviderInfo:
    """What ``noteloom models`` shows about one provider. Never carries the key itself."""

    name: str
    type: str
    ready: bool
    problem: str | None = None
    local: bool | None = None
    default_model: str | None = None
    models: list[str] = field(default_factory=list)
    base_url: str | None = None
    key_env: str | None = None
    key_set: bool = False


class ProviderRegistry:
    """Named providers, built lazily from their configs."""

    def __init__(
        self,
        factories: Mapping[str, ProviderFactory],
        configs: Mapping[str, ProviderConfig],
        *,
        default: str | None = None,
        configured: tuple[str, ...] = (),
        problem: str | None = None,
    ) -> None:
        self.factories = dict(factories)
        #: A settings problem not tied to one provider, raised when the default model is needed.
        self.problem = problem
        self.configs = dict(configs)
        self.default = default
        #: Names that came from the settings file, in file order.
        self.configured = configured
        self._instances: dict[str, Provider] = {}

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self.configs, *self._instances]))

    def add(self, provider: Provider) -> None:
        """Use a ready provider under its own name (tests, a script given as a list)."""
        self._instances[provider.name] = provider

    def get(self, name: str) -> Provider:
        if name in self._instances:
            return self._instances[name]
        config = self.configs.get(name)
        if config is not None and config.problem:
            raise ConfigError(config.problem)
        if config is None:
            if name in VENDOR_KEY_ENV:
                raise ConfigError(
                    f"provider {name!r} needs an API key: set {VENDOR_KEY_ENV[name]} "
                    "(or try the offline model with -m echo)"
                )
            raise ConfigError(
                f"no provider named {name!r}; there are: {', '.join(self.names())} "
                "(`noteloom models` lists them; add a [providers.NAME] table for a new one)"
            )
        factory = self.factories.get(config.type)
        if factory is None:
            raise ConfigError(
                f"{config.where}: unknown type {config.type!r}; known types: {', '.join(sorted(self.factories))}"
            )
        provider = factory(config)
        self._instances[name] = provider
        return provider

    def resolve(self, address: str | None = None) -> tuple[Provider, str]:
        """The provider and model for ``name:model`` (or the default address)."""
        if not address and self.problem:
            raise ConfigError(self.problem)
        address = address or self.default_address()
        if not address:
            raise ConfigError(NO_MODEL_HELP)
        name, model = parse_address(address)
        provider = self.get(name)
        model = model or provider.default_model
        if not model:
            raise ConfigError(
                f"provider {name!r} has no default model: write -m {name}:MODEL, "
                f"or set default_model in [providers.{name}]"
            )
        if isinstance(provider, ScriptedProvider):
            provider.check_model(model)
        return provider, model

    def default_address(self) -> str | None:
        """``NOTELOOM_MODEL`` / ``[providers] default``, else the first configured provider
        with a default model, else Anthropic or OpenAI when their key is set. Never an
        offline model: a newcomer is told about ``echo`` instead."""
        if self.default:
            return self.default
        candidates = [n for n in self.configured if self.configs[n].type not in OFFLINE]
        candidates += [n for n in ("anthropic", "openai") if n in self.configs and n not in candidates]
        for name in candidates:
            try:
                provider = self.get(name)
            except ConfigError:
                continue
            if provider.default_model:
                return f"{name}:{provider.default_model}"
        return None

    def describe(self) -> list[ProviderInfo]:
        out: list[ProviderInfo] = []
        for name in self.names():
            config = self.configs.get(name) or ProviderConfig(name, type(self._instances[name]).__name__)
            base_url = config.options.get("base_url")
            common: dict[str, Any] = {
                "name": name,
                "type": config.type,
                "base_url": base_url if isinstance(base_url, str) else None,
                "key_env": config.api_key_env,
                "key_set": bool(config.api_key),
            }
            try:
                provider = self.get(name)
            except ConfigError as exc:
                out.append(ProviderInfo(ready=False, problem=str(exc), **common))
                continue
            out.append(ProviderInfo(ready=True, local=provider.local, default_model=provider.default_model,
                                    models=provider.models(), **common))
        return out

    async def aclose(self) -> None:
        for provider in self._instances.values():
            await provider.aclose()


def provider_types(plugins: pluggy.PluginManager) -> dict[str, ProviderFactory]:
    """Provider types registered through the ``register_providers`` hook."""
    factories: dict[str, ProviderFactory] = {}

    def register(type_name: str, factory: ProviderFactory) -> None:
        if type_name in factories:
            log.warning("provider type %r is registered twice; the second one is ignored", type_name)
            return
        factories[type_name] = factory

    plugins.hook.register_providers(register=register)
    return factories


def build_provider_registry(
    file: Mapping[str, Any],
    env: Mapping[str, str],
    factories: Mapping[str, ProviderFactory],
) -> ProviderRegistry:
    """The registry for a parsed ``noteloom.toml`` and an environment."""
    # Problems are raised when a model is used, not here: a typo in [providers]
    # must not stop `noteloom notes` from working.
    problem = None
    table = file.get("providers", {})
    if not isinstance(table, Mapping):
        problem = "[providers] in noteloom.toml must be a table of [providers.NAME] tables"
        table = {}
    default = env.get("NOTELOOM_MODEL") or table.get("default")
    if default is not None and not isinstance(default, str):
        problem = f"[providers] default must be an address like \"local:qwen3\", not {default!r}"
        default = None
    configs: dict[str, ProviderConfig] = {name: ProviderConfig(name, name) for name in OFFLINE}
    for name, vendor_env in VENDOR_KEY_ENV.items():
        if env.get(vendor_env):
            configs[name] = ProviderConfig(name, name, {}, env[vendor_env], vendor_env)
    configured: list[str] = []
    for name, options in table.items():
        if name == "default":
            continue
        try:
            configs[name] = _config(name, options, env)
        except ConfigError as exc:
            # A broken table must not stop the app from opening: it fails when used.
            configs[name] = ProviderConfig(name, "invalid", problem=str(exc))
        configured.append(name)
    return ProviderRegistry(factories, configs, default=default, configured=tuple(configured), problem=problem)


def _config(name: str, options: Any, env: Mapping[str, str]) -> ProviderConfig:
    """One ``[providers.NAME]`` table, checked, with its key looked up."""
    if not isinstance(options, Mapping):
        raise ConfigError(f"[providers.{name}] must be a table with at least a type")
    if ":" in name or not name.strip():
        raise ConfigError(f"[providers.{name}]: a provider name cannot be empty or contain ':'")
    kind = options.get("type", name if name in (*VENDOR_KEY_ENV, *OFFLINE) else None)
    if not isinstance(kind, str):
        raise ConfigError(f"[providers.{name}] needs type = \"openai\", \"anthropic\", \"echo\" or \"scripted\"")
    named_env = options.get("api_key_env")
    if named_env is not None and not isinstance(named_env, str):
        raise ConfigError(f"[providers.{name}]: api_key_env must name an environment variable")
    key_env: str | None = named_env
    if key_env is None and "base_url" not in options:
        key_env = VENDOR_KEY_ENV.get(kind)
    file_key = options.get("api_key")
    if file_key is not None and not isinstance(file_key, str):
        raise ConfigError(f"[providers.{name}]: api_key must be a string")
    api_key = (env.get(key_env) if key_env else None) or file_key
    rest = {k: v for k, v in options.items() if k not in ("type", "api_key", "api_key_env")}
    return ProviderConfig(name, kind, rest, api_key, key_env)
