"""Multi-turn sessions: what each turn of a chat or agent session reads from the cache, writes, computes."""
