"""What ``lyra mcp`` and ``lyra answer`` use of detached delegations and a library
user does not: the context key that names an attempt's delegation, how to stop
watching one, and the run ID of the durable ones. Not public API.

The rule (tests/test_architecture.py): another part of lyra imports from
``lyra.detached`` the names of its ``__all__``, or those of this module's.
"""

from lyra.detached._durable import RUN_ID
from lyra.detached._watch import KEY, release

__all__ = ["KEY", "RUN_ID", "release"]
