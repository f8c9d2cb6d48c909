"""Provider failures, reduced to a few stable codes with a message fit for users.

Every adapter turns whatever its SDK raised into a ``ProviderError``. The code is
what programs branch on (the chat stores it, recipes record it); the message is
what a user reads. The raw upstream error goes to the log only: it may hold
request ids, partial keys or prompt text.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, get_args

from noteloom.errors import NoteloomError

log = logging.getLogger("noteloom.providers")

ErrorCode = Literal[
    "api_auth_failed",
    "api_quota_exceeded",
    "api_rate_limited",
    "api_request_invalid",
    "api_server_error",
    "api_overloaded",
    "api_network_error",
    "api_no_response",
    "api_stream_error",
]
ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)

FRIENDLY: dict[ErrorCode, str] = {
    "api_auth_failed": "{label} refused the API key. Check the key (or its environment variable) and try again.",
    "api_quota_exceeded": "{label} says the account has no credit or quota left. Top it up or pick another model.",
    "api_rate_limited": "{label} is rate-limiting requests. Wait a moment and try again.",
    "api_request_invalid": "{label} rejected the request. Check the model name and the provider settings.",
    "api_server_error": "{label} had an internal error. Try again in a moment.",
    "api_overloaded": "{label} is overloaded right now. Try again in a moment or pick another model.",
    "api_network_error": "Could not reach {label}. Check the address and that the server is running.",
    "api_no_response": "{label} accepted the request but did not start answering in time. "
    "A local model may still be loading: raise first_token_timeout or try again.",
    "api_stream_error": "The answer from {label} broke off ({detail}). Try again.",
}


class ProviderError(NoteloomError):
    """A model call failed. ``code`` is stable; ``str(error)`` is for users."""

    def __init__(self, code: ErrorCode, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.provider = provider
        self.status = status


def provider_error(code: ErrorCode, label: str, detail: str = "", *, status: int | None = None) -> ProviderError:
    """A ``ProviderError`` with the friendly message of ``code``; ``detail`` is our own words,
    never upstream text."""
    message = FRIENDLY[code].format(label=label or "The model provider", detail=detail or "no details")
    if not detail:
        message = message.replace(" (no details)", "")
    return ProviderError(code, message, provider=label, status=status)


def code_for_status(status: int | None, *, error_type: str | None = None, error_code: str | None = None,
                    text: str = "") -> ErrorCode:
    """The code for an HTTP status plus what the body said (an error ``type`` or ``code``)."""
    kind = (error_type or "").lower()
    code = (error_code or "").lower()
    lowered = text.lower()
    # Body fields win: a mid-stream error arrives with HTTP 200.
    if kind in ("overloaded_error",) or status == 529:
        return "api_overloaded"
    if code == "insufficient_quota" or kind in ("insufficient_quota", "billing_error") or status == 402:
        return "api_quota_exceeded"
    if kind in ("rate_limit_error", "rate_limit_exceeded") or code == "rate_limit_exceeded" or status == 429:
        if "quota" in lowered or "credit" in lowered or "billing" in lowered:
            return "api_quota_exceeded"
        return "api_rate_limited"
    if kind in ("authentication_error", "permission_error", "invalid_api_key") or code == "invalid_api_key":
        return "api_auth_failed"
    if status in (401, 403):
        return "api_auth_failed"
    if kind in ("api_error", "server_error") or (status is not None and status >= 500):
        return "api_overloaded" if status == 503 and "overload" in lowered else "api_server_error"
    if kind in ("invalid_request_error", "not_found_error", "request_too_large") or (
        status is not None and 400 <= status < 500
    ):
        if "api key" in lowered or "unauthorized" in lowered:
            return "api_auth_failed"
        if "credit balance" in lowered or "billing" in lowered:
            # Anthropic reports an empty balance as a 400 invalid_request_error.
            return "api_quota_exceeded"
        return "api_request_invalid"
    return "api_stream_error"


def body_error(body: Any) -> tuple[str | None, str | None, str]:
    """``(type, code, message)`` from an error body in either vendor's shape."""
    if not isinstance(body, Mapping):
        return None, None, str(body or "")
    inner = body.get("error", body)
    if not isinstance(inner, Mapping):
        return None, None, str(inner)
    kind, code, message = inner.get("type"), inner.get("code"), inner.get("message")
    return (
        str(kind) if kind is not None else None,
        str(code) if code is not None else None,
        str(message) if message is not None else "",
    )
