"""The pipeline-job contract: code picks one item at a time, a model judges it, code records it.

A recipe in *pipeline mode* runs one job, registered through ``register_pipeline_jobs``.
Where agent mode hands the model tools and lets it drive, a pipeline shows the model one
item in isolation, with one thing to decide, and a fixed answer shape: what small models
do reliably. The recipes' runner owns scheduling, budgets, the model, cancellation, the run
record and delivery; a job says only four things — which item is next, what the model
reads about it, what a verdict looks like, and what a valid verdict changes. Per item the
runner:

1. asks ``next_item(run)`` for the oldest item the recipe has not handled (``None``: caught
   up, the run ends with its tally);
2. renders ``digest(run, item)``, fenced as untrusted text when ``untrusted_digest``;
3. sends one exchange, no tools: the recipe's prompt (else ``default_prompt``), an output
   instruction made from ``verdict_schema``, and the digest;
4. reads the first JSON object of the answer, checks it against ``verdict_schema`` and then
   ``validate_verdict``; an invalid verdict gets one retry, told what was wrong, and is
   then logged as the item's error (an unreadable verdict never wedges the queue);
5. hands a valid verdict to ``record_verdict``, the only path by which model output changes
   anything, aimed by the recipe's config and never by the model;
6. logs the item as handled (done or error), so ``next_item`` passes over it from then on.

A job may also have ``flagged(verdict) -> bool``: the items it flags are listed in the
recipe's "flagged" notification (when its rules ask for one).

A job's methods are synchronous and may block (they read and write the workspace): the
runner calls them in a worker thread. They raise ``InvalidInput`` (naming the field) for a
config or verdict that breaks a rule of theirs; anything else is a bug in the job.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from noteloom.tools import ToolContext

if TYPE_CHECKING:
    from noteloom.workspace import Workspace

__all__ = [
    "JOB_NAME",
    "BasePipelineJob",
    "PipelineItem",
    "PipelineJob",
    "PipelineRun",
    "check_job",
]

#: A job's name: how a recipe names the job it runs (stored with the recipe).
JOB_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: Longest item key: the processing log keeps it per recipe.
MAX_ITEM_KEY = 200


@dataclass(frozen=True)
class PipelineItem:
    """One item a job offers for judging."""

    #: Stable and unique within the job (a note id, a note id and its revision …): the
    #: processing log records it, so the same key is never offered twice to one recipe.
    key: str
    #: A short name for a person reading the run record ("Packing list (Travel)").
    label: str

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not 0 < len(self.key) <= MAX_ITEM_KEY:
            raise ValueError(f"a pipeline item's key must be text of 1 to {MAX_ITEM_KEY} characters, not {self.key!r}")


@dataclass(frozen=True)
class PipelineRun:
    """What a job's calls are given during one run of one recipe."""

    #: The workspace, the recipe's owner as ``user``, the notebook scope and the services,
    #: as a tool call has them: a job honours the scope as tools do.
    context: ToolContext
    recipe_id: str
    run_id: str
    #: The recipe's own settings for the job, checked against ``config_schema`` and by
    #: ``validate_config`` before the run starts.
    config: Mapping[str, Any]
    #: Which of ``keys`` this recipe has handled already (done or failed), from the
    #: processing log. Blocking: it reads the database.
    handled: Callable[[Sequence[str]], set[str]]

    @property
    def workspace(self) -> Workspace:
        return self.context.workspace


