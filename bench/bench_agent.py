"""Loop overhead of the agent per step, on top of the model provider.

Run from the repository root::

    .venv/bin/python -m bench.bench_agent [--steps 50] [--runs 15]

Each run is one turn of the ``scripted`` model calling a trivial tool ``steps`` times,
then answering. The provider alone is timed playing the very same script (the
same requests, the same transcript growth), and the difference, divided by the
number of steps, is what the loop itself costs: building requests, assembling the
streamed message, policies, schema validation, the tool call, result rendering
and capping, events. Target: under 1 ms per step. A SQLite workspace in a
temporary directory backs the tool context (its settings are read once per run).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from noteloom.agent import RunEvent, RunOptions, run
from noteloom.app import open_app
from noteloom.config import load_settings
from noteloom.messages import Message, ToolCallDone, ToolResultPart
from noteloom.providers import ModelRequest, ToolSpec
from noteloom.providers.scripted import ScriptedProvider
from noteloom.tools import ToolContext, ToolDef

TARGET_MS = 1.0


async def noop(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "n": args.get("n", 0)}


def tools(count: int) -> list[ToolDef]:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "additionalProperties": False}
    out = [ToolDef("noop", "Does nothing.", schema, noop)]
    for i in range(count - 1):
        out.append(ToolDef(f"other_{i}", f"Another tool {i}.", schema, noop))
    return out


def script(steps: int) -> list[dict[str, Any]]:
    return [
        *({"text": "Working.", "tool_calls": [{"name": "noop", "arguments": {"n": i}, "id": f"c{i}"}],
           "usage": {"input_tokens": 100, "output_tokens": 10}} for i in range(steps)),
        {"text": "Done.", "usage": {"input_tokens": 100, "output_tokens": 5}},
    ]


async def provider_only(steps: int, specs: tuple[ToolSpec, ...]) -> float:
    """Seconds for the bare provider to play the script, with the transcript growing as in a run."""
    provider = ScriptedProvider(steps=script(steps))
    history = [Message.user("go")]
    started = time.perf_counter()
    for _ in range(steps + 1):
        request = ModelRequest("script", tuple(history), (), specs)
        calls = []
        async for event in provider.stream(request):
            if isinstance(event, ToolCallDone):
                calls.append(event.call)
        history.append(Message("assistant", tuple(calls)))
        if calls:
            history.append(Message("tool", tuple(ToolResultPart(c.id, '{"ok": true}') for c in calls)))
    return time.perf_counter() - started


async def with_loop(steps: int, toolset: list[ToolDef], ctx: ToolContext, with_events: bool) -> float:
    provider = ScriptedProvider(steps=script(steps))
    events: list[RunEvent] = []

    async def sink(event: RunEvent) -> None:
        events.append(event)

    started = time.perf_counter()
    result = await run(provider, "script", "You are benchmarked.", [Message.user("go")], toolset, ctx,
                       RunOptions(max_steps=steps + 1), on_event=sink if with_events else None)
    elapsed = time.perf_counter() - started
    assert result.stop_reason == "end_turn" and result.steps == steps + 1, result.stop_reason
    return elapsed


async def measure(steps: int, runs: int, tool_count: int, ctx: ToolContext, with_events: bool) -> dict[str, float]:
    toolset = tools(tool_count)
    specs = tuple(ToolSpec(t.name, t.description, t.input_schema) for t in toolset)
    await with_loop(steps, toolset, ctx, with_events)  # warm-up: imports, validators, caches
    await provider_only(steps, specs)
    bare, looped = [], []
    for _ in range(runs):
        bare.append(await provider_only(steps, specs))
        looped.append(await with_loop(steps, toolset, ctx, with_events))
    per_step_ms = [(loop - base) / (steps + 1) * 1000 for loop, base in zip(looped, bare, strict=True)]
    return {
        "provider_ms_per_step": statistics.median(bare) / (steps + 1) * 1000,
        "loop_ms_per_step": statistics.median(looped) / (steps + 1) * 1000,
        "overhead_ms_per_step": statistics.median(per_step_ms),
        "overhead_p90_ms": sorted(per_step_ms)[int(len(per_step_ms) * 0.9) - 1] if len(per_step_ms) > 1 else per_step_ms[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--runs", type=int, default=15)
    args, _ = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="noteloom-bench-") as tmp:
        app = open_app(load_settings({"NOTELOOM_HOME": str(Path(tmp) / "home")}), load_entry_points=False)
        try:
            ctx = app.tool_context()
            print(f"agent loop: {args.steps} tool-calling steps + 1 answer per run, median of {args.runs} runs")
            print(f"{'tools':>6} {'events':>7} {'provider ms/step':>17} {'loop ms/step':>13} "
                  f"{'overhead ms/step':>17} {'p90':>7}")
            worst = 0.0
            for tool_count, with_events in ((1, False), (1, True), (20, True)):
                figures = anyio.run(measure, args.steps, args.runs, tool_count, ctx, with_events)
                worst = max(worst, figures["overhead_ms_per_step"])
                print(f"{tool_count:>6} {'yes' if with_events else 'no':>7} {figures['provider_ms_per_step']:>17.3f} "
                      f"{figures['loop_ms_per_step']:>13.3f} {figures['overhead_ms_per_step']:>17.3f} "
                      f"{figures['overhead_p90_ms']:>7.3f}")
            verdict = "within" if worst < TARGET_MS else "OVER"
            print(f"worst median overhead {worst:.3f} ms per step: {verdict} the {TARGET_MS:g} ms target")
        finally:
            app.close()


if __name__ == "__main__":
    main()
