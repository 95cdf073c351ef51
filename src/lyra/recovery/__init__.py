"""After a failure: pick a strategy by category, re-delegate, stop on budget."""

from lyra.recovery._api import adelegate_with_retry, delegate_with_retry
from lyra.recovery._decompose import Decomposer, ModelDecomposer, default_decomposer
from lyra.recovery._loop import (
    Attempt,
    AttemptRecord,
    AttemptRunner,
    Pause,
    RecoveryOutcome,
    Replay,
    attempt_plan,
    recover,
)
from lyra.recovery._policy import Fixer, RecoveryPolicy
from lyra.recovery._prompts import continuation_prompt, decompose, enriched_prompt
from lyra.recovery._strategies import AnswerSource, ContextProvider, Plan
from lyra.recovery._testing import is_testing, record_waits, set_testing, sleep

__all__ = [
    "AnswerSource",
    "Attempt",
    "AttemptRecord",
    "AttemptRunner",
    "ContextProvider",
    "Decomposer",
    "Fixer",
    "ModelDecomposer",
    "Pause",
    "Plan",
    "RecoveryOutcome",
    "RecoveryPolicy",
    "Replay",
    "adelegate_with_retry",
    "attempt_plan",
    "continuation_prompt",
    "decompose",
    "default_decomposer",
    "delegate_with_retry",
    "enriched_prompt",
    "is_testing",
    "record_waits",
    "recover",
    "set_testing",
    "sleep",
]
