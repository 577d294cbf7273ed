"""Patch authoring: text diffs, patch generation, patch files."""
