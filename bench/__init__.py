"""``make bench``: one run, every ratio measured in that run. Each ``bench_*.py`` adds keys."""
