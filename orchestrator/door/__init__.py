"""The HTTP door: the API (`POST /v1/commands`, streams, the dashboard's files), who calls (keys, the bootstrap
token, browser sessions and stream tickets, rates: `gate`, `auth`, `browser`), the connection listeners
(`streams`) and the access log. Every command it takes goes through the registry in `orchestrator.commands`."""
