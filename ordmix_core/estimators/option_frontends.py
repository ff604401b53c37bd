"""The options table as each front end reads it: the command line's flags (``add_fit_options``,
``to_estimator_kwargs``), the dashboard's widgets (``dashboard_options``), which options a
command offers (``options_for``) and the estimator's Parameters section (``parameters_doc``)."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .option_kinds import (
    Choice,
)
from .options import _BY_NAME, COMMANDS, GROUPS, OPTIONS, check_kwargs

if TYPE_CHECKING:  # annotations only
    from .option_kinds import Option


# --------------------------------------------------------------------------- front ends
def parameters_doc(indent: str = "    ") -> str:
    """The ``Parameters`` section of the estimator's docstring (numpydoc), from this table:
    each option's kind and default, its ``help`` and its ``doc``: the one description of each
    parameter, which the command line, the dashboard and ``help(OrdinalMixture)`` all show."""
    out = [f"{indent}Parameters", f"{indent}----------"]
    for o in OPTIONS:
        out.append(f"{indent}{o.name} : {o.kind.describe()}, default {o.default!r}")
        text = o.help[0].upper() + o.help[1:] + "." + (f" {o.doc}" if o.doc else "")
        out += textwrap.wrap(
            text, 96, initial_indent=indent * 2, subsequent_indent=indent * 2,
            break_on_hyphens=False, break_long_words=False,
        )  # fmt: skip
    return "\n".join(out)


def options_for(command: str) -> list[Option]:
    """The table's options with a flag that ``command`` offers, in table order."""
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}")
    return [o for o in OPTIONS if o.flag and (command == "fit" or o.in_compare)]


def _default_text(o: Option) -> str:
    d = o.ui_default
    if d is None:
        return o.kind.none or "none"
    return str(d)


def add_fit_options(
    parser: argparse.ArgumentParser, command: str, overrides: Mapping[str, Mapping] = {}
) -> None:
    """Add the table's flags for ``command`` (``fit``, ``compare``, ``experiment``).

    Each flag's ``dest`` is the estimator's parameter name, so :func:`to_estimator_kwargs`
    needs no mapping. ``overrides``: per parameter name, argparse keywords to replace (a
    command that gives a flag another meaning, as ``compare``'s ``--granularity``).
    """
    basic = parser.add_argument_group("fit options")
    advanced = parser.add_argument_group("model options (the paper's defaults)")
    for o in options_for(command):
        group = basic if o.group == "basic" else advanced
        text = (o.flag_help or o.help) if o.switch else o.help
        help_text = text if "(default:" in text else f"{text} (default: {_default_text(o)})"
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        kw: dict[str, Any] = dict(dest=o.name, default=o.ui_default, help=help_text)
        if o.switch:
            kw.update(action="store_const", const=o.const)
        else:
            kw.update(type=o.cli_type)
            if isinstance(o.kind, Choice):
                kw.update(choices=o.kind.choices)
            elif o.metavar:
                kw.update(metavar=o.metavar)
        kw.update(overrides.get(o.name, {}))
        group.add_argument(o.flag, **kw)


def to_estimator_kwargs(
    values: argparse.Namespace | Mapping[str, Any], *, names: Sequence[str] | None = None
) -> dict[str, Any]:
    """Estimator keyword arguments from parsed flags or a dashboard's settings.

    ``values``: an ``argparse.Namespace`` from :func:`add_fit_options`, or a mapping keyed
    by the estimator's parameter names (the dashboard's ``seed`` is accepted for
    ``random_state``). Only the table's options are taken; each is checked (InputError).
    ``names`` restricts the result to those parameters.
    """
    if isinstance(values, argparse.Namespace):  # the parsed flags and the command's own
        src = {k: v for k, v in vars(values).items() if k in _BY_NAME}
    else:  # a dashboard's settings: every key must be an option
        src = dict(values)
        if "seed" in src and "random_state" not in src:
            src["random_state"] = src.pop("seed")
    out = {k: v for k, v in src.items() if names is None or k in names}
    return check_kwargs(out)


def dashboard_options(group: str | None = None) -> list[Option]:
    """The options the dashboard shows (``widget != 'none'``), optionally of one group."""
    if group is not None and group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, not {group!r}")
    return [o for o in OPTIONS if o.widget != "none" and (group is None or o.group == group)]
