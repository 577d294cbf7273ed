"""`python -m fleet` runs the same CLI as the `fleetdeck` console script."""

import sys

from fleet.cli import main

sys.exit(main())
