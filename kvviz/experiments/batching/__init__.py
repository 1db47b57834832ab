"""Continuous-batching experiments on the real model (the Batching page's burst)."""
