"""What the page tests share with their fixtures: the live server's handle and a note body."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx

TRIP = "# Trip\n\nWe leave on Friday at nine.\n\nBring the tent.\n"


@dataclass
class Live:
    url: str
    token: str
    home: Path
    notes: dict[str, str]

    def api(self, method: str, path: str, **kw: Any) -> Any:
        r = httpx.request(method, self.url + path, headers={"Authorization": f"Bearer {self.token}"}, timeout=10, **kw)
        r.raise_for_status()
        return r.json() if r.content else None

    def page_url(self, path: str = "/chat") -> str:
        return f"{self.url}{path}?token={self.token}"
