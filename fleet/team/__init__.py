"""Team mode: each machine pushes its own rows to a self-hosted PostgreSQL hub (docs/team.md).

Push, never sync: every hub row has one writer, the machine that owns the repository, and a machine keeps
working offline on its own index; the hub only ever receives. psycopg is an optional dependency
(`pip install 'fleetdeck[team]'`), imported only here and only when a team command runs.
"""
