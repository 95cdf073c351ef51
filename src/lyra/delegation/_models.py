"""Value objects of one delegation: failures and reports (the result is in ``_result``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from lyra._taxonomy import ErrorType, FailureCategory

Status = Literal["completed", "failed"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")


M = TypeVar("M", bound=BaseModel)


def builder(cls: type[M], *names: str) -> Callable[..., M]:
    """A maker of instances of ``cls`` from values lyra itself produced and checked,
    given positionally in the order of ``names``, without validating them again:
    what ``model_construct`` does, minus its per-field Python loop. The result of
    every delegation of a large fan-out is made here; anything built from foreign
    data goes through ordinary validation instead.

    ``names`` are every field, once, in the order ``{**defaults, **given}`` put
    them before (the fields with a default first, in the model's order), which is
    the order of ``model_dump``'s keys: a builder that would change it is refused.
    Instances are made to be kept by the hundred thousand: the fields go into a
    fresh instance's ``__dict__`` in the same order every time, so it shares its
    keys with every other instance made here (Python's key-sharing dictionaries:
    160 bytes for eleven fields instead of 464), and all of them share one
    fields-set (a frozen model never changes it; pydantic copies it before
    ``model_copy`` adds to it) instead of 728 bytes each.
    """
    order = tuple({**_defaults(cls), **dict.fromkeys(names)})
    if sorted(names) != sorted(cls.model_fields) or order != names:
        raise ValueError(f"a builder of {cls.__name__} takes every field once, as {order}")
    fields_set = set(names)
    new = cls.__new__

    def make(*values: Any) -> M:
        model = new(cls)
        vars(model).update(zip(names, values))  # noqa: B905 - always as many
        _set(model, "__pydantic_fields_set__", fields_set)
        _set(model, "__pydantic_extra__", None)
        _set(model, "__pydantic_private__", None)
        return model

    return make


def assembled(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """An instance holding exactly ``values`` (every field), built as
    ``model_construct`` builds one, with ``fields_set`` as the fields given."""
    model = _new(cls)
    _set_dict(model, values)
    _set_fields_set(model, fields_set)
    _set_extra(model, None)
    _set_private(model, None)
    return model


_set = object.__setattr__
_new = object.__new__  # BaseModel defines no __new__ of its own
# BaseModel's own slots, set through their descriptors: a third cheaper than a lookup each.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


@cache
def _defaults(cls: type[BaseModel]) -> dict[str, Any]:
    return {
        name: field.default
        for name, field in cls.model_fields.items()
        if field.default_factory is None and not field.is_required()
    }


def timed(status: object, duration: float | None) -> float | None:
    """A report's duration: a failure's is ``0.0`` when none is known, as its body
    states one (``Duration: 0.0s``), so that what it renders is what parsing gives."""
    return 0.0 if duration is None and status == "failed" else duration


def _none_if_blank(value: str | None) -> str | None:
    return value if value else None


class ChildFailure(_Frozen):
    """Why a child failed, what it finished first, and what to do next."""

    category: FailureCategory
    message: str
    session_id: str
    duration: float
    completed_steps: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    blocked_on: str | None = None
    suggested_retry: bool = False
    suggested_actions: tuple[str, ...] = ()
    tool_usage: dict[str, int] = Field(default_factory=dict)
    last_successful_tool: str | None = None
    error_type: ErrorType = ErrorType.UNKNOWN
    evidence: str = ""
    retry_after: float | None = None
    """Seconds the failing service asked us to wait, when it said so."""
    timeout: float | None = None
    """The deadline the attempt ran under, in seconds."""
    question: str | None = None
    """The question the child asked (``ctx.ask``) that nobody answered."""
    failed_tool: str | None = None
    """The tool whose exception ended the attempt, when a tool's did."""
    storm: bool = False
    """A rate limit met among siblings (a supervisor's pool, or after a sibling met it
    first): recovery sends the attempt again, without counting a retry, when it had
    done no work yet."""

    _blank = field_validator("blocked_on", "question")(_none_if_blank)

    @property
    def retryable(self) -> bool:
        """Alias of ``suggested_retry``, the name reports use."""
        return self.suggested_retry


class FailedDelegation(_Frozen):
    """A nested delegation (``ctx.delegate``) that failed, as its parent's report lists it."""

    session_id: str
    category: FailureCategory
    error_type: ErrorType = ErrorType.UNKNOWN


class TaskReport(_Frozen):
    """Everything a rendered report says; ``parse_report(render_report(r)) == r``.

    A completed report carries ``output``; a failed one the failure fields.
    Reports written by other tools may lack metadata, so most fields are optional.
    """

    status: Status
    session_id: str | None = None
    attempt: int = 1
    duration: float | None = Field(default=None, validate_default=True)
    """Seconds the attempt took (a failure's is ``0.0`` when none is known)."""
    subject: str | None = None
    output: str | None = None
    message: str | None = None
    category: FailureCategory | None = None
    retryable: bool | None = None
    error_type: ErrorType | None = None
    completed_steps: tuple[str, ...] = ()
    files_modified: tuple[str, ...] = ()
    blocked_on: str | None = None
    suggested_actions: tuple[str, ...] = ()
    retry_after: float | None = None
    """Seconds the failing service asked to wait (``<retry_after_s>``), if it did."""
    question: str | None = None
    """The question the child asked and nobody answered (``<question>``)."""
    tokens_used: int | None = None
    """Tokens charged to the delegation and everything below it (``<tokens_used>``)."""
    cost_usd: float | None = None
    """Spend charged, in US dollars (``<cost_usd>``)."""
    turns: int | None = None
    """Model calls or agent turns charged (``<turns>``)."""
    tool_calls: int | None = None
    """Tool calls charged, under a budget that limits them (``<tool_calls>``)."""
    parent_session_id: str | None = None
    """The session that delegated this one, for a nested delegation."""
    failed_delegations: tuple[FailedDelegation, ...] = ()
    """Nested delegations that failed under this one (``<failed_delegation>``)."""
    overrun_s: float | None = None
    """Seconds the result came after its deadline (``<overrun_s>``): code lyra cannot
    interrupt (a blocked event loop, a thread) held it past the deadline."""
    child: str | None = None
    """The child that produced the report, after a fallback chain moved on (``<child>``)."""
    fallbacks: tuple[str, ...] = ()
    """Each child the chain moved past, and why (``<fallback>``: ``child: why``)."""

    _blank = field_validator(
        "blocked_on", "session_id", "subject", "parent_session_id", "question", "child"
    )(_none_if_blank)

    @field_validator("duration")
    @classmethod
    def _failure_timed(cls, value: float | None, info: ValidationInfo) -> float | None:
        return timed(info.data.get("status"), value)
