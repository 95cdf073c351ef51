"""lyra's plain-text templates (prompts, briefs, answers), rendered in one place.

The report template's values are escaped by :mod:`lyra.delegation._report`,
which owns the report format (rendering and parsing).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2


@cache
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("lyra", "templates"),
        autoescape=False,  # plain text for people and models, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )


def template(name: str) -> jinja2.Template:
    """One of lyra's text templates, loaded once."""
    return _env().get_template(name)


def render(name: str, **values: Any) -> str:
    """Render one of lyra's text templates."""
    return template(name).render(**values)
