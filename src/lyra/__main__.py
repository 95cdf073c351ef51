"""``python -m lyra``: the same as the ``lyra`` command."""

import sys

from lyra.cli import main

sys.exit(main())
