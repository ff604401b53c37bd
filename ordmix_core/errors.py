"""The one exception a user's mistake raises: it carries a message a person can act on."""

from __future__ import annotations


class InputError(ValueError):
    """Bad input (file, column, row, option). The message names where and says the fix.

    The CLI prints ``str(err)`` on one line and exits 2; the dashboard shows it in an error box.
    """

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)
