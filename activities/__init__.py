"""The platform's Temporal activities: every piece of I/O the lane engine's workflows need."""
