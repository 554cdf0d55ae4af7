-- How far each lane has fired: the largest event id of the batches that left it (run started, written,
-- stopped by a guard or consumed). The router holds new events back from a lane that has events it has
-- not fired although their window has closed (its slot is taken), and hands them over once this moves.
ALTER TABLE lanes ADD COLUMN fired_through bigint NOT NULL DEFAULT 0;

-- Each routing round that signals or moves the position counts one more generation. A router keeps what it
-- held back between its rounds only while the generation is the one it left: a round of another worker in
-- between may have delivered those events already.
ALTER TABLE routing_cursors ADD COLUMN generation bigint NOT NULL DEFAULT 0;

-- A session sticks to the router that routed it last for as long as it keeps routing it (a lease renewed by
-- every round), so what one router holds back is not delivered by another the moment it looks. A router that
-- dies lets its sessions go when the lease runs out.
ALTER TABLE routing_cursors ADD COLUMN router text, ADD COLUMN router_until timestamptz;
