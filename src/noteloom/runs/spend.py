"""The workspace's monthly cap: what every run spent this calendar month, chat turns and
recipe runs together, against a token and a cost ceiling.

The month is the calendar month in the workspace's time zone (``workspace.timezone``,
UTC by default). The ceilings are run-time settings (``limits.monthly_tokens``,
``limits.monthly_cost``); unset means no cap. Tokens count input and output alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import sqlalchemy as sa
from anyio import to_thread
from sqlalchemy.engine import Connection, Engine

from noteloom import db
from noteloom.runs import tables as t

TOKENS_KEY = "limits.monthly_tokens"
COST_KEY = "limits.monthly_cost"
TIMEZONE_KEY = "workspace.timezone"
#: The month (``YYYY-MM``) whose 80 % alert was sent already.
ALERTED_KEY = "limits.alerted_month"
ALERT_AT = Decimal("0.8")


@dataclass(frozen=True)
class MonthlyCap:
    tokens: int | None = None
    cost: Decimal | None = None
    timezone: str = "UTC"

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> MonthlyCap:
        """From run-time settings already read (bad values are ignored: no cap is safer to
        show than a crash, and the setter checks them)."""
        tokens = settings.get(TOKENS_KEY)
        cost = settings.get(COST_KEY)
        tz = settings.get(TIMEZONE_KEY) or "UTC"
        try:
            ZoneInfo(str(tz))
        except (ZoneInfoNotFoundError, ValueError):
            tz = "UTC"
        money: Decimal | None = None
        if cost is not None:
            try:
                money = Decimal(str(cost))
            except InvalidOperation:
                money = None
        return cls(tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else None,
                   money if money is not None and money.is_finite() and money >= 0 else None, str(tz))

    @property
    def on(self) -> bool:
        return self.tokens is not None or self.cost is not None


@dataclass(frozen=True)
class MonthState:
    month: str
    tokens: int
    cost: Decimal
    cap: MonthlyCap

    @property
    def fraction(self) -> Decimal:
        """The largest share of a ceiling spent (0 with no cap)."""
        parts = [Decimal(0)]
        if self.cap.tokens:
            parts.append(Decimal(self.tokens) / Decimal(self.cap.tokens))
        if self.cap.cost is not None and self.cap.cost > 0:
            parts.append(self.cost / self.cap.cost)
        elif self.cap.cost is not None:
            parts.append(Decimal(1))
        return max(parts)

    @property
    def reached(self) -> str | None:
        """Why no more model calls may be made this month, or ``None``."""
        if self.cap.tokens is not None and self.tokens >= self.cap.tokens:
            return (f"the workspace's monthly cap of {self.cap.tokens} tokens is reached ({self.tokens} used in "
                    f"{self.month}); raise it with `noteloom recipes cap --tokens N` or wait for next month")
        if self.cap.cost is not None and self.cost >= self.cap.cost:
            return (f"the workspace's monthly cap of ${self.cap.cost} is reached (${self.cost} spent in {self.month}); "
                    "raise it with `noteloom recipes cap --cost USD` or wait for next month")
        return None

    def as_json(self) -> dict[str, Any]:
        return {
            "month": self.month, "tokens": self.tokens, "cost_usd": str(self.cost),
            "cap_tokens": self.cap.tokens, "cap_cost_usd": None if self.cap.cost is None else str(self.cap.cost),
            "timezone": self.cap.timezone, "fraction": float(self.fraction), "reached": self.reached,
        }


def month_bounds(now_ms: int, timezone: str) -> tuple[str, int, int]:
    """The calendar month holding ``now_ms`` in ``timezone``: its label and [start, end) in UTC ms."""
    tz = ZoneInfo(timezone)
    local = datetime.fromtimestamp(now_ms / 1000, tz)
    start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return f"{start.year:04d}-{start.month:02d}", int(start.timestamp() * 1000), int(end.timestamp() * 1000)


def month_state(conn: Connection, cap: MonthlyCap, now_ms: int) -> MonthState:
    """What every run of this month spent (priced runs' cost; unknown prices count nothing)."""
    label, start, end = month_bounds(now_ms, cap.timezone)
    r = t.runs
    row = conn.execute(
        sa.select(sa.func.coalesce(sa.func.sum(r.c.input_tokens + r.c.output_tokens), 0))
        .where(r.c.created_time >= start, r.c.created_time < end)
    ).scalar()
    cost = Decimal(0)
    if cap.cost is not None:
        for (c,) in conn.execute(
            sa.select(r.c.cost_usd).where(r.c.created_time >= start, r.c.created_time < end, r.c.cost_usd.is_not(None))
        ):
            cost += Decimal(c)
    return MonthState(label, int(row or 0), cost, cap)


def cap_of(settings: dict[str, Any]) -> MonthlyCap:
    """The cap from run-time settings read with the prefixes ``limits.`` and ``workspace.``."""
    return MonthlyCap.from_settings(settings)


def admission(engine: Engine, cap: MonthlyCap) -> Callable[[], Awaitable[str | None]] | None:
    """What the agent loop asks before each model call (``RunOptions.admit``): why the
    workspace's monthly cap refuses it, or ``None``. No cap, no question."""
    if not cap.on:
        return None

    async def admit() -> str | None:
        def check() -> str | None:
            with db.read_tx(engine) as c:
                return month_state(c, cap, db.now_ms()).reached
        return await to_thread.run_sync(check)

    return admit


def record_usage(
    engine: Engine, *, kind: str, user_id: str | None, model: str | None, input_tokens: int, output_tokens: int,
    cost: Decimal | None,
) -> None:
    """Count model calls made outside any run (``noteloom ask``/``chat`` in a terminal) as an
    ended run of ``kind``, so the monthly cap sees every surface's spending."""
    if not input_tokens and not output_tokens:
        return
    from noteloom.runs.store import Spent, create, settle

    with db.write_tx(engine) as c:
        rid = db.new_id()
        create(c, rid, kind=kind, user_id=user_id, subject_id=None, runner_id=None)
        settle(c, rid, "succeeded", spent=Spent(input_tokens, output_tokens, cost, model))
