"""The error codes every surface answers with.

Owns the one exception type that crosses from validation and the store to the command surface, where it
becomes `{"status": "error", "error": CODE, "message": TEXT}`. The codes are the SPEC's section 8 list, with
`unauthorized` and `rate_limited` (section 13) that the HTTP door answers too, `past_retention` for history
retention deleted (section 14), and `unavailable` for a database out of reach (a try later may pass, where
`internal_error` says the platform failed).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, cast

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
    # The database or Temporal is out of reach for now (stopped, restarting, a pooler down): a try later may pass.
    "unavailable",
    "internal_error",
]


# How soon a command answered `unavailable` may try again, in whole seconds.
UNAVAILABLE_RETRY_SECONDS = 1
# A command that starts, stops or schedules on Temporal, in a process that has no Temporal (an in-process door
# run without its address): `unavailable`, naming what it needs.
NO_TEMPORAL = (
    "{what} needs Temporal, and this process has none: set ORCHESTRATOR_TEMPORAL_ADDRESS (`orchestrator call"
    " --local` finds the running `orchestrator dev`'s)"
)


class CommandError(Exception):
    """A refusal with a code and a message that names the field or the thing at fault."""

    def __init__(self, code: ErrorCode, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message
        # `rate_limited`, `unavailable`: whole seconds until a retry may pass (HTTP's `Retry-After`).
        self.retry_after = retry_after

    def reply(self) -> dict[str, Any]:
        answer: dict[str, Any] = {"status": "error", "error": self.code, "message": self.message}
        if self.retry_after is not None:
            answer["retry_after"] = self.retry_after
        return answer

    @classmethod
    def of_reply(cls, reply: Mapping[str, Any]) -> CommandError:
        """The refusal an error reply (`reply()`'s form) stands for."""
        later = reply.get("retry_after")
        code = cast(ErrorCode, str(reply.get("error", "internal_error")))
        return cls(code, str(reply.get("message", "")), retry_after=later if isinstance(later, int) else None)


def unavailable(what: Literal["database", "temporal"] = "database") -> CommandError:
    """The refusal of a command the database (or Temporal) could not be reached for (nothing says whether a write
    whose connection broke at its commit was made: its `idempotency_key` makes a retry safe)."""
    return CommandError(
        "unavailable",
        f"{what}: out of reach for now; try again (a write retried with its idempotency_key is not made twice)",
        retry_after=UNAVAILABLE_RETRY_SECONDS,
    )


# A retry answers what its key wrote first; a key the session holds for another write is refused instead.
KEY_REUSED = (
    "idempotency_key: this key names another write (another alias, or another kind), the session's or one given"
    " before it in this request"
)
