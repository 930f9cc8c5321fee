"""`python -m release`: the same command as `release`."""

import sys

from release.cli import main

sys.exit(main())
