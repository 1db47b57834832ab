"""Security experiments: the shared room service (salts, rate limits, presenter key) and hash collisions.

Combines the pure engine mirror (kvviz.mirror) with processes and services a pure mirror must not own."""
