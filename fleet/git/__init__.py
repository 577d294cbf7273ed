"""The hardened git runner, git's own files, and parsers of git's output."""
