-- A probe's key: the head of an alias, a path and the canonical text of the value there (equal JSON values, equal
-- text). Unit separators keep the parts apart: none of them can hold one.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_probe_key(p_alias text, p_path text, p_value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_alias || chr(31) || p_path || chr(31) || orchestrator.orchestrator_canonical(p_value)
$$;
