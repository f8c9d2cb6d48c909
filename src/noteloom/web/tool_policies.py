"""``GET``/``PUT /api/v1/tools/{name}/policy``: whether a tool's calls run, ask first or are refused.

The same setting ``noteloom tools policy`` writes (``tool.NAME.policy``); ``noteloom.policy``
resolves it with the tool's default, noteloom.toml and a run's override, for every surface.
A policy is the workspace's, for everyone's calls: anyone may read it, the owner or an admin
changes it.
"""

from __future__ import annotations

from anyio import to_thread
from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import BaseModel, Field

from noteloom.app import App
from noteloom.policy import (
    DefaultWords,
    Policy,
    PolicySources,
    configured,
    default_words,
    file_policies,
    set_policy,
)
from noteloom.tools import ToolDef, UnknownTool
from noteloom.web.api_base import (
    ERRORS,
    ApiError,
    StrictModel,
    checked_body,
    install_error_handlers,
    user_of,
)


class PolicyIn(StrictModel):
    policy: Policy | None = Field(description="auto (runs), confirm (asks first), deny (never runs); "
                                              "null goes back to the tool's default.")


class PolicyOut(BaseModel):
    name: str
    #: What holds for the tool's calls unless a run overrides it.
    policy: str = Field(description="auto, confirm or deny; confirm* when the tool asks for some calls only.")
    setting: Policy | None = Field(description="The workspace setting (what PUT changes), if any.")
    file: Policy | None = Field(description="[agent.tool_policies] in noteloom.toml, which wins over the setting.")
    default: DefaultWords


def install(api: FastAPI, app: App) -> None:
    install_error_handlers(api)
    r = APIRouter(prefix="/api/v1/tools", tags=["tools"], dependencies=[Depends(checked_body)])

    def tool_of(name: str) -> ToolDef:
        try:
            return app.registry.get(name)
        except UnknownTool:
            raise ApiError(404, "not_found", f"no tool named {name!r}; GET /mcp tools/list or "
                                             "`noteloom tools list` shows them", "name") from None

    def view(tool: ToolDef) -> PolicyOut:
        settings = app.workspace.settings_with_prefix("tool.")
        sources = PolicySources.read(settings, app.settings.file)
        return PolicyOut(
            name=tool.name,
            policy=configured(tool, sources) or default_words(tool),
            setting=sources.workspace.get(tool.name),
            file=file_policies(app.settings.file).get(tool.name),
            default=default_words(tool),
        )

    @r.get("/{name}/policy", response_model=PolicyOut, responses=ERRORS, summary="A tool's policy")
    async def get_policy(name: str, request: Request) -> PolicyOut:
        user_of(request)
        return await to_thread.run_sync(view, tool_of(name))

    @r.put("/{name}/policy", response_model=PolicyOut, responses=ERRORS, summary="Set a tool's policy")
    async def put_policy(name: str, body: PolicyIn, request: Request) -> PolicyOut:
        if not user_of(request).is_admin:
            raise ApiError(403, "forbidden", "only the workspace's owner or an admin may change tool policies")
        tool = tool_of(name)

        def change() -> PolicyOut:
            set_policy(app.workspace, tool.name, body.policy)
            return view(tool)

        return await to_thread.run_sync(change)

    api.include_router(r)
