"""The shared workshop room: one block pool (the engine's) for every browser session, cache salts, rate
limits, the presenter's reset."""
