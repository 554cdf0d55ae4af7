"""The error codes every surface answers with.

Owns the one exception type that crosses from validation and the store to the command surface, where it
becomes `{"status": "error", "error": CODE, "message": TEXT}`. The codes are the SPEC's section 8 list, and
`past_retention` for history retention deleted (section 14).
"""

from __future__ import annotations

from typing import Literal

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
    "internal_error",
]


class CommandError(Exception):
    """A refusal with a code and a message that names the field or the thing at fault."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message

    def reply(self) -> dict[str, str]:
        return {"status": "error", "error": self.code, "message": self.message}
