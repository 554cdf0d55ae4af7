"""The lanes' machinery, below the commands that reach it: the driver that takes a lane's step against the store
(`driver`), runs started and looked up on Temporal (`executions`), nudges to lane workflows, retention, the
workers' registry of workflow names, the simulation of a listener on stored events, and the in-memory twin of
Temporal's side used by the crossing tests."""
