"""What DBOS logs, and where it goes: lyra's events, never a console of DBOS's own.

DBOS logs to the ``dbos`` logger and, left alone, gives it a console handler of
its own: a library user's stderr would get DBOS's lines (an ERROR per crash-looped
child, lyra's own documented outcome). lyra gives that logger a handler first,
so DBOS adds none: each record becomes a ``dbos_message`` event at the record's
level, going where lyra's events go -- nowhere unless configured (the command
line: the run's ``events.jsonl``, and stderr with ``-v``). An application that
gave the ``dbos`` logger handlers of its own keeps them, untouched.

What lyra says better itself is dropped: a checkpoint that could not be written
(a full disk: lyra stops the run in one line), a failed launch (one line too),
and a child DBOS gave up on after its process kept dying (``task_crash_loop``
and the task's failure are in lyra's log).
"""

from __future__ import annotations

import contextvars
import logging

from dbos._error import DBOSErrorCode

from lyra import events
from lyra.delegation import exception_text
from lyra.durable._database import storage_failure

_LOGGER = "dbos"
_GAVE_UP = f"DBOS Error {DBOSErrorCode.MaxRecoveryAttemptsExceeded.value}: "


class _ToEvents(logging.Handler):
    """DBOS's records as ``dbos_message`` events: ``message``, and ``error`` when the
    record carries an exception."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = {"message": record.getMessage()}
            if record.exc_info and record.exc_info[1] is not None:
                fields["error"] = exception_text(record.exc_info[1])
        except Exception:  # noqa: BLE001 - a record that cannot be formatted, as logging does
            self.handleError(record)
            return
        # In a context of its own: never one of the task events a workflow holds (their
        # numbering must not depend on what DBOS happened to say during one run of it).
        contextvars.Context().run(_say, record.levelno, fields)


def _say(level: int, fields: dict[str, str]) -> None:
    """A DBOS record as a ``dbos_message`` event at the record's level."""
    if level >= logging.ERROR:
        events.error(events.DBOS_MESSAGE, **fields)
    elif level >= logging.WARNING:
        events.warning(events.DBOS_MESSAGE, **fields)
    else:
        events.info(events.DBOS_MESSAGE, **fields)


def route() -> None:
    """Send the ``dbos`` logger's records to lyra's events (before DBOS starts, so that
    it adds no console of its own), unless it already has handlers; and drop those lyra
    says itself."""
    logger = logging.getLogger(_LOGGER)
    if not logger.handlers:  # ours from an earlier launch, or the application's own
        logger.addHandler(_ToEvents())
        logger.propagate = False  # as DBOS's own console: not again through the root
    logger.addFilter(_no_storage_failure)  # lyra stops the run and says so, in one line
    logger.addFilter(_no_crash_loop)  # lyra logs the task's failure and task_crash_loop


def _no_storage_failure(record: logging.LogRecord) -> bool:
    """Drop DBOS's report of a checkpoint it could not write (a full disk): one
    traceback per child in flight, where lyra stops the run with one line."""
    error = record.exc_info[1] if record.exc_info else None
    return error is None or storage_failure(error) is None


def _no_crash_loop(record: logging.LogRecord) -> bool:
    """Drop DBOS's "exceeded its maximum of N execution or recovery attempts"."""
    return _GAVE_UP not in record.getMessage()


def no_launch_failure(record: logging.LogRecord) -> bool:
    """Drop DBOS's own report of a failed launch (a traceback of tens of lines)."""
    return not record.getMessage().startswith("DBOS failed to launch")
