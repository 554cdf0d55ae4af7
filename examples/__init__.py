"""Example applications for the platform (`orchestrator dev` runs `examples.missions.app` by default)."""
