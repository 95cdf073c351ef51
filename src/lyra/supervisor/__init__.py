"""Many children: the Supervisor, its fan-out, quorum, graceful failure and the answer."""

from lyra.supervisor._answer import (
    LAST_RESORT,
    AnswerFacts,
    AnswerWriter,
    ModelAnswerWriter,
    TemplateAnswerWriter,
    final_answer,
)
from lyra.supervisor._callback import OutcomeCallback
from lyra.supervisor._executor import (
    Executor,
    LocalExecutor,
    isolated,
    lost_outcome,
    notify,
    unrun_outcome,
)
from lyra.supervisor._graceful import ErrorContext, Graceful, error_context
from lyra.supervisor._health import ServiceHealth, probe
from lyra.supervisor._job import Job, OnOutcome, Task
from lyra.supervisor._quorum import ChildOutcome, QuorumDecision, QuorumPolicy, decide
from lyra.supervisor._rundir import RunDir, file_stem, write_atomic
from lyra.supervisor._supervisor import Supervisor

__all__ = [
    "LAST_RESORT",
    "AnswerFacts",
    "AnswerWriter",
    "ChildOutcome",
    "ErrorContext",
    "Executor",
    "Graceful",
    "Job",
    "LocalExecutor",
    "ModelAnswerWriter",
    "OnOutcome",
    "OutcomeCallback",
    "QuorumDecision",
    "QuorumPolicy",
    "RunDir",
    "ServiceHealth",
    "Supervisor",
    "Task",
    "TemplateAnswerWriter",
    "decide",
    "error_context",
    "file_stem",
    "final_answer",
    "isolated",
    "lost_outcome",
    "notify",
    "probe",
    "unrun_outcome",
    "write_atomic",
]
