"""The configured providers, by name; a model is addressed as ``name:model``.

Provider *types* (``openai``, ``anthropic``, ``echo``, ``scripted`` and any a plugin
adds) register through the ``register_providers`` hook, each as a :class:`ProviderType`:
its name, its factory, the environment variable of its vendor's API key, its settings, and
whether it is an offline model. Nothing here knows any type by name. Named *instances*
come from ``[providers.NAME]`` tables in ``noteloom.toml``::

    [providers]
    default = "local:qwen3:14b"          # used when no -m is given

    [providers.local]
    type = "openai"                      # any OpenAI-compatible /v1/chat/completions server
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "LOCAL_API_KEY"        # optional

    [providers.local.models."llava:13b"]   # a model of its own: what it reads besides text
    vision = true                         # images; document = true: whole PDFs

    [providers.claude]
    type = "anthropic"

A type with a key variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``) exists as a provider
of its own name without a table when the variable is set; an offline type (``echo``,
``scripted``, which plays nothing until a table names its script) always does. A table
named like a type needs no ``type``. A key in the environment wins over ``api_key`` in the
file; ``NOTELOOM_MODEL`` wins over ``[providers] default``. A table may hold only the
settings its type declares (and ``type``, ``api_key``, ``api_key_env``), of their types:
anything else is a problem raised when the provider is used. Instances are built on first
use.

What a model reads besides text (``ModelCapabilities``) is its provider's answer to
``capabilities(model)``: built-in knowledge of the vendor's models, overridden key by key by
the model's own table (``models`` written as a table of tables, whose keys are then the
model names ``noteloom models`` lists). A model nobody declared is text-only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from noteloom.errors import ConfigError
from noteloom.providers.base import (
    ModelCapabilities,
    Provider,
    ProviderConfig,
    capabilities_of,
    is_private,
)

if TYPE_CHECKING:
    import pluggy

log = logging.getLogger("noteloom.providers")

ProviderFactory = Callable[[ProviderConfig], Provider]
#: What the settings file says when no model is configured, with the built-in types (the
#: registry words it from the types it has: :meth:`ProviderRegistry.no_model_help`).
NO_MODEL_HELP = (
    "no model is configured. Set OPENAI_API_KEY or ANTHROPIC_API_KEY, add a [providers.NAME] table "
    "to noteloom.toml, or try the offline model now with -m echo"
)
#: Settings every table may hold, whatever its type: read by the registry itself.
COMMON_SETTINGS = ("type", "api_key", "api_key_env")
#: The Python types a setting may have, as a settings file writes them.
_KIND_NAMES: dict[type, str] = {
    str: "a string", int: "a whole number", float: "a number", bool: "true or false",
    list: "a list", dict: "a table",
}


@dataclass(frozen=True)
class ProviderSetting:
    """One setting a provider type reads from its ``[providers.NAME]`` table."""

    name: str
    #: ``str``, ``int``, ``float`` (an integer is accepted), ``bool``, ``list`` or ``dict`` (a table).
    type: type
    #: What the type does without it; ``None``: nothing, or a default that depends on others.
    default: Any = None
    description: str = ""
    #: For a ``list`` of names (``models``): the settings each name may carry, written as a
    #: table of tables instead of the list (``[providers.NAME.models."MODEL"]`` holding
    #: ``vision = true``). Each inner table is checked like the outer one.
    entries: tuple[ProviderSetting, ...] = ()

    def __post_init__(self) -> None:
        if self.type not in _KIND_NAMES:
            raise TypeError(f"setting {self.name!r}: its type must be one of str, int, float, bool, list, dict")
        if self.entries and self.type is not list:
            raise TypeError(f"setting {self.name!r}: only a list of names can carry settings per name")

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this setting, or ``None``."""
        if self.entries:
            if isinstance(value, Mapping):
                return self._entries_problem(value)
            if not isinstance(value, list):
                return f"{self.name} must be a list of names or a table of tables, not {value!r}"
            return None
        if self.type is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif self.type is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.type is dict:
            ok = isinstance(value, Mapping)
        else:
            ok = isinstance(value, self.type)
        return None if ok else f"{self.name} must be {_KIND_NAMES[self.type]}, not {value!r}"

    def _entries_problem(self, tables: Mapping[str, Any]) -> str | None:
        known = ", ".join(s.name for s in self.entries)
        for name, table in tables.items():
            # As the settings file writes the table's header, so the message points at it.
            where = f"{self.name}.{json.dumps(name, ensure_ascii=False)}"
            if not isinstance(table, Mapping):
                return f"{where} must be a table of settings ({known}), not {table!r}"
            for key, value in table.items():
                setting = next((s for s in self.entries if s.name == key), None)
                if setting is None:
                    return f"{where} has no setting {key!r}; it takes {known}"
                problem = setting.problem(value)
                if problem is not None:
                    return f"{where}: {problem}"
        return None


#: What a model's own table may declare (``[providers.NAME.models."MODEL"]``): the kinds of
#: file it reads besides text. A type offers them as its ``models`` setting's ``entries``;
#: ``ProviderConfig.declared_capabilities`` reads them.
MODEL_CAPABILITY_SETTINGS = (
    ProviderSetting("vision", bool, None, "the model reads images (PNG, JPEG, GIF, WebP)"),
    ProviderSetting("document", bool, None, "the model reads whole PDFs natively"),
)


