"""The live watcher and the service that runs it."""
