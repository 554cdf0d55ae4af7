-- Keys, the short-lived passes a key signs a browser in with, and shared rate buckets (SPEC section 13).
-- docs/security.md explains the model. An event's actor needs no column: its request's cause names the key,
-- and the envelope derives it (`orchestrator.core.events.actor_of`).

-- An API key. The secret is `ork_<id>_<32 random bytes, base64url>`: `id` finds the row, and only the SHA-256 of
-- the whole secret is kept (a random 32-byte secret needs no slow hash or pepper: nothing can be guessed from
-- the digest). Names are never reused, revoked keys included, so an event's actor names one key for ever.
CREATE TABLE api_keys (
    id                  text PRIMARY KEY,
    name                text NOT NULL UNIQUE,
    hash                bytea NOT NULL,
    scopes              jsonb NOT NULL,
    requests_per_second double precision,
    created_at          timestamptz NOT NULL DEFAULT clock_timestamp(),
    expires_at          timestamptz,
    revoked_at          timestamptz
);

-- What a key hands a browser: a session cookie (`cookie`, an hour) or a single-use stream ticket (`ticket`, half
-- a minute, for one session's stream). Only the SHA-256 of each is kept. `key_name` is an `api_keys` name, or
-- `bootstrap` for ORCHESTRATOR_API_TOKEN (then `key_hash` is the token's digest, so that its passes are worth
-- nothing once the token changes); a pass is worth nothing once its key is revoked or expired.
CREATE TABLE key_passes (
    hash       bytea PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('cookie', 'ticket')),
    key_name   text NOT NULL,
    session_id text,
    expires_at timestamptz NOT NULL,
    key_hash   bytea
);
CREATE INDEX key_passes_expiry ON key_passes (expires_at);

-- Token buckets every API replica shares (`key:<name>` per key, `session:<id>` per session's writes). A replica
-- takes a lease of tokens at a time (`orchestrator.core.rate_leases`). A bucket untouched for long is full
-- again, the same as no row: those rows are dropped now and then.
CREATE TABLE rate_buckets (
    bucket      text PRIMARY KEY,
    tokens      double precision NOT NULL,
    refilled_at timestamptz NOT NULL
);

-- Refill the bucket for the time since it was last refilled (at `p_rate` per second, up to `p_burst`), then take
-- up to `p_want` tokens when it holds at least `p_need`: answers what was granted (0: refused) and, when refused,
-- the seconds until `p_need` tokens are there.
CREATE FUNCTION orchestrator_take_tokens(p_bucket text, p_rate double precision, p_burst double precision,
                                         p_want double precision, p_need double precision)
RETURNS TABLE (o_granted double precision, o_wait double precision) LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_have double precision;
BEGIN
    INSERT INTO rate_buckets AS b (bucket, tokens, refilled_at) VALUES (p_bucket, p_burst, v_now)
        ON CONFLICT (bucket) DO UPDATE
        SET tokens = least(p_burst, b.tokens + greatest(0, extract(epoch FROM v_now - b.refilled_at)) * p_rate),
            refilled_at = v_now
        RETURNING b.tokens INTO v_have;
    IF v_have >= p_need THEN
        o_granted := least(v_have, greatest(p_want, p_need));
        o_wait := 0;
        UPDATE rate_buckets SET tokens = v_have - o_granted WHERE bucket = p_bucket;
    ELSE
        o_granted := 0;
        o_wait := (p_need - v_have) / p_rate;
    END IF;
    RETURN NEXT;
END
$$;
