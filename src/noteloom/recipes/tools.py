"""Tools only an agent recipe's run has: its scratch document, its earlier outputs, and the
notes between it and its owner. They are bound to one recipe and one run, offered beside
the recipe's chosen tools, and write nothing but the recipe's own records."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anyio import to_thread
from sqlalchemy.engine import Engine

from noteloom import db
from noteloom.recipes import store
from noteloom.tools import ToolContext, ToolDef, ToolError

SCRATCH_MAX = 20_000
OUTPUT_PREVIEW = 4_000
NOTE_MAX = 4_000
RECIPE_TOOL_NAMES = ("get_workspace", "set_workspace", "get_recent_outputs", "add_recipe_note")


def recipe_tools(engine: Engine, recipe_id: str, run_id: str, describe_time: Callable[[int], str]) -> list[ToolDef]:
    """The recipe-only tools of one run."""

    def blocking(fn: Callable[[], Any]) -> Any:
        return to_thread.run_sync(fn)

    async def get_workspace(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        def read() -> str:
            with db.read_tx(engine) as c:
                recipe = store.get(c, recipe_id)
                return recipe.scratch if recipe is not None else ""
        text = await blocking(read)
        return {"workspace": text, "chars": len(text)}

    async def set_workspace(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        text = args["text"]
        if len(text) > SCRATCH_MAX:
            raise ToolError(f"the workspace holds at most {SCRATCH_MAX} characters; this text has {len(text)}: "
                            "keep only what the next run needs")

        def write() -> None:
            with db.write_tx(engine) as c:
                store.set_state(c, recipe_id, scratch=text)
        await blocking(write)
        return {"saved": True, "chars": len(text)}

    async def get_recent_outputs(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        count = int(args.get("count", 3))

        def read() -> list[dict[str, Any]]:
            with db.read_tx(engine) as c:
                runs = store.recent_outputs(c, recipe_id, count, before=run_id)
            return [{
                "run_id": r.run_id, "when": describe_time(r.created_time), "status": r.status,
                "output": (r.output or "")[:OUTPUT_PREVIEW],
                "truncated": len(r.output or "") > OUTPUT_PREVIEW,
            } for r in runs]
        outputs = await blocking(read)
        return {"outputs": outputs, "count": len(outputs)}

    async def add_recipe_note(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
        def write() -> str:
            with db.write_tx(engine) as c:
                return store.add_note(c, recipe_id, args["text"], author="recipe", run_id=run_id)
        return {"note_id": await blocking(write), "saved": True}

    return [
        ToolDef(
            "get_workspace",
            "Read this recipe's workspace: a small document it keeps between runs (what it did, what to "
            "check next time). Empty on the first run.",
            {"type": "object", "properties": {}, "additionalProperties": False},
            get_workspace,
        ),
        ToolDef(
            "set_workspace",
            "Replace this recipe's workspace document with new text (at most 20000 characters). Keep what the "
            "next run needs to know; it is the only memory the recipe has between runs.",
            {"type": "object", "properties": {"text": {"type": "string", "maxLength": SCRATCH_MAX}},
             "required": ["text"], "additionalProperties": False},
            set_workspace,
        ),
        ToolDef(
            "get_recent_outputs",
            "The reports this recipe's last runs wrote, newest first (to avoid repeating yourself or to "
            "report what changed).",
            {"type": "object", "properties": {"count": {"type": "integer", "minimum": 1, "maximum": 10,
                                                        "default": 3}},
             "additionalProperties": False},
            get_recent_outputs,
        ),
        ToolDef(
            "add_recipe_note",
            "Leave a note for the recipe's owner (an answer to a note they left, or a question); they read "
            "it on the recipe's page.",
            {"type": "object", "properties": {"text": {"type": "string", "minLength": 1, "maxLength": NOTE_MAX}},
             "required": ["text"], "additionalProperties": False},
            add_recipe_note,
        ),
    ]
