"""Agents' own hooks: fleetdeck installs itself into them (install.py) and answers them (run.py)."""
