-- The channel a session's wake-ups go to: `orchestrator_events_<shard>`, the shard the first 16 bits of the MD5
-- of the id's UTF-8 modulo 64, as `core/wake_shards.shard_of` computes it (UTF-8 whatever the database's encoding,
-- so both agree on every id). One router listens on each shard's channel (it holds the shard's advisory lock), so
-- a notification wakes one router, not every router of the deployment.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wake_channel(p_session text) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT 'orchestrator_events_'
        || (('x' || substr(md5(convert_to(p_session, 'UTF8')), 1, 4))::bit(16)::integer % 64)::text
$$;
