"""``python -m lyra``: the same as the ``lyra`` command."""

from lyra.cli import console

console()
