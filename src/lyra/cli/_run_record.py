"""A run's identity, ``run.json`` in its run directory: read without loading the
durable engine, so that a plain ``lyra analyze --run-dir DIR`` can tell whether DIR
holds a durable run (and refuse to mix the two) at no cost."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from lyra.errors import ConfigurationError
from lyra.proteins import AnalyzeRequest

RUN_FILE = "run.json"


class RunRecord(BaseModel):
    """What ``run.json`` holds."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    run_id: str
    backend: Literal["embedded", "postgres"]
    request: AnalyzeRequest
    database: str | None = None
    """host:port/name of the PostgreSQL database (no user, no password)."""


def resume_command(folder: Path | str, *, postgres: bool = False) -> str:
    """The command that finishes the durable run in ``folder`` (its database URL stays
    ``URL``: the user has it, and a log line must not carry a password)."""
    queue = " --database-url URL" if postgres else ""
    return f"lyra analyze --resume {folder}{queue}"


def load_record(folder: Path | None) -> RunRecord | None:
    """The run record in ``folder``, or None where there is none; a usage error for
    one that cannot be read."""
    if folder is None or not (folder / RUN_FILE).is_file():
        return None
    try:
        return RunRecord.model_validate_json((folder / RUN_FILE).read_bytes())
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or first_line(exc)
        raise ConfigurationError(
            f"{folder / RUN_FILE} is not a readable lyra run record ({reason})"
        ) from None


def another_run(folder: Path | str) -> ConfigurationError:
    """The refusal of a new run in a folder that holds another one's files (the two
    would mix: reports, results and the logs' counts of both)."""
    return ConfigurationError(
        f"{folder} already holds a run; choose another --run-dir "
        "(or leave it out for a new folder under runs/)"
    )


def first_line(exc: Exception) -> str:
    """The gist of an error reading a state file, in one line of at most 200 characters."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where + ': ' if where else ''}{first['msg']}"[:200]
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else type(exc).__name__
