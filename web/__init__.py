"""The Starlette dashboard: a thin adapter over `fleet/`."""
