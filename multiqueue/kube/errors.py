"""Typed errors for API server answers, each carrying the server's ``Status`` so callers can read its causes."""

from __future__ import annotations

from typing import Any

from multiqueue.loop.errors import ExpectedFailure


class KubeError(ExpectedFailure):
    """Any failed call to an API server."""


class TransportError(KubeError):
    """The request never got an answer: connection refused or reset, DNS, TLS, or a timeout."""


class ApiError(KubeError):
    """The server answered with an error status."""

    code = 0

    def __init__(self, status: dict[str, Any], code: int | None = None) -> None:
        self.status = status
        if code is not None:
            self.code = code
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def reason(self) -> str:
        return str(self.status.get("reason", ""))

    @property
    def message(self) -> str:
        return str(self.status.get("message", ""))

    @property
    def kind(self) -> str:
        """The resource the error is about (the Status details' kind, such as "namespaces"), if it says."""
        details = self.status.get("details")
        return str(details.get("kind") or "") if isinstance(details, dict) else ""

    @property
    def causes(self) -> list[dict[str, Any]]:
        details = self.status.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        return [c for c in causes if isinstance(c, dict)] if isinstance(causes, list) else []


class BadRequest(ApiError):
    code = 400


class Unauthorized(ApiError):
    code = 401


class Forbidden(ApiError):
    code = 403


class NotFound(ApiError):
    code = 404


class Conflict(ApiError):
    """409 with reason Conflict: the object changed since it was read. Re-read and decide again."""

    code = 409


class AlreadyExists(ApiError):
    code = 409


class Gone(ApiError):
    """410: the resourceVersion is older than the server keeps; re-list."""

    code = 410


class Invalid(ApiError):
    """422: the server refused the object; :attr:`causes` name the fields."""

    code = 422


class TooManyRequests(ApiError):
    code = 429

    @property
    def retry_after(self) -> float | None:
        details = self.status.get("details")
        seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
        return float(seconds) if isinstance(seconds, int | float) else None


class ServerError(ApiError):
    """5xx."""


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_for(code: int, status: dict[str, Any]) -> ApiError:
    """The typed error for an HTTP status code and the Status body that came with it."""
    if code == 409:
        return (
            AlreadyExists(status, code) if status.get("reason") == "AlreadyExists" else Conflict(status, code)
        )
    if code >= 500:
        return ServerError(status, code)
    return _BY_CODE.get(code, ApiError)(status, code)
