-- How far each lane has fired: the largest event id of the batches that left it (run started, written,
-- stopped by a guard or consumed). The router holds new events back from a lane that has events it has
-- not fired although their window has closed (its slot is taken), and hands them over once this moves.
ALTER TABLE lanes ADD COLUMN fired_through bigint NOT NULL DEFAULT 0;

-- Each routing round that signals or moves the position counts one more generation. A router keeps what it
-- held back between its rounds only while the generation is the one it left: a round of another worker in
-- between may have delivered those events already.
ALTER TABLE routing_cursors ADD COLUMN generation bigint NOT NULL DEFAULT 0;
