"""`python -m fleet.agenthooks AGENT [--db PATH]`: the hook command agents run (it loads no CLI, no web)."""

import sys

from fleet.agenthooks.run import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], sys.stdin.buffer, sys.stdout, sys.stderr))
