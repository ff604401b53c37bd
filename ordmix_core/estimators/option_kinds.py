"""A fit option (``Option``) and the kinds of value it takes, each checking a value and parsing
command-line text; the estimator registers itself here so that the defaults are its own.

``options`` declares every fit option once with one of these kinds (a whole number in a range,
a real number, a choice, a flag, a seed, a scale, probabilities, an earlier fit); the command
line, the dashboard and ``compare`` read the table, so a value is checked and reported alike
everywhere."""

from __future__ import annotations

import argparse
import functools
import inspect
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.scale import Scale, as_scale, fmt_scale
from ..errors import InputError

# --------------------------------------------------------------------------- the table
#: resource bounds: a run never allocates for more restarts or sweeps than these
MAX_RESTARTS = 1000

MAX_ITER = 100_000

#: prior hyperparameters (phi, eta, lambda) above this make every update degenerate
MAX_PRIOR = 1e6

#: a scale wider than this overflows squared distances in the likelihood
MAX_SCALE_SPAN = 1e150


# --------------------------------------------------------------------------- value kinds
class _Kind:
    """A kind of value: ``check`` (Python value), ``parse`` (command-line text), ``describe``.

    ``check`` and ``parse`` raise ``ValueError`` with a fragment such as ``"must be a whole
    number from 1 to 1000, not 0"``; the caller puts the parameter or flag name in front.
    """

    none: str | None = None  # what None means, when it is allowed

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _bad(self, value: Any) -> ValueError:
        alt = f" (or None: {self.none})" if self.none else ""
        return ValueError(f"must be {self.describe()}{alt}, not {_show(value)}")

    def check(self, value: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, text: str) -> Any:
        return self.check(text)


def _show(value: Any) -> str:
    """A bad value as a message shows it: short, and ``repr`` so that text looks like text."""
    s = repr(value)
    return s if len(s) <= 60 else s[:57] + "..."


def _is_whole(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return _is_whole(v) or isinstance(v, (float, np.floating))


@dataclass(frozen=True)
class Whole(_Kind):
    lo: int
    hi: int | None = None
    none: str | None = None

    def describe(self) -> str:
        if self.hi is None:
            return f"a whole number >= {self.lo}"
        return f"a whole number from {self.lo} to {self.hi:,}"

    def check(self, value: Any) -> int | None:
        if value is None and self.none:
            return None
        if not _is_whole(value) or value < self.lo or (self.hi is not None and value > self.hi):
            raise self._bad(value)
        return int(value)

    def parse(self, text: str) -> int | None:
        try:
            value = int(text.strip())
        except ValueError:
            raise self._bad(text) from None
        return self.check(value)


@dataclass(frozen=True)
class Real(_Kind):
    lo: float | None = None  # None: any finite number
    hi: float | None = None
    lo_open: bool = False
    none: str | None = None

    def describe(self) -> str:
        if self.lo is None:
            return "a finite number"
        if self.lo == 0 and self.lo_open:
            return "a positive number" + ("" if self.hi is None else f" up to {self.hi:g}")
        if self.hi is None:
            return f"a number {'>' if self.lo_open else '>='} {self.lo:g}"
        if self.lo_open:
            return f"a number > {self.lo:g} and <= {self.hi:g}"
        return f"a number from {self.lo:g} to {self.hi:g}"

    def check(self, value: Any) -> float | None:
        if value is None and self.none:
            return None
        if not _is_real(value):
            raise self._bad(value)
        v = float(value)
        if not math.isfinite(v):
            raise self._bad(value)
        if self.lo is not None and (v < self.lo or (self.lo_open and v == self.lo)):
            raise self._bad(value)
        if self.hi is not None and v > self.hi:
            raise self._bad(value)
        return v

    def parse(self, text: str) -> float | None:
        try:
            value = float(text.strip())
        except ValueError:
            raise self._bad(text) from None
        return self.check(value)


@dataclass(frozen=True)
class Choice(_Kind):
    choices: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)

    def check(self, value: Any) -> str:
        if not isinstance(value, str) or value not in self.choices:
            raise self._bad(value)
        return value


@dataclass(frozen=True)
class OptionalFlag(_Kind):
    none: str | None = "as the model says"

    @property
    def choices(self) -> tuple[bool | None, ...]:
        """The values a dashboard select offers (None first: the model's)."""
        return (None, True, False)

    def describe(self) -> str:
        return "True or False"

    def check(self, value: Any) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, (bool, np.bool_)):
            raise self._bad(value)
        return bool(value)

    def parse(self, text: str) -> bool:
        t = text.strip().lower()
        if t in ("on", "true", "yes", "1"):
            return True
        if t in ("off", "false", "no", "0"):
            return False
        raise ValueError(f"must be on or off, not {_show(text)}")


