"""What a fit tells its user: the one exception for a user's mistake, and the warning classes.

Warnings are chosen by class where they arise (``race.fit_warnings``), never by matching
their text; each subclasses ``UserWarning``, so filters on it keep working. A warning waiting
to be issued is a ``FitWarning``: its class and its message.
"""

from __future__ import annotations

from typing import NamedTuple


class InputError(ValueError):
    """Bad input (file, column, row, option). The message names where and says the fix.

    The CLI prints ``str(err)`` on one line and exits 2; the dashboard shows it in an error box.
    """

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


class ClusterError(InputError):
    """A Dask worker left the cluster during a fit, and the blocks of ratings it held went with
    it: the fit stops and writes nothing. Not the input's fault, but it ends a command as an
    input error does: one line (what happened, and to run the fit again), exit 2."""


class ConvergenceWarning(UserWarning):
    """The chosen restart did not meet the stopping rule: ``max_iter`` was reached, or the
    fit was stopped (callback, Stop button) before every restart finished."""


class CollapseWarning(UserWarning):
    """The chosen fit attributes (nearly) every rating to spam: every restart collapsed, so the
    estimates sit at the prior mean."""


class SpamWarning(UserWarning):
    """The fit takes more than half of the ratings as spam: the labels rest on the few
    ratings it believes, and the crowd (or the spam component) deserves a look."""


class UndeterminedWarning(UserWarning):
    """More than a tenth of the items are undetermined (their two most probable levels tie):
    they need more ratings before their labels can be shipped."""


class FitWarning(NamedTuple):
    """A warning a fit will issue: its class (one of the above) and its message."""

    category: type[Warning]
    message: str
