"""Children as lyra runs them: any child as one coroutine function, and a child
named by where it lives (:class:`ChildRef`), built once per process."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import reprlib
import sys
from collections.abc import Callable, Iterable
from functools import cache, partial
from types import FunctionType
from typing import Any, cast
from weakref import ReferenceType, ref

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lyra._extras import framework_child_for
from lyra._text import qualified_type_name, safe_str, type_name
from lyra.delegation._callbacks import in_worker_thread
from lyra.delegation._context import Child, ChildFn
from lyra.errors import ConfigurationError


def as_callable(child: Child) -> ChildFn:
    """The coroutine function behind any child, checked before it runs.

    A plain (synchronous) function is accepted too: it runs in a worker
    thread, so its deadline still holds while it blocks.
    """
    known = _functions.get(id(child))
    if known is not None and known[0]() is child:  # a plain function seen before
        return cast(ChildFn, child) if known[1] else partial(in_worker_thread, child)
    run = getattr(child, "run", None)
    wrapper = framework_child_for(child)
    if wrapper is not None:  # a framework's agent has an async run, not a child's
        raise ConfigurationError(
            f"a {qualified_type_name(child)} is not a lyra child: wrap it in {wrapper}, "
            "which holds lyra's deadline, idle timeout and budget inside its run"
        )
    if run is not None and inspect.iscoroutinefunction(run):
        if isinstance(child, type):  # its run would take the prompt for self
            raise ConfigurationError(
                f"{child.__qualname__} is a class, not a child agent: pass an instance of "
                f"it ({child.__qualname__}(...))"
            )
        return run  # type: ignore[no-any-return]
    if inspect.isgeneratorfunction(child) or inspect.isasyncgenfunction(child):
        raise ConfigurationError(  # (it would run, and every task fail: "returned generator")
            f"{child.__qualname__} is a generator function, not a child agent: a child "
            "returns its output ('return text'), where it yields"
        )
    if inspect.iscoroutinefunction(child):
        _check_arguments(child)
        _remember(child, run, is_async=True)
        return child  # an async callable: a ChildFn
    if inspect.iscoroutinefunction(type(child).__call__):
        return child  # type: ignore[return-value]
    if callable(child):
        _check_arguments(child)
        _remember(child, run, is_async=False)
        return partial(in_worker_thread, child)
    raise ConfigurationError(
        f"{reprlib.repr(child)} is not a child agent: pass an async callable child(prompt, ctx) "
        "or an object with 'async def run(self, prompt, ctx)'"
    )


def _check_arguments(child: Callable[..., Any]) -> None:
    """A function that cannot take a child's ``(prompt, ctx)`` is the caller's mistake,
    said now, not every task's failure blamed on the child (a signature that cannot be
    read is taken on trust)."""
    try:
        inspect.signature(child).bind("prompt", "ctx")
    except ValueError:
        return
    except TypeError as exc:
        name = getattr(child, "__qualname__", None) or reprlib.repr(child)
        raise ConfigurationError(
            f"{name} is not a child agent: it must take (prompt, ctx), as "
            f"'async def child(prompt, ctx)' does ({exc})"
        ) from None


def check_callbacks(**callbacks: Any) -> None:
    """``verify=``, ``answer=`` and ``context_provider=`` as given: None or callables,
    else a TypeError now, not a failure blamed on the child once it has run (and been
    paid for)."""
    for name, value in callbacks.items():
        if value is not None and not callable(value):
            raise TypeError(f"{name}= must be a callable or None, not {reprlib.repr(value)}")


def checked_fallbacks(fallbacks: object) -> tuple[Child | ChildRef, ...]:
    """``fallbacks=`` as given: a list of children (a :class:`ChildRef` as it is, resolved
    where it runs), each checked now, not once the first child has failed (and been paid
    for); a ConfigurationError otherwise (a string too, which names one child)."""
    if isinstance(fallbacks, str | bytes | ChildRef) or not isinstance(fallbacks, Iterable):
        raise ConfigurationError(
            f"fallbacks= is a list of children, not {reprlib.repr(fallbacks)} (a child "
            "reference goes in a list: fallbacks=[ChildRef(target='module:attr')])"
        )
    found = tuple(fallbacks)
    for fallback in found:
        if not isinstance(fallback, ChildRef):
            as_callable(fallback)
    return found


def child_name(child: object) -> str:
    """A child as a report names it: its ``name`` if it has one (a framework child
    names its agent and model), else its function's or class's name."""
    name = getattr(child, "name", None)
    if isinstance(name, str) and name:
        return safe_str(name)
    if isinstance(child, ChildRef):
        return child.target
    named = child if inspect.isfunction(child) or inspect.ismethod(child) else type(child)
    return safe_str(getattr(named, "__qualname__", None) or type_name(child))


_functions: dict[int, tuple[ReferenceType[Any], bool]] = {}
"""Plain functions (``async def`` or ``def``) already checked, by id, and whether they
are async, with a reference that drops the entry when the function goes (lyra keeps no
function alive): the check and its reading of the signature are the same every call."""
_REMEMBERED = 4096


def _remember(child: Any, run: object, *, is_async: bool) -> None:
    """Remember ``child`` as checked when it is a plain function (one given a ``run``
    attribute is looked at again each time)."""
    if type(child) is not FunctionType or run is not None:
        return
    if len(_functions) >= _REMEMBERED:
        _functions.clear()
    key = id(child)
    _functions[key] = (ref(child, lambda _: _functions.pop(key, None)), is_async)


_TARGET = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*$")


class ChildRef(BaseModel):
    """A child named by where it lives, so that another process can build it.

    ``target`` is ``module:attribute``. With ``options`` (JSON data), or when
    the attribute is a class or a plain function that takes no arguments (and
    cannot take a child's ``prompt, ctx``), it is a factory called with the
    options as keyword arguments; otherwise the attribute is the child itself.
    Durable runs and ``lyra worker`` resolve children this way.
    """

    model_config = ConfigDict(frozen=True, defer_build=True, extra="forbid")

    target: str = Field(description="module:attribute, e.g. lyra.proteins:ProteinChild")
    options: dict[str, Any] | None = Field(
        default=None, description="Keyword arguments (JSON data)."
    )

    @field_validator("target")
    @classmethod
    def _importable(cls, value: str) -> str:
        if not _TARGET.fullmatch(value):
            raise ValueError(f"{value!r} is not module:attribute (e.g. mypkg.agents:triage)")
        return value

    def resolve(self) -> Child:
        """The child this names (built once per process for the same reference)."""
        return _resolve(self.model_dump_json())


def resolved(child: Child | ChildRef) -> Child:
    """``child`` itself, or the child a :class:`ChildRef` names (built once per process)."""
    return child.resolve() if isinstance(child, ChildRef) else child


def _raised_at(exc: BaseException) -> str:
    """Where an import's error was raised (`` (at badmod.py:3)``), its innermost frame
    (a SyntaxError's message names its line itself)."""
    if isinstance(exc, SyntaxError):
        return ""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})" if tb is not None else ""


