"""The store: PostgreSQL behind one protocol. Commands and activities talk to `Store`, never to asyncpg."""
