"""``python -m scskeleton``: the command line (see :mod:`scskeleton.cli`)."""

import sys

from .cli import main

sys.exit(main())
