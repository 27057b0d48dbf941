"""One exception type for a user's mistake, and the guard that turns it into one clear line."""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


class UserError(Exception):
    """Bad input, missing data or a wrong path: something the user can fix.

    The message says what is wrong and where (file, line). Entry points print it
    without a traceback and exit with status 2.
    """


def exit_on_user_error(func: F) -> F:
    """Decorate an entry point: a UserError becomes `error: ...` on stderr and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr, flush=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
