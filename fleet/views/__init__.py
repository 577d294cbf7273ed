"""Presentation models: what people and agents look at (the radar, the queue, repo listings, the repo page,
lost-commit recovery, digests), read from the index and shaped once for every surface."""
