"""The "Your traffic" workload analyzer: read a user's JSONL trace (tokenizing prompt and chat lines),
then analyse it with kvviz.analysis.workload.reuse_distance and replay it through kvviz's block pool."""
