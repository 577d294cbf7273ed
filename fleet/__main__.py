"""`python -m fleet` runs the same CLI as the `fleetdeck` console script."""

import sys

from fleet.cli import main

if __name__ == "__main__":  # not when a spawned worker process (the audit verifier's) re-imports this module
    sys.exit(main())
