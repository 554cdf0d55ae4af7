-- Refill the bucket for the time since it was last refilled (at `p_rate` per second, up to `p_burst`), then take
-- up to `p_want` tokens when it holds at least `p_need`: answers what was granted (0: refused) and, when refused,
-- the seconds until `p_need` tokens are there.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_take_tokens(p_bucket text, p_rate double precision,
    p_burst double precision,
                                         p_want double precision, p_need double precision)
RETURNS TABLE (o_granted double precision, o_wait double precision) LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_have double precision;
BEGIN
    INSERT INTO orchestrator.rate_buckets AS b (bucket, tokens, refilled_at) VALUES (p_bucket, p_burst, v_now)
        ON CONFLICT (bucket) DO UPDATE
        SET tokens = least(p_burst, b.tokens + greatest(0, extract(epoch FROM v_now - b.refilled_at)) * p_rate),
            refilled_at = v_now
        RETURNING b.tokens INTO v_have;
    IF v_have >= p_need THEN
        o_granted := least(v_have, greatest(p_want, p_need));
        o_wait := 0;
        UPDATE orchestrator.rate_buckets SET tokens = v_have - o_granted WHERE bucket = p_bucket;
    ELSE
        o_granted := 0;
        o_wait := (p_need - v_have) / p_rate;
    END IF;
    RETURN NEXT;
END
$$;
