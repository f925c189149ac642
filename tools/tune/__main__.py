"""``python -m tools.tune``: see :mod:`tools.tune.cli`."""

import sys

from tools.tune.cli import main

sys.exit(main())
