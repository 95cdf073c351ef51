"""The ``lyra`` command line."""

from lyra.cli._main import main

__all__ = ["main"]