@dataclass(frozen=True)
class OptionalChoice(_Kind):
    choices: tuple[str, ...] = ()
    none: str | None = "as the model says"

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)

    def check(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or value not in self.choices:
            raise self._bad(value)
        return value


@dataclass(frozen=True)
class Flag(_Kind):
    def describe(self) -> str:
        return "True or False"

    def check(self, value: Any) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise self._bad(value)
        return bool(value)


@dataclass(frozen=True)
class Seed(_Kind):
    none: str | None = "a fresh random seed"

    def describe(self) -> str:
        return "a whole number >= 0 or a numpy Generator"

    def check(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence)):
            return value
        if not _is_whole(value) or value < 0:
            raise self._bad(value)
        return int(value)

    def parse(self, text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise ValueError(f"must be a whole number >= 0, not {_show(text)}") from None
        if value < 0:
            raise ValueError(f"must be a whole number >= 0, not {_show(text)}")
        return value


@dataclass(frozen=True)
class ScaleKind(_Kind):
    none: str | None = "the distinct ratings seen"

    def describe(self) -> str:
        return (
            "finite numbers, strictly increasing without repeats, such as 1,2,3,4,5, or the "
            "levels' names, lowest first, such as low,medium,high"
        )

    def check(self, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, (Scale, str)) and not isinstance(value, (Sequence, np.ndarray)):
            raise self._bad(value)
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # a huge scale is refused below
                sc = as_scale(value, np.empty(0))
        except (InputError, TypeError, ValueError):
            raise self._bad(value) from None
        check_scale(sc)
        return value

    def parse(self, text: str) -> str:
        try:
            Scale.parse(text)
        except InputError:
            raise self._bad(text) from None
        self.check(text)
        return text  # kept as typed: the readers and summary.json take the text


def check_scale(sc: Scale) -> None:
    """A scale the arithmetic can work with: its width and its thresholds are finite.

    Raises ValueError (the callers name the scale's source).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is what is checked for
        span = float(sc.values[-1] - sc.values[0]) if sc.k > 1 else 0.0
        thresholds = sc.thresholds
    if not (math.isfinite(span) and span <= MAX_SCALE_SPAN) or not np.all(np.isfinite(thresholds)):
        raise ValueError(
            f"must span at most {MAX_SCALE_SPAN:g}, not {fmt_scale(sc)}; values that "
            "large are usually codes or typos, not ratings"
        )


@dataclass(frozen=True)
class Probabilities(_Kind):
    none: str | None = "uniform over the levels"

    def describe(self) -> str:
        return "positive finite numbers, one per level of the scale"

    def check(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, bytes)):
            raise self._bad(value)
        try:
            arr = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise self._bad(value) from None
        if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise self._bad(value)
        return value


@dataclass(frozen=True)
class PreviousFit(_Kind):
    """An earlier result to start from: an ``ordmix fit`` folder, or a fitted estimator.

    Only the form is checked here; ``refit.load_previous`` reads and checks the content.
    """

    none: str | None = "a fit from scratch"

    def describe(self) -> str:
        return "the output folder of an ordmix fit or a fitted OrdinalMixture"

    def check(self, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (str, os.PathLike)):
            if not os.fspath(value).strip():
                raise self._bad(value)
            return value
        if hasattr(value, "get_params") or hasattr(value, "items_"):
            return value
        raise self._bad(value)


# --------------------------------------------------------------------------- the table
_FROM_ESTIMATOR = object()


@dataclass(frozen=True)
class Option:
    """One fit option. ``default`` comes from ``OrdinalMixture``'s signature."""

    name: str  # the estimator's parameter
    kind: _Kind
    help: str  # plain language, no markup; the default is appended where it is shown
    label: str  # the dashboard's label
    group: str = "advanced"  # the dashboard's group: basic or advanced
    widget: str = "number"  # select, int, number, toggle, text or none (not in the dashboard)
    flag: str | None = None  # the command-line flag (None: Python API only)
    metavar: str | None = None
    const: Any = None  # a switch flag (no value) sets the parameter to this
    flag_help: str | None = None  # a switch flag's help (what giving the flag does)
    in_compare: bool = True  # offered by ``ordmix compare`` / ``experiment`` too
    front_default: Any = _FROM_ESTIMATOR  # the CLI's and dashboard's default, when not the API's
    widget_args: dict = field(default_factory=dict)  # min/max/step for number widgets
    doc: str = ""  # what a developer needs beyond ``help``: the estimator's docstring shows it

    @property
    def default(self) -> Any:
        """The estimator's default."""
        return estimator_default(self.name)

    @property
    def ui_default(self) -> Any:
        """The default of the command line and the dashboard."""
        return self.default if self.front_default is _FROM_ESTIMATOR else self.front_default

    @property
    def switch(self) -> bool:
        return self.flag is not None and self.const is not None

    def check(self, value: Any) -> Any:
        """The value, normalised; InputError naming the parameter if it is not valid."""
        try:
            return self.kind.check(value)
        except ValueError as e:
            raise InputError(f"{self.name} {e}") from None

    def cli_type(self, text: str) -> Any:
        """argparse ``type=``: the flag's text parsed and checked (ArgumentTypeError if bad)."""
        try:
            return self.kind.parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None


#: the estimator whose signature gives the defaults; ``estimators/ordinal_mixture.py``
#: registers ``OrdinalMixture`` when it is imported (the package's ``__init__`` imports it), so
#: this module, which the estimator imports for its checks, never imports the estimator back
_ESTIMATOR: list[type] = []


def register_estimator(cls: type) -> type:
    """Take the defaults from ``cls.__init__``'s signature (called once, by
    ``estimators/ordinal_mixture.py``)."""
    _ESTIMATOR[:] = [cls]
    _signature_defaults.cache_clear()
    return cls


@functools.cache
def _signature_defaults() -> dict[str, Any]:
    params = inspect.signature(_ESTIMATOR[0].__init__).parameters
    return {k: p.default for k, p in params.items() if k != "self"}


def estimator_default(name: str) -> Any:
    """``OrdinalMixture``'s default for parameter ``name``."""
    return _signature_defaults()[name]
