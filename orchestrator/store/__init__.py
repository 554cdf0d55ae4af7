"""The store: PostgreSQL through asyncpg. Commands and activities call its methods, never asyncpg directly."""
