-- Each captured kind declares its own closed schema (`store/captures.captured_schema`): `.created` and `.deleted`
-- `_id` and `doc`, `.updated` also `changed` and `removed`, and no other field, so a path no captured event of a
-- listener's types can have is refused at save. The types of captures made before, which all three declared one
-- open schema, take theirs here, so the door refuses what an app's plan refuses.
WITH shape AS (
    SELECT '{"_id": {}, "doc": {"type": "object"}}'::jsonb AS row_fields,
           '{"changed": {"type": "array", "items": {"type": "string"}},
             "removed": {"type": "array", "items": {"type": "string"}}}'::jsonb AS change_fields,
           '["_id", "doc"]'::jsonb AS required
)
UPDATE orchestrator.event_types t
    SET schema = jsonb_build_object(
            'type', 'object',
            'properties', s.row_fields || CASE WHEN t.name = c.type_prefix || '.updated' THEN s.change_fields
                                               ELSE '{}'::jsonb END,
            'required', s.required,
            'additionalProperties', false),
        saved_at = clock_timestamp()
    FROM orchestrator.captures c, shape s
    WHERE t.name IN (c.type_prefix || '.created', c.type_prefix || '.updated', c.type_prefix || '.deleted')
      AND t.schema = jsonb_build_object('type', 'object', 'properties', s.row_fields || s.change_fields,
                                        'required', s.required);
