-- The channel a session's wake-ups go to: `orchestrator_events_<shard>`, the shard the first 16 bits of the id's
-- MD5 modulo 64, as `core/wake_shards.shard_of` computes it. One router listens on each shard's channel (it holds
-- the shard's advisory lock), so a notification wakes one router, not every router of the deployment.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wake_channel(p_session text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'orchestrator_events_' || (('x' || substr(md5(p_session), 1, 4))::bit(16)::integer % 64)::text
$$;
