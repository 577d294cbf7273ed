"""Live reads of one repository: its record, changes, history, diffs, refs, blame, conflicts."""
