/**
 * The client's errors: a refusal from the platform (`CommandError`, one subclass per code, each carrying the
 * platform's `code` and `message`), and a transport failure (`TransportError`: the API could not be reached, or
 * answered something that is not a reply). A refusal never changed anything on the platform.
 */

import type { ErrorCode } from "./generated";

/** A reply `{"status": "error", ...}`, as the platform sends it. */
export interface ErrorReply {
  status: "error";
  error: ErrorCode;
  message: string;
  /** `rate_limited`, `unavailable`: whole seconds until a retry may pass (HTTP's `Retry-After`). */
  retry_after?: number;
}

/** The platform refused a command; `code` says why and `message` starts with the field at fault. */
export class CommandError extends Error {
  readonly code: ErrorCode;
  /** The HTTP status it came with (none for a stream that ended with a refusal). */
  readonly status?: number;

  constructor(code: ErrorCode, message: string, status?: number) {
    // `message` is the platform's own text, as the Python client's `CommandError.message` is.
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
  }
}

export class InvalidRequestError extends CommandError {}
export class NotFoundError extends CommandError {}
export class PastRetentionError extends CommandError {}
export class SessionNotOpenError extends CommandError {}
export class RevConflictError extends CommandError {}
export class LimitExceededError extends CommandError {}
export class AccessDeniedError extends CommandError {}
export class UnauthorizedError extends CommandError {}
export class InternalError extends CommandError {}

/** A refusal that says when to try again (`retryAfterSeconds`, HTTP's `Retry-After`). */
export class RetryLaterError extends CommandError {
  readonly retryAfterSeconds?: number;

  constructor(code: ErrorCode, message: string, status?: number, retryAfterSeconds?: number) {
    super(code, message, status);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** `rate_limited`: the key's or the session's rate; retry after `retryAfterSeconds`. */
export class RateLimitedError extends RetryLaterError {}

/** `unavailable`: the platform's database is out of reach for now; retry after `retryAfterSeconds` (a write
 * retried with its `idempotency_key` is not made twice). */
export class UnavailableError extends RetryLaterError {}

const BY_CODE: Record<ErrorCode, typeof CommandError> = {
  invalid_request: InvalidRequestError,
  not_found: NotFoundError,
  past_retention: PastRetentionError,
  session_not_open: SessionNotOpenError,
  rev_conflict: RevConflictError,
  limit_exceeded: LimitExceededError,
  access_denied: AccessDeniedError,
  unauthorized: UnauthorizedError,
  rate_limited: RateLimitedError,
  unavailable: UnavailableError,
  internal_error: InternalError,
};

/** The typed error of an error reply (a code this client does not know yet is a plain `CommandError`). */
export function commandError(reply: Partial<ErrorReply>, status?: number): CommandError {
  const code = (typeof reply.error === "string" ? reply.error : "internal_error") as ErrorCode;
  const message = typeof reply.message === "string" ? reply.message : `HTTP ${status ?? "?"}`;
  if (code === "rate_limited" || code === "unavailable") {
    const Later = code === "rate_limited" ? RateLimitedError : UnavailableError;
    return new Later(code, message, status, reply.retry_after);
  }
  const Kind = Object.prototype.hasOwnProperty.call(BY_CODE, code) ? BY_CODE[code] : CommandError;
  return new Kind(code, message, status);
}

/** The API could not be reached, or did not answer with a reply (`cause` holds what went wrong). */
export class TransportError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TransportError";
  }
}