@runtime_checkable
class PipelineJob(Protocol):
    """A pipeline job (see the module docstring for the order of the calls).

    The schemas are JSON Schema (draft 2020-12) objects. Attributes may be plain class
    attributes; :class:`BasePipelineJob` gives the optional ones their defaults.
    """

    @property
    def name(self) -> str:
        """A stable identifier, ``[a-z][a-z0-9_]*``: recipes store it."""
        ...

    @property
    def label(self) -> str:
        """What the recipe form calls the job."""
        ...

    @property
    def untrusted_digest(self) -> bool:
        """Whether digests carry text someone other than the user wrote (a clipped web page,
        an imported e-mail): they are then fenced as untrusted, and a recipe running the job
        counts as tainted (it needs the owner's sign-off to write, as agent mode does)."""
        ...

    @property
    def config_schema(self) -> Mapping[str, Any]:
        """The recipe's settings for this job (which notebook, which tag …), a JSON Schema
        object: the recipe form is drawn from it and the settings checked against it when the
        recipe is saved and at every run."""
        ...

    @property
    def verdict_schema(self) -> Mapping[str, Any]:
        """What the model answers for one item, a JSON Schema object. The runner writes the
        model's output instruction from it and checks the answer against it, so the two
        cannot disagree."""
        ...

    @property
    def default_prompt(self) -> str:
        """The job's own instructions, used when the recipe has no prompt of its own."""
        ...

    def validate_config(self, config: Mapping[str, Any], context: ToolContext) -> None:
        """Rules on the recipe's settings that the schema cannot say (a notebook that must
        exist and be in scope); raise ``InvalidInput(field=...)``. Runs when the recipe is
        saved and before every run."""
        ...

    def next_item(self, run: PipelineRun) -> PipelineItem | None:
        """The oldest item this recipe has not handled (ask ``run.handled``), or ``None`` when
        it is caught up. Only items within the notebook scope."""
        ...

    def digest(self, run: PipelineRun, item: PipelineItem) -> str:
        """What the model reads about ``item``: plain text the job keeps small enough for the
        smallest model it is meant for (the job owns the cap)."""
        ...

    def validate_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any]) -> None:
        """Rules on a verdict that the schema cannot say (one field must agree with another);
        raise ``InvalidInput(field=...)``, whose message the model reads for its one retry.
        ``verdict`` has passed ``verdict_schema`` already."""
        ...

    def record_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any], model: str) -> None:
        """Apply a valid verdict: the only write of a pipeline run. What it writes and where
        is fixed by the job and ``run.config``, never chosen by the verdict. ``model`` is the
        address of the model that judged (to record beside what it decided)."""
        ...


class BasePipelineJob:
    """Defaults for a job's optional parts: its label is its name, it takes no settings,
    and no rule beyond its schemas applies to its settings or verdicts."""

    name: str
    untrusted_digest: bool
    verdict_schema: Mapping[str, Any]
    default_prompt: str
    config_schema: Mapping[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}

    @property
    def label(self) -> str:
        return self.name.replace("_", " ").capitalize()

    def validate_config(self, config: Mapping[str, Any], context: ToolContext) -> None:
        return None

    def validate_verdict(self, run: PipelineRun, item: PipelineItem, verdict: Mapping[str, Any]) -> None:
        return None


def check_job(job: object) -> PipelineJob:
    """``job`` if it has every part of the contract in a usable shape; ``TypeError`` or
    ``ValueError`` naming what is wrong (a plugin author's mistake, raised at start-up)."""
    if not isinstance(job, PipelineJob):
        missing = [
            n for n in ("name", "label", "untrusted_digest", "config_schema", "verdict_schema", "default_prompt",
                        "validate_config", "next_item", "digest", "validate_verdict", "record_verdict")
            if not hasattr(job, n)
        ]
        raise TypeError(f"{job!r} is not a pipeline job: it lacks {', '.join(missing)}")
    if not isinstance(job.name, str) or not JOB_NAME.fullmatch(job.name):
        raise ValueError(f"a pipeline job's name must match {JOB_NAME.pattern}, not {job.name!r}")
    for part in ("config_schema", "verdict_schema"):
        schema = getattr(job, part)
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise ValueError(f"pipeline job {job.name!r}: {part} must be a JSON Schema object ({{'type': 'object', ...}})")
    if not isinstance(job.untrusted_digest, bool):
        raise ValueError(f"pipeline job {job.name!r}: untrusted_digest must be True or False")
    if not isinstance(job.default_prompt, str) or not job.default_prompt.strip():
        raise ValueError(f"pipeline job {job.name!r}: default_prompt must be the job's instructions")
    return job
