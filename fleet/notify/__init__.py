"""Notifications of what needs the person (fleet.inbox), where the person is: ntfy, Slack, Discord and a
signed generic webhook (`[notify]` in the settings file). `config` reads the settings, `payloads` builds
each service's documented message, `dispatch` decides what to send (one per item and state, bursts as one
summary, quiet hours, per-kind switches) and delivers on threads of its own, `status` is what
`fleetdeck inbox --json` and the dashboard show of each notifier."""