@dataclass(frozen=True)
class ProviderType:
    """A kind of provider a ``[providers.NAME]`` table can name with ``type = "NAME"``.

    noteloom's own types register through the same hook as a plugin's
    (``noteloom.default_plugins.providers``), and nothing in the registry knows them by name.
    """

    name: str
    #: Builds the provider of one table (``config.options`` holds its settings, with the
    #: declared defaults filled in; ``config.api_key`` the key found). Raise ``ConfigError``
    #: for a setting that is wrong in a way its type cannot say.
    factory: ProviderFactory
    description: str = ""
    #: The environment variable that holds the vendor's API key. Set, it makes a provider of
    #: the type's own name exist without a table, and it is where a table's key is looked
    #: for when the table names neither ``api_key_env`` nor ``base_url`` (a server of your
    #: own never receives the vendor's key).
    key_env: str | None = None
    #: Everything a table of this type may hold besides ``type``, ``api_key``, ``api_key_env``.
    settings: tuple[ProviderSetting, ...] = ()
    #: An offline model (needs no key, talks to no one): a provider of the type's own name
    #: always exists, it is offered to newcomers, and it is never the default model.
    offline: bool = False

    def __post_init__(self) -> None:
        if not self.name or ":" in self.name or not self.name.strip():
            raise ValueError(f"a provider type's name cannot be empty or contain ':', not {self.name!r}")
        names = [s.name for s in self.settings]
        clash = sorted({n for n in names if names.count(n) > 1 or n in COMMON_SETTINGS})
        if clash:
            raise ValueError(f"provider type {self.name!r}: settings {clash} are declared twice or are the registry's own")

    def setting(self, name: str) -> ProviderSetting | None:
        return next((s for s in self.settings if s.name == name), None)

    def checked_options(self, where: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` of a table, each checked against its setting, with the defaults filled
        in; ``ConfigError`` for an unknown setting or a value of the wrong type."""
        out: dict[str, Any] = {s.name: s.default for s in self.settings if s.default is not None}
        for key, value in options.items():
            setting = self.setting(key)
            if setting is None:
                known = ", ".join([*COMMON_SETTINGS, *(s.name for s in self.settings)])
                raise ConfigError(f"{where}: {self.name} has no setting {key!r}; it takes {known}")
            problem = setting.problem(value)
            if problem is not None:
                raise ConfigError(f"{where}: {problem}")
            out[key] = value
        return out


@runtime_checkable
class ChecksModel(Protocol):
    """A provider that refuses some model names before any call (the scripted model's name
    must not look like a file to read)."""

    def check_model(self, model: str) -> None: ...


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
    #: Traffic stays private (``is_private``); ``None`` when the provider cannot be built.
    local: bool | None = None
    default_model: str | None = None
    models: list[str] = field(default_factory=list)
    base_url: str | None = None
    key_env: str | None = None
    key_set: bool = False

    @property
    def private(self) -> bool | None:
        """Traffic to it stays private: ``local``'s answer under its clearer name."""
        return self.local


class ProviderRegistry:
    """Named providers, built lazily from their configs."""

    def __init__(
        self,
        types: Mapping[str, ProviderType],
        configs: Mapping[str, ProviderConfig],
        *,
        default: str | None = None,
        configured: tuple[str, ...] = (),
        problem: str | None = None,
    ) -> None:
        #: The provider types, in the order they were registered.
        self.types = dict(types)
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
            kind = self.types.get(name)
            if kind is not None and kind.key_env:
                raise ConfigError(f"provider {name!r} needs an API key: set {kind.key_env}{self._offline_hint()}")
            raise ConfigError(
                f"no provider named {name!r}; there are: {', '.join(self.names())} "
                "(`noteloom models` lists them; add a [providers.NAME] table for a new one)"
            )
        kind = self.types.get(config.type)
        if kind is None:
            raise ConfigError(
                f"{config.where}: unknown type {config.type!r}; known types: {', '.join(sorted(self.types))}"
            )
        provider = kind.factory(config)
        self._instances[name] = provider
        return provider

    def resolve(self, address: str | None = None) -> tuple[Provider, str]:
        """The provider and model for ``name:model`` (or the default address)."""
        if not address and self.problem:
            raise ConfigError(self.problem)
        address = address or self.default_address()
        if not address:
            raise ConfigError(self.no_model_help())
        name, model = parse_address(address)
        provider = self.get(name)
        model = model or provider.default_model
        if not model:
            raise ConfigError(
                f"provider {name!r} has no default model: write -m {name}:MODEL, "
                f"or set default_model in [providers.{name}]"
            )
        if isinstance(provider, ChecksModel):
            provider.check_model(model)
        return provider, model

    def capabilities(self, model_ref: str | None = None) -> ModelCapabilities:
        """What kinds of file the model at ``model_ref`` (``name:model``, or the default model
        when empty) reads besides text, as its provider declares them: text-only when it
        declares nothing. ``ConfigError`` as :meth:`resolve` raises it."""
        provider, model = self.resolve(model_ref)
        return capabilities_of(provider, model)

    def no_model_help(self) -> str:
        """What to do when no model is configured, from the types there are."""
        keys = [t.key_env for t in self.types.values() if t.key_env]
        ways = [f"Set {' or '.join(keys)}"] if keys else []
        ways.append("add a [providers.NAME] table to noteloom.toml")
        offline = self._offline()
        if offline:
            ways.append(f"try the offline model now with -m {offline}")
        return "no model is configured. " + ", ".join(ways[:-1]) + (", or " if len(ways) > 1 else "") + ways[-1]

    def _offline(self) -> str | None:
        return next((t.name for t in self.types.values() if t.offline and t.name in self.configs), None)

    def _offline_hint(self) -> str:
        offline = self._offline()
        return f" (or try the offline model with -m {offline})" if offline else ""

    def default_address(self) -> str | None:
        """``NOTELOOM_MODEL`` / ``[providers] default``, else the first configured provider
        with a default model, else a provider that exists through its type's key variable
        (in the order the types were registered: a plugin's before noteloom's own, Anthropic
        before OpenAI). Never an offline model: a newcomer is told about it instead."""
        if self.default:
            return self.default
        offline = {t.name for t in self.types.values() if t.offline}
        candidates = [n for n in self.configured if self.configs[n].type not in offline]
        candidates += [
            t.name for t in self.types.values()
            if t.key_env and t.name in self.configs and t.name not in candidates and not t.offline
        ]
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
            out.append(ProviderInfo(ready=True, local=is_private(provider), default_model=provider.default_model,
                                    models=provider.models(), **common))
        return out

    async def aclose(self) -> None:
        for provider in self._instances.values():
            await provider.aclose()


def provider_types(plugins: pluggy.PluginManager) -> dict[str, ProviderType]:
    """Provider types registered through the ``register_providers`` hook, in the order the
    hook gave them (the plugins registered last first, so a plugin's type may replace one of
    noteloom's own of the same name)."""
    types: dict[str, ProviderType] = {}

    def register(provider_type: ProviderType, *rest: object) -> None:
        if not isinstance(provider_type, ProviderType) or rest:
            raise TypeError(
                "register_providers: call register(ProviderType(name, factory, ...)) once per type, "
                f"not register({provider_type!r}, ...)"
            )
        if provider_type.name in types:
            # The hook runs the plugins registered last first: theirs replaces the earlier one.
            log.warning("provider type %r is registered twice; the plugin loaded later replaces the other",
                        provider_type.name)
            return
        types[provider_type.name] = provider_type

    plugins.hook.register_providers(register=register)
    return types


def build_provider_registry(
    file: Mapping[str, Any],
    env: Mapping[str, str],
    types: Mapping[str, ProviderType],
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
    configs: dict[str, ProviderConfig] = {}
    for kind in types.values():
        if kind.offline:
            configs[kind.name] = ProviderConfig(kind.name, kind.name, kind.checked_options("", {}))
        elif kind.key_env and env.get(kind.key_env):
            configs[kind.name] = ProviderConfig(
                kind.name, kind.name, kind.checked_options("", {}), env[kind.key_env], kind.key_env
            )
    configured: list[str] = []
    for name, options in table.items():
        if name == "default":
            continue
        try:
            configs[name] = _config(name, options, env, types)
        except ConfigError as exc:
            # A broken table must not stop the app from opening: it fails when used.
            configs[name] = ProviderConfig(name, "invalid", problem=str(exc))
        configured.append(name)
    return ProviderRegistry(types, configs, default=default, configured=tuple(configured), problem=problem)


def _config(name: str, options: Any, env: Mapping[str, str], types: Mapping[str, ProviderType]) -> ProviderConfig:
    """One ``[providers.NAME]`` table, checked against its type, with its key looked up."""
    where = f"[providers.{name}]"
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where} must be a table with at least a type")
    if ":" in name or not name.strip():
        raise ConfigError(f"{where}: a provider name cannot be empty or contain ':'")
    kind_name = options.get("type", name if name in types else None)
    if not isinstance(kind_name, str):
        known = ", ".join(f'"{t}"' for t in types)
        raise ConfigError(f"{where} needs type = one of {known}")
    named_env = options.get("api_key_env")
    if named_env is not None and not isinstance(named_env, str):
        raise ConfigError(f"{where}: api_key_env must name an environment variable")
    file_key = options.get("api_key")
    if file_key is not None and not isinstance(file_key, str):
        raise ConfigError(f"{where}: api_key must be a string")
    rest = {k: v for k, v in options.items() if k not in COMMON_SETTINGS}
    kind = types.get(kind_name)
    key_env: str | None = named_env
    if kind is not None:
        if key_env is None and "base_url" not in options:
            key_env = kind.key_env
        rest = kind.checked_options(where, rest)
    # An unknown type is said when the provider is used (the registry names the known ones).
    api_key = (env.get(key_env) if key_env else None) or file_key
    return ProviderConfig(name, kind_name, rest, api_key, key_env)
