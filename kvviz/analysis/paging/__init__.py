"""Paged vs contiguous KV memory, not the mirror: a model of where token slots sit in memory (waste, fit), with
no hashes and no prefix lookups; the mirror (kvviz.mirror) is the block pool that decides what is cached."""
