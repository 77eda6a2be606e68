"""`python -m rltok.cli`, the same as `rltok`."""

import sys

from rltok.cli import main

sys.exit(main())
