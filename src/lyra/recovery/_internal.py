"""What lyra's other packages use of the recovery loop and a user does not. Not public
API: it changes with lyra's own packages (the rule: tests/test_architecture.py)."""

from lyra.recovery._policy import checked_policy

__all__ = ["checked_policy"]
