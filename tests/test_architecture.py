"""Dependencies point one way: a module may import its own layer and the layers below, never above."""

from __future__ import annotations

import ast
from pathlib import Path

import noteloom

ROOT = Path(noteloom.__file__).parent

# Lowest first. A module belongs to the first layer with a matching prefix (longest prefix wins).
LAYERS: list[tuple[str, list[str]]] = [
    ("storage", ["errors", "config", "db", "locks", "migrations", "jsonvalues"]),
    ("domain", ["workspace", "accounts", "oauth", "outline", "query", "search", "postings", "interop", "embedders", "chunks", "vectors", "ivf", "semantic", "memory", "folders", "messages", "vault", "people"]),
    ("tools", ["tools", "access", "tooldefs", "promptdefs", "renderspec", "policy", "hooks", "pipeline", "verdicts", "default_plugins.pipeline_jobs", "default_plugins.workspace_tools", "default_plugins.semantic_tools", "default_plugins.embedders", "default_plugins.memory_tools"]),
    ("engine", ["agent", "runs", "providers", "plugins", "outbound", "webtools", "attachments", "default_plugins.providers"]),
    ("services", ["services", "chat", "recipes", "data", "notifications", "session_tools", "default_plugins"]),
    ("root", ["app"]),
    ("surfaces", ["web", "mcp", "cli", "__main__"]),
]
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
# Third-party packages that belong to one edge only.
FORBIDDEN_BELOW = {
    "tools": {"starlette", "fastapi", "typer", "click", "uvicorn", "openai", "anthropic", "httpx2", "mcp", "mcp_types"},
    "domain": {"starlette", "fastapi", "typer", "click", "uvicorn", "openai", "anthropic", "httpx2", "mcp", "mcp_types", "jinja2"},
}


def layer_of(module: str) -> str:
    best: tuple[int, str] | None = None
    for name, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[0]):
                best = (len(p), name)
    if best is None:
        raise AssertionError(f"module noteloom.{module} has no layer: add it to LAYERS in {__file__}")
    return best[1]


def modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts:
            continue
        out.append((".".join(parts), path))
    return out


def imports_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            if node.module == "noteloom":
                names.extend(
                    f"noteloom.{a.name}" for a in node.names
                    if (ROOT / a.name).is_dir() or (ROOT / f"{a.name}.py").exists()
                )
    return names


def test_every_module_imports_only_its_layer_and_below() -> None:
    problems = []
    for module, path in modules():
        own = layer_of(module)
        for imported in imports_of(path):
            top = imported.split(".")[0]
            if top == "noteloom" and imported != "noteloom":
                target = imported.removeprefix("noteloom.")
                if RANK[layer_of(target)] > RANK[own]:
                    problems.append(f"{module} ({own}) imports {imported} ({layer_of(target)})")
            for low, banned in FORBIDDEN_BELOW.items():
                if RANK[own] <= RANK[low] and top in banned:
                    problems.append(f"{module} ({own}) imports {imported}, which belongs to a higher layer")
    assert not problems, "\n".join(sorted(set(problems)))


def test_the_checker_sees_a_violation() -> None:
    assert RANK[layer_of("web.app")] > RANK[layer_of("workspace")]
    assert layer_of("default_plugins.workspace_tools") == "tools"
