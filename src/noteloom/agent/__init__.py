"""The agent loop: one turn of model calls and tool calls, shared by the chat, recipes and the CLI.

``run(provider, model, system, messages, tools, context, options)`` calls the model,
runs the tools it asks for (one at a time, in order), feeds the results back, and
stops on one of the ``StopReason`` values. Everything that happens is reported as
a ``RunEvent`` to ``on_event``, in order, so a caller can persist each one::

    result = await run(provider, "qwen3", "You help with notes.", [Message.user("…")],
                       registry.enabled(ws), app.tool_context(user), on_event=save_event,
                       cancel=token)
    if result.stop_reason == "awaiting_confirmation":
        ...  # later: run(..., [*history, *result.messages], ..., RunOptions(decisions={id: "approve"}))

Rules the loop keeps:

- Budgets (``RunOptions``; ``Budgets`` layers them): at most ``max_steps`` model calls,
  ``max_output_tokens``, ``max_cost`` and ``time_limit`` per run. Before each call its
  worst case (estimated input plus its output limit) is priced against what is left of
  ``max_cost``; the limit is lowered to fit, and the call is not made when even
  ``MIN_CALL_TOKENS`` do not. The time limit cuts a stream running past it. Either ends
  the run as ``budget_exceeded`` with ``limit`` naming the budget.
- At most ``max_steps`` model calls per run. Tool calls the model makes after the
  last allowed call (or once the budget is spent, or after a cancel) are answered
  "not run" so the transcript stays valid.
- Each call has a policy, ``auto``/``confirm``/``deny``, resolved by ``noteloom.policy``
  from the tool's own answer for these arguments (``ToolDef.needs_approval``), the
  workspace setting ``tool.<name>.policy``, ``[agent.tool_policies]`` in noteloom.toml
  and ``RunOptions.policies``; ``deny`` anywhere wins. Session tools always run. A ``confirm`` call ends the run with a ``PendingAction``;
  calls before it in the batch have run, those after it have not. Running again
  with the transcript plus a decision for that call resumes the batch.
- Tools run through ``noteloom.tools.call_tool`` (what ``ToolRegistry.call`` runs, and
  so MCP): unknown tools, malformed or schema-invalid arguments, ``ToolError`` and bugs
  in a tool all become error results the model sees, worded as MCP words them; the loop goes on.
- Results are capped (12 KiB by default). Results marked untrusted are fenced with a
  nonce that is new for every run, and the system prompt then gains the contract
  that explains the fence.
- ``CancelToken.cancel()`` stops the model mid-stream (its connection is closed) or
  between steps; text streamed so far is kept.

The package: ``events`` (options, events, results, the cancel token), ``framing``
(results as the model reads them: rendered, capped, fenced) and ``loop``.
"""

from noteloom.agent.events import (
    POLICIES,
    STOP_REASONS,
    ActivityEvent,
    Budgets,
    CancelToken,
    Decision,
    DoneEvent,
    EventSink,
    Limit,
    PendingAction,
    PendingEvent,
    Policy,
    RunEvent,
    RunOptions,
    RunResult,
    StopReason,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    event_to_dict,
)
from noteloom.agent.framing import (
    CONTRACT,
    DECLINED,
    cap_text,
    fence,
    render_payload,
)
from noteloom.agent.loop import (
    DEFAULT_MAX_STEPS,
    DEFAULT_RESULT_CAP,
    MAX_COST_KEY,
    MAX_OUTPUT_TOKENS_KEY,
    MAX_STEPS_KEY,
    MIN_CALL_TOKENS,
    POLICY_KEY,
    RESULT_CAP_KEY,
    UNKNOWN_MAX_TOKENS,
    WAITING_FOR_MODEL,
    run,
)

__all__ = [
    "CONTRACT",
    "DECLINED",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_RESULT_CAP",
    "MAX_COST_KEY",
    "MAX_OUTPUT_TOKENS_KEY",
    "MAX_STEPS_KEY",
    "MIN_CALL_TOKENS",
    "POLICIES",
    "POLICY_KEY",
    "RESULT_CAP_KEY",
    "STOP_REASONS",
    "UNKNOWN_MAX_TOKENS",
    "WAITING_FOR_MODEL",
    "ActivityEvent",
    "Budgets",
    "CancelToken",
    "Decision",
    "DoneEvent",
    "EventSink",
    "Limit",
    "PendingAction",
    "PendingEvent",
    "Policy",
    "RunEvent",
    "RunOptions",
    "RunResult",
    "StopReason",
    "ToolCallEvent",
    "ToolResultEvent",
    "UsageEvent",
    "cap_text",
    "event_to_dict",
    "fence",
    "render_payload",
    "run",
]
