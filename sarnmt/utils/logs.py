"""How log messages reach the user of a command (``sarnmt/conf/hydra/job_logging/stderr.yaml``): one line each on
stderr, ``warning: <message>`` (``error:``, ``critical:``) from a warning up, the message alone for information, in
the style of the ``error:`` lines of :mod:`sarnmt.errors`."""

from __future__ import annotations

import logging


class UserFormatter(logging.Formatter):
    """One line per record: a message of several lines is joined with ``; ``, an exception is added as
    ``(<type>: <message>)`` without its traceback."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [line.strip() for line in record.getMessage().splitlines() if line.strip()]
        message = "; ".join(parts)
        if record.exc_info and record.exc_info[1] is not None:
            err = record.exc_info[1]
            message += f" ({type(err).__name__}: {' '.join(str(err).split())})"
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        return message
