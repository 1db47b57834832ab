"""Security experiments: the shared room service (salts, rate limits, presenter key) and hash collisions.

Combines the pure engine core (kvviz.core) with processes and services a pure core must not own."""
