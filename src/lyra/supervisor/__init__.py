"""Many children: the Supervisor and its fan-out."""

from lyra.supervisor._supervisor import Supervisor

__all__ = ["Supervisor"]
