"""What lyra's other packages use of the delegation machinery and a user does not:
one attempt run from outside (:func:`run_attempt`), the tree and the account it
belongs to, session ids, the report format's inner pieces, how a foreign error is
described. Not public API: it changes with lyra's own packages.

The rule (tests/test_architecture.py): another part of lyra imports from
``lyra.delegation`` the names of its ``__all__``, or those of this module's.
"""

from lyra._text import printable, qualified_type_name
from lyra.delegation._budget import Account
from lyra.delegation._child import (
    as_callable,
    check_callbacks,
    checked_fallbacks,
    child_name,
    resolved,
)
from lyra.delegation._context import folded_steps
from lyra.delegation._deadlines import deadlines
from lyra.delegation._delegate import (
    foreign_cancellation,
    log_failure,
    new_session_id,
    run_attempt,
)
from lyra.delegation._foreign import Kind as ErrorKind
from lyra.delegation._foreign import describe as describe_error
from lyra.delegation._limits import DEFAULT_MAX_REPEATS, check_timeout
from lyra.delegation._live import observed_pool
from lyra.delegation._report import HEADER as REPORT_HEADER
from lyra.delegation._report import report_boundary
from lyra.delegation._tree import SAME_STORM, Tree

__all__ = [
    "DEFAULT_MAX_REPEATS",
    "REPORT_HEADER",
    "SAME_STORM",
    "Account",
    "ErrorKind",
    "Tree",
    "as_callable",
    "check_callbacks",
    "check_timeout",
    "checked_fallbacks",
    "child_name",
    "deadlines",
    "describe_error",
    "folded_steps",
    "foreign_cancellation",
    "log_failure",
    "new_session_id",
    "observed_pool",
    "printable",
    "qualified_type_name",
    "report_boundary",
    "resolved",
    "run_attempt",
]
