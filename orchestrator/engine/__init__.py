"""The engine's processes: the worker (`worker`, and what the platform adds to it: `wiring`), the router that
routes committed events into lanes and nudges their workflows (`router`), and the sweep that settles runs whose
end was never reported (`run_sweep`). Above the commands; the lanes' own machinery is `orchestrator.lanes`."""
