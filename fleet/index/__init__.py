"""The SQLite index: schema, storage, scan, events, search, lost commits, freshness."""
