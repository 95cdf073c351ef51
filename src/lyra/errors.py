"""lyra's exceptions.

Failures of a *child* never raise out of ``delegate_task``: they become
reports. The exceptions below are for the caller's mistakes, for signals a
child sends on purpose, for what a run cannot get past, and for the one
documented parser error. Every exception lyra defines is a ``LyraError``, here
or in the package named beside it (where it is raised)::

    LyraError
    ├── ConfigurationError        no child available, bad option (caller's fault)
    │   ├── DatabaseUnreachable   lyra.durable: the --database-url server cannot be reached
    │   └── CheckpointsDamaged    lyra.durable: a run's checkpoints are missing or damaged
    ├── RunStopped                the run cannot go on (its storage is full);
    │                             what finished is kept, a resume completes it
    ├── ReportParseError          text holds no lyra report (also a ValueError)
    ├── NotTextError              lyra.logs: the input is binary, not a log (also an OSError)
    ├── UnknownDelegation         lyra.detached: no delegation has this id (also a LookupError)
    ├── NoQuestion                lyra.detached: it waits for no answer (also a LookupError)
    ├── Stopped                   lyra.detached (internal): an attempt its client cancelled
    ├── DurableChildError         lyra.durable: a task's workflow ended without a result
    │                             (also a RuntimeError)
    ├── StageFailed               lyra.proteins (internal): a stage's soft failure
    ├── CallbackRaised            lyra.recovery (internal): a recovery callback of the
    │                             caller's failed; the loop ends on its last report
    └── ChildSignal               raised *inside* a child, classified, never escapes
        ├── ChildBlocked          ctx.block(category, reason) / report_blocker
        │   └── QuestionAsked     ctx.ask(question) and nobody answered
        ├── LoopDetected          the same tool call, repeated past max_repeats
        ├── ForeignCancellation   a cancellation nobody made, inside a framework's run
        ├── SubjectNotFound       the subject does not exist (404 soft failure)
        ├── InvalidInput          the input failed validation before any work
        ├── TaskRejected          the task itself is malformed (a model refused it)
        ├── TransientError        infrastructure hiccup worth retrying (retry_after)
        ├── IncompleteOutput      the child stopped early (model hit max_tokens)
        └── BudgetExhausted       ctx.charge went over the tree's budget

Two derive from ``BaseException`` on purpose, outside the tree: like
``KeyboardInterrupt``, each stops a whole durable run, and no ``except
Exception`` that contains one task's failure may hold it back::

    BaseException
    ├── NoWorkers                 lyra.durable: no worker took a queued child in time;
    │                             the children stay queued for a resume
    └── StorageGaveOut            lyra.durable (internal): the checkpoint storage failed
                                  under a task; DBOS would record an Exception as the
                                  workflow's end, where this leaves it pending for a
                                  resume; the run stops with RunStopped

Third-party errors (the Anthropic SDK, httpx) are translated in exactly one
place, :mod:`lyra.delegation._foreign`.
"""

from __future__ import annotations

from typing import Any

from lyra._taxonomy import FailureCategory

__all__ = [
    "BudgetExhausted",
    "ChildBlocked",
    "ChildSignal",
    "ConfigurationError",
    "ForeignCancellation",
    "IncompleteOutput",
    "InvalidInput",
    "LoopDetected",
    "LyraError",
    "QuestionAsked",
    "ReportParseError",
    "RunStopped",
    "SubjectNotFound",
    "TaskRejected",
    "TransientError",
]


class LyraError(Exception):
    """Base class of every exception lyra defines."""


class ConfigurationError(LyraError):
    """lyra cannot run as configured (for example, no child is available)."""


class RunStopped(LyraError):
    """The run cannot go on: the storage its checkpoints go to is full or cannot be
    written. Finished children are kept; a resume completes the rest once it can.
    Not a child's failure, so no child is reported failed for it."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        """The file that could not be written, when known."""
        self.output: object = None
        """What the run had when it stopped (what finished, what did not), as the
        application that ran it assembles its output; None when it sets none
        (``lyra.proteins.analyze`` sets its ``AnalysisOutput``, ``interrupted``)."""


class ReportParseError(LyraError, ValueError):
    """The text holds no lyra report, or the report is malformed beyond repair."""


class ChildSignal(LyraError):
    """A failure a child raises on purpose so that it is classified precisely."""


class ChildBlocked(ChildSignal):
    """The child declared itself blocked; raised by ``ChildContext.block``."""

    def __init__(self, category: FailureCategory, reason: str) -> None:
        super().__init__(reason)
        self.category = category
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled with its own arguments, not args)
        return type(self), (self.category, self.reason), self.__dict__


class QuestionAsked(ChildBlocked):
    """The child asked a question (``ctx.ask``) that nobody could answer: the attempt
    ends as ``missing_context`` / ``input_required`` with the question in its report."""

    def __init__(self, question: str, *, answerer_failed: str | None = None) -> None:
        super().__init__(FailureCategory.MISSING_CONTEXT, f"Needs an answer: {question}")
        self.question = question
        self.answerer_failed = answerer_failed
        """Why the answerer gave none when it raised (``ValueError: …``): the caller's
        ``answer=`` failed, not the child."""

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.question,), self.__dict__


class LoopDetected(ChildSignal):
    """The child called the same tool with the same arguments more than ``max_repeats``
    times: a loop, not progress; the attempt ends as ``timeout`` / ``loop``."""

    def __init__(self, tool: str, arguments: str, count: int) -> None:
        super().__init__(
            f"Loop: {tool} was called {count} times with the same arguments ({arguments})"
        )
        self.tool = tool
        self.arguments = arguments
        """The arguments, as text (shortened)."""
        self.count = count

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.tool, self.arguments, self.count), self.__dict__


class ForeignCancellation(ChildSignal):
    """A ``CancelledError`` or ``GeneratorExit`` that code inside a framework's run
    raised (a future someone else cancelled; not the delegation's own cancellation,
    nor a coroutine being closed), brought back as an ordinary exception so that it is
    classified as a cancellation from outside the delegation. ``__cause__`` holds it."""


class SubjectNotFound(ChildSignal, LookupError):
    """The task's subject (a protein, a file) does not exist."""


class InvalidInput(ChildSignal, ValueError):
    """The input failed validation before any work was done."""


class TaskRejected(ChildSignal):
    """The task itself is malformed or was refused (a model's ``refusal``)."""


class TransientError(ChildSignal):
    """A transient infrastructure failure; ``retry_after`` in seconds if known."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        status: int | None = None,
        error_type: str = "connection",
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
        self.error_type = error_type
        """The fine cause when no status says it: an :class:`~lyra.ErrorType` value."""


class IncompleteOutput(ChildSignal):
    """The child stopped before finishing (for a model: ``max_tokens``)."""


class BudgetExhausted(ChildSignal):
    """Raised by ``ctx.charge`` when a charge takes the delegation tree over its
    budget; the attempt ends at once, classified ``timeout`` / ``budget``. A child
    raises it too when a limit of its own ran out (a framework's maximum of steps,
    in a child that wraps one): rule 1, retryable after progress."""
