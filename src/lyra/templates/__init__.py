"""Plain-text templates (prompts, answers, reports), rendered in one place.

:class:`Templates` loads the ``templates/`` folder of a package; lyra's own
are :data:`LYRA`. A workload built on lyra (such as :mod:`lyra.proteins`)
keeps its templates beside its code and renders them the same way.

The report template's values are escaped by the report module, which owns the
report format (rendering and parsing).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import jinja2

__all__ = ["LYRA", "Templates", "render"]


class Templates:
    """The jinja templates in ``<package>/templates``, each compiled once."""

    def __init__(self, package: str) -> None:
        self.package = package

    @cached_property
    def environment(self) -> jinja2.Environment:
        """The jinja environment (built on first use)."""
        return jinja2.Environment(
            loader=jinja2.PackageLoader(self.package, "templates"),
            autoescape=False,  # plain text for people and models, not HTML
            trim_blocks=True,
            lstrip_blocks=True,
            undefined=jinja2.StrictUndefined,
        )

    def get(self, name: str) -> jinja2.Template:
        """One template, loaded once."""
        return self.environment.get_template(name)

    def render(self, name: str, **values: Any) -> str:
        """Render one template."""
        return self.get(name).render(**values)


LYRA = Templates("lyra")
"""lyra's own templates."""


def render(name: str, **values: Any) -> str:
    """Render one of lyra's own templates."""
    return LYRA.render(name, **values)
