"""A quick check, before a call, that a model server of the user's own answers at all.

A server on the user's machine or network (Ollama on a laptop, a peer on a VPN that has gone
to sleep) fails in the slowest way: the call waits out its connect timeout, and a chat turn
sits there saying nothing. So before a call on such a provider, ``GET {base_url}/models`` is
asked with a short deadline (``probe_timeout``, 2 s by default). Any HTTP answer, whatever
its status (a server without that route answers 404), counts as reachable: the call itself
says what else is wrong. So does a connection the host accepted and then closed. A refused
connection, a name that does not resolve, or nothing within the deadline fails the call with
``api_network_error`` and a message naming the host and what to do.

A success is remembered for ``REMEMBER_SECONDS`` so the turns of a conversation do not each
pay for the check; a failure is not remembered (the user starts the server and tries again).
Cloud providers are not checked: their own call path reports transport errors.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from noteloom.providers.errors import ProviderError

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger("noteloom.providers")

#: How long a server that answered counts as reachable without asking again.
REMEMBER_SECONDS = 30.0


def host_of(url: str) -> str:
    """``host:port`` of ``url`` (the host alone when it names no port)."""
    parts = urlsplit(url)
    host = parts.hostname or url
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


class ReachabilityProbe:
    """Checks that the server at ``base_url`` answers, for the provider called ``name``."""

    def __init__(self, name: str, base_url: str, *, timeout: float,
                 http_client: httpx2.AsyncClient | None = None) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._http_client = http_client
        self._ok_until = 0.0

    def forget(self) -> None:
        """Ask again before the next call (the remembered success is dropped)."""
        self._ok_until = 0.0

    async def check(self) -> None:
        """Return when the server answers (or answered lately); ``ProviderError`` with the code
        ``api_network_error`` when it does not, within ``timeout`` seconds."""
        if time.monotonic() < self._ok_until:
            return
        why = await self._ask()
        if why is not None:
            raise self.unreachable(why)
        self._ok_until = time.monotonic() + REMEMBER_SECONDS

    def unreachable(self, why: str) -> ProviderError:
        host = host_of(self.base_url)
        return ProviderError(
            "api_network_error",
            f"Could not reach the model server at {host} (provider {self.name!r}): {why}. "
            f"Is it running? Start it on {host} (for Ollama: `ollama serve`; for llama.cpp: `llama-server`), "
            f"wake the machine it runs on, or correct base_url in [providers.{self.name}] in noteloom.toml.",
            provider=self.name,
        )

    async def _ask(self) -> str | None:
        """``None`` when the server answered; else why it did not, in a few words."""
        import httpx2

        url = f"{self.base_url}/models"
        try:
            with anyio.fail_after(self.timeout):
                if self._http_client is not None:
                    await self._get(self._http_client, url)
                else:
                    async with httpx2.AsyncClient(timeout=self.timeout) as client:
                        await self._get(client, url)
        except (TimeoutError, httpx2.TimeoutException):
            return f"nothing answered within {self.timeout:g} s"
        except httpx2.ConnectError:
            return "the connection failed (nothing listens there, or the host is down or unknown)"
        except (httpx2.RemoteProtocolError, httpx2.ReadError) as exc:
            # The host took the connection: it is there. The call will say what else is wrong.
            log.debug("%s: the reachability check got no HTTP answer (%s); counted as reachable", url, exc)
        except httpx2.TransportError as exc:
            return f"the connection failed ({type(exc).__name__})"
        return None

    @staticmethod
    async def _get(client: httpx2.AsyncClient, url: str) -> None:
        async with client.stream("GET", url) as response:
            log.debug("%s answered %s to the reachability check", url, response.status_code)
