"""The live watcher, one module per job: `notifier` (file events via watchfiles), `watchset` (the dirs
watched per repo, per-repo polling fallback, routing), `schedule` (which repo to re-read next), `sweeps`
(re-reads without events, discovery, vanished repos), `periodic` (hooks run beside it), `watcher` (the
`Watcher` composing them) and `service` (the watcher as fleetdeck runs it)."""
