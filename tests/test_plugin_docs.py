"""docs/plugins.md says what the plugin API is: every hook documented with its signature as the
code has it, no hook documented that does not exist, and the worked example the very file the
plugin tests install."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import noteloom.plugins
from noteloom.plugins import Hooks

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
REFERENCE = DOC.split("\n## Hook reference\n", 1)[1]
#: ``### name(params)`` and the fenced signature line that follows it.
ENTRY = re.compile(r"^### (\w+)\(([^)]*)\)\n+```python\n(def [^\n]+)\n```", re.MULTILINE)


def hookspecs() -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in inspect.getmembers(Hooks, inspect.isfunction)
        if hasattr(fn, "noteloom_spec")
    }


def signature_line(name: str, sig: inspect.Signature) -> str:
    params = [p for p in sig.parameters.values() if p.name != "self"]
    args = ", ".join(f"{p.name}: {p.annotation}" for p in params)
    return f"def {name}({args}) -> {sig.return_annotation}:"


def documented() -> dict[str, tuple[str, str]]:
    return {m.group(1): (m.group(2), m.group(3)) for m in ENTRY.finditer(REFERENCE)}


def test_every_hook_is_documented_and_every_documented_hook_exists() -> None:
    specs, docs = set(hookspecs()), set(documented())
    headings = set(re.findall(r"^### (\w+)\(", REFERENCE, re.MULTILINE))
    assert specs, "no hook specifications found"
    assert not specs - docs, f"hooks missing from docs/plugins.md: {sorted(specs - docs)}"
    assert not headings - specs, f"docs/plugins.md documents hooks that do not exist: {sorted(headings - specs)}"


def test_each_documented_signature_is_the_hooks_own() -> None:
    docs = documented()
    for name, sig in hookspecs().items():
        params, line = docs[name]
        assert params == ", ".join(p for p in sig.parameters if p != "self"), name
        assert line == signature_line(name, sig), f"docs/plugins.md shows {line!r} for {name}"


def test_the_worked_example_is_the_tested_plugin_file() -> None:
    m = re.search(r"<!-- example: (\S+) -->\n```python\n(.*?)```\n<!-- end example -->", DOC, re.DOTALL)
    assert m is not None, "docs/plugins.md has no worked example"
    assert m.group(2) == (ROOT / m.group(1)).read_text(encoding="utf-8")


def test_the_names_the_docs_import_from_the_public_module_exist() -> None:
    imported = {
        name.strip()
        for line in re.findall(r"^from noteloom\.plugins import (.+?)(?:\s+#.*)?$", DOC, re.MULTILINE)
        for name in line.strip("()").split(",")
        if name.strip()
    }
    assert imported and imported <= set(noteloom.plugins.__all__), imported - set(noteloom.plugins.__all__)
