"""`python -m rltok ...` (and `torchrun ... -m rltok train ...`): the `rltok` command."""

import sys

from rltok.cli import main

sys.exit(main())
