"""Fault injection for demos and tests: ``--inject ID:FAULT[:ARG][@N]``.

A fault strikes every attempt, or only the first N attempts with ``@N``.

=====================  ===================================================
``hang``               analyze_structure never returns (fetch completed)
``slow:SECONDS``       every stage takes that long
``tool_error``         fetch raises a connection error
``structure_error``    analyze_structure raises (the protein ends partial, with a
                       structure-only plan too)
``rate_limit:SECONDS`` fetch gets a 429 with that retry-after
``malformed``          the source answers without a description
``not_found``          the source answers 404 (a soft failure)
=====================  ===================================================
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from lyra.proteins._aliases import resolve_protein_id

FaultKind = Literal[
    "hang", "slow", "tool_error", "structure_error", "rate_limit", "malformed", "not_found"
]
_NEEDS_ARG = {"slow", "rate_limit"}
_KINDS = {"hang", "slow", "tool_error", "structure_error", "rate_limit", "malformed", "not_found"}
_SPEC = re.compile(
    r"^(?P<id>[^:@]+):(?P<kind>[a-z_]+)(?::(?P<arg>[0-9.]+(?:[eE][-+]?\d+)?|inf))?(?:@(?P<n>\d+))?$"
)


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault for one protein."""

    protein_id: str
    kind: FaultKind
    seconds: float | None = None
    first_attempts: int | None = None
    """Strike only attempts 1..N; ``None`` strikes every attempt."""

    def strikes(self, attempt: int) -> bool:
        """True when this fault applies to the given (1-based) attempt."""
        return self.first_attempts is None or attempt <= self.first_attempts

    @property
    def spec(self) -> str:
        """The fault as ``ID:FAULT[:ARG][@N]`` (what :func:`parse_fault` reads)."""
        arg = f":{self.seconds:g}" if self.seconds is not None else ""
        times = f"@{self.first_attempts}" if self.first_attempts is not None else ""
        return f"{self.protein_id}:{self.kind}{arg}{times}"


def parse_fault(spec: str) -> Fault:
    """Parse ``ID:FAULT[:ARG][@N]``; a ValueError says what is wrong."""
    match = _SPEC.match(spec.strip())
    if match is None:
        raise ValueError(f"{spec!r} is not ID:FAULT[:ARG][@N] (for example P04637:hang@1)")
    kind, arg, n = match["kind"], match["arg"], match["n"]
    if kind not in _KINDS:
        raise ValueError(f"unknown fault {kind!r}; choose from {', '.join(sorted(_KINDS))}")
    if (kind in _NEEDS_ARG) != (arg is not None):
        need = "needs SECONDS, as in" if kind in _NEEDS_ARG else "takes no argument, as in"
        example = f"{kind}:2" if kind in _NEEDS_ARG else kind
        raise ValueError(f"fault {kind!r} {need} ID:{example}")
    if kind == "rate_limit" and arg == "inf":  # (a service names a time, or none: inf is none)
        raise ValueError(f"a retry-after is a finite number of seconds, not inf, in {spec!r}")
    if n is not None and int(n) < 1:
        raise ValueError(f"@N must be at least 1 in {spec!r}")
    return Fault(
        protein_id=resolve_protein_id(match["id"].strip().upper())[0],
        kind=kind,  # type: ignore[arg-type]
        seconds=float(arg) if arg is not None else None,
        first_attempts=int(n) if n is not None else None,
    )


def faults_by_protein(faults: Iterable[Fault | str]) -> Mapping[str, tuple[Fault, ...]]:
    """Group faults (parsed or as specs) by protein ID."""
    grouped: dict[str, list[Fault]] = {}
    for fault in faults:
        parsed = parse_fault(fault) if isinstance(fault, str) else fault
        grouped.setdefault(parsed.protein_id, []).append(parsed)
    return {key: tuple(value) for key, value in grouped.items()}
