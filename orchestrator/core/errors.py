"""The error codes every surface answers with.

Owns the one exception type that crosses from validation and the store to the command surface, where it
becomes `{"status": "error", "error": CODE, "message": TEXT}`. The codes are the SPEC's section 8 list, with
`unauthorized` and `rate_limited` (section 13) that the HTTP door answers too, and `past_retention` for history
retention deleted (section 14).
"""

from __future__ import annotations

from typing import Any, Literal

ErrorCode = Literal[
    "invalid_request",
    "not_found",
    # Retention deleted the history asked about (SPEC section 14): explain, replay and redeliver say so.
    "past_retention",
    "session_not_open",
    "rev_conflict",
    "limit_exceeded",
    "access_denied",
    "unauthorized",
    "rate_limited",
    "internal_error",
]


class CommandError(Exception):
    """A refusal with a code and a message that names the field or the thing at fault."""

    def __init__(self, code: ErrorCode, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        # `rate_limited`: whole seconds until a retry may pass (HTTP's `Retry-After`).
        self.retry_after = retry_after

    def reply(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"status": "error", "error": self.code, "message": self.message}
        if self.retry_after is not None:
            answer["retry_after"] = self.retry_after
        return answer