def _is_factory(found: Any) -> bool:
    """A class, or a plain (not async) function that takes no arguments and cannot take
    a child's ``(prompt, ctx)``: it builds the child. (A ``def child(*args)`` or a
    decorator's wrapper takes both: it is a child.)"""
    if inspect.isclass(found):
        return True
    if not inspect.isfunction(found) or inspect.iscoroutinefunction(found):
        return False
    try:
        signature = inspect.signature(found)
    except (TypeError, ValueError):
        return False
    return _binds(signature) and not _binds(signature, None, None)


def _binds(signature: inspect.Signature, *args: Any) -> bool:
    try:
        signature.bind(*args)
    except TypeError:
        return False
    return True


def _not_found(exc: ModuleNotFoundError, module: str) -> str:
    """Where Python looked for the child's missing module, and how to make it findable."""
    name = exc.name or ""
    if not (module == name or module.startswith(f"{name}.")):
        return str(exc)  # the child's module is there; something it imports is not
    places = [os.path.abspath(path or os.curdir) for path in sys.path[:2]]
    file = name.replace(".", "/")
    return (
        f"no module named {name!r} in {' or '.join(places)} (the first places on the import "
        f"path) or the installed packages; run from the folder that holds {file}.py (or "
        f"{file}/), add that folder to PYTHONPATH, or install the package"
    )


@cache
def _resolve(ref_json: str) -> Child:
    ref = ChildRef.model_validate_json(ref_json)
    target, options = ref.target, ref.options
    module_name, _, attribute = target.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        why = _not_found(exc, module_name)
        raise ConfigurationError(f"cannot load the child {target}: {why}") from None
    except ImportError as exc:
        raise ConfigurationError(f"cannot load the child {target}: {exc}") from None
    except Exception as exc:  # the module's own code raised as it was imported
        raise ConfigurationError(
            f"cannot load the child {target}: importing {module_name} raised "
            f"{type(exc).__name__}: {safe_str(exc)}{_raised_at(exc)}"
        ) from exc
    try:
        for part in attribute.split("."):
            found = getattr(found, part)
    except AttributeError as exc:
        raise ConfigurationError(f"cannot load the child {target}: {exc}") from None
    if options is not None or _is_factory(found):
        try:
            found = found(**(options or {}))
        except Exception as exc:
            why = safe_str(exc)
            if options is not None and not _is_factory(found):  # (the README's options={})
                why += f"; options= makes {target} a factory, and a child itself takes none"
            raise ConfigurationError(f"cannot build the child {target}: {why}") from exc
    as_callable(found)  # a clear error now for something that is no child
    return found  # type: ignore[no-any-return]
