"""The safety net: snapshots of every working tree, kept outside the repositories (docs/safety-net.md)."""
