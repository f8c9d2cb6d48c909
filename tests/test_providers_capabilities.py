"""What each model reads besides text: built-in knowledge of the vendors' models, per-model
tables in noteloom.toml (checked like every other setting), the offline models, and the
registry's answer for a ``name:model`` address."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from noteloom.errors import ConfigError
from noteloom.plugins import plugin_manager
from noteloom.providers import ProviderRegistry, build_provider_registry, provider_types
from noteloom.providers.base import TEXT_ONLY, ModelCapabilities, capabilities_of
from noteloom.providers.scripted import ScriptedProvider

BOTH = ModelCapabilities(vision=True, document=True)
VISION = ModelCapabilities(vision=True)


def registry(toml: str, env: dict[str, str] | None = None) -> ProviderRegistry:
    types = provider_types(plugin_manager(load_entry_points=False))
    return build_provider_registry(tomllib.loads(toml), env or {}, types)


LOCAL = """
[providers.local]
type = "openai"
base_url = "http://127.0.0.1:11434/v1"
default_model = "qwen3:14b"

[providers.local.models."llava:13b"]
vision = true

[providers.local.models."qwen2.5vl"]
vision = true
document = true

[providers.local.models."qwen3:14b"]
"""


def test_claude_models_read_images_and_pdfs() -> None:
    reg = registry("", {"ANTHROPIC_API_KEY": "k"})
    assert reg.capabilities("anthropic:claude-sonnet-4-6") == BOTH
    assert reg.capabilities("anthropic:claude-opus-4-1-20250805") == BOTH
    assert reg.capabilities("anthropic:claude-3-5-haiku-20241022") == BOTH
    # Claude 3 reads images but not PDFs; Claude 2 neither.
    assert reg.capabilities("anthropic:claude-3-haiku-20240307") == VISION
    assert reg.capabilities("anthropic:claude-2.1") == TEXT_ONLY
    # The default model of the address without one.
    assert reg.capabilities("anthropic") == BOTH


def test_official_openai_vision_families_read_images_and_pdfs_and_others_do_not() -> None:
    reg = registry("", {"OPENAI_API_KEY": "k"})
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1-nano", "gpt-5", "gpt-5-mini", "gpt-5.1", "o3", "o4-mini",
                  "gpt-4o-2024-08-06"):
        assert reg.capabilities(f"openai:{model}") == BOTH, model
    for model in ("gpt-3.5-turbo", "o3-mini", "gpt-4o-audio-preview", "gpt-4o-mini-transcribe", "gpt-4",
                  "gpt-50", "o1-mini"):
        assert reg.capabilities(f"openai:{model}") == TEXT_ONLY, model


def test_an_unknown_local_model_is_text_only_until_its_table_says_otherwise() -> None:
    reg = registry(LOCAL)
    assert reg.capabilities("local:mistral-small") == TEXT_ONLY
    assert reg.capabilities("local:llava:13b") == VISION
    assert reg.capabilities("local:qwen2.5vl") == BOTH
    # A table that declares nothing declares nothing; the default model resolves like the chat's.
    assert reg.capabilities("local:qwen3:14b") == TEXT_ONLY
    assert reg.capabilities("local") == TEXT_ONLY
    # A local server under a vision family's name is still not OpenAI: only its table counts.
    assert reg.capabilities("local:gpt-4o") == TEXT_ONLY
    # The model tables' names are the models the provider lists.
    assert reg.get("local").models() == ["llava:13b", "qwen2.5vl", "qwen3:14b"]


def test_a_model_table_overrides_built_in_knowledge_key_by_key() -> None:
    reg = registry("""
[providers.claude]
type = "anthropic"
api_key = "k"

[providers.claude.models."claude-sonnet-4-6"]
document = false
""")
    assert reg.capabilities("claude:claude-sonnet-4-6") == VISION
    assert reg.capabilities("claude:claude-opus-4-1") == BOTH


def test_the_default_model_is_used_for_an_empty_address() -> None:
    reg = registry('[providers]\ndefault = "local:llava:13b"\n' + LOCAL)
    assert reg.capabilities() == VISION
    assert reg.capabilities("") == VISION


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[providers.local.models."llava:13b"]\nvisoin = true\n',
         r"\[providers\.local\]: models\.\"llava:13b\" has no setting 'visoin'; it takes vision, document"),
        ('[providers.local.models."llava:13b"]\nvision = "yes"\n',
         r"\[providers\.local\]: models\.\"llava:13b\": vision must be true or false, not 'yes'"),
        ('[providers.local.models]\n"llava:13b" = true\n',
         r"models\.\"llava:13b\" must be a table of settings \(vision, document\), not True"),
        ("[providers.local]\nmodels = 3\n", r"models must be a list of names or a table of tables, not 3"),
    ],
)
def test_a_typo_in_a_model_table_fails_naming_the_settings(table: str, message: str) -> None:
    base = '[providers.local]\ntype = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\n'
    if table.startswith("[providers.local]\n"):
        toml = base + table.removeprefix("[providers.local]\n")
    else:
        toml = base + "\n" + table
    reg = registry(toml)  # the app still opens: the table fails when used
    with pytest.raises(ConfigError, match=message):
        reg.capabilities("local:llava:13b")
    with pytest.raises(ConfigError, match=message):
        reg.get("local")


def test_the_offline_models_declare_what_the_test_chose() -> None:
    reg = registry("")
    assert reg.capabilities("echo") == TEXT_ONLY
    scripted = ScriptedProvider("s", [{"text": "hi"}], capabilities=BOTH)
    assert capabilities_of(scripted, "script") == BOTH
    assert capabilities_of(ScriptedProvider("t", [{"text": "hi"}]), "script") == TEXT_ONLY
    reg.add(scripted)
    assert reg.capabilities("s") == BOTH


def test_a_scripted_table_takes_vision_and_document(tmp_path: Any) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"text": "hi"}]')
    reg = registry(f'[providers.eyes]\ntype = "scripted"\nscript = "{script}"\nvision = true\n')
    assert reg.capabilities("eyes") == VISION
    with pytest.raises(ConfigError, match=r"scripted has no setting 'vison'; it takes .*vision, document"):
        registry(f'[providers.eyes]\ntype = "scripted"\nscript = "{script}"\nvison = true\n').get("eyes")


def test_a_provider_without_a_declaration_is_text_only() -> None:
    class Plain:
        name, local, default_model = "plain", True, "m"

    assert capabilities_of(Plain(), "m") == TEXT_ONLY
