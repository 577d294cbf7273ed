"""The SQLite index: schema, storage (`store`, storage only), the one handle provider (`pool`), scan and
`ingest` (read -> score -> store -> events), events, search, lost commits, freshness, and the lookups
through it (`target`: which repository a `repo` argument names)."""
