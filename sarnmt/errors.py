"""How a bad input reaches the user: one line on stderr naming the file, line or key and what to do, and exit status 2.

Every error caused by what the user gave (a file, a line of it, a setting, a checkpoint) is a :class:`UserError`;
the domain errors are too (:class:`~sarnmt.checkpoints.reading.CheckpointError`,
:class:`~sarnmt.models.factory.ModelConfigError`, :class:`~sarnmt.sweep.spec.SpecError`,
:class:`~sarnmt.sweep.launch.SweepError`, :class:`~sarnmt.data.corpora.fetch.FetchError`,
:class:`~sarnmt.training.identity.RunMismatch`, :class:`~sarnmt.training.run_lock.RunFolderLocked`, :class:`InputError`,
:class:`WriteError`, :class:`TrainingStopped`). Every command line entry point runs its work inside
:func:`reported`, the one place that turns them, and operating-system errors on the user's paths (a missing file, a
directory where a file is expected, a full disk), into ``error: <message>`` and a non-zero exit status instead of a
traceback. A bug (any other exception) still shows its traceback. ``HYDRA_FULL_ERROR=1`` shows the traceback of
every error, these included, before the same ``error:`` line and exit status.
"""

from __future__ import annotations

import errno
import math
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

USER_ERROR_STATUS = 2
FULL_ERROR = "HYDRA_FULL_ERROR"
USER_FULL_ERROR = "SARNMT_FULL_ERROR"  # the user's HYDRA_FULL_ERROR where a command sets it (utils/hydra_app.py)


class UserError(Exception):
    """An error caused by the user's input, whose message names the file, line or key and says what to do."""

    prefix = "error"


class InputError(UserError, ValueError):
    """A file, a line of it or a setting that cannot be used as given."""


class WriteError(UserError, OSError):
    """An output that could not be written (e.g. the disk is full); the previous file, if any, is unchanged."""


class TrainingStopped(UserError, RuntimeError):
    """A training run stopped on purpose (e.g. too many non-finite updates in a row); the message says why and
    which checkpoint to resume from. ``status`` is the exit status (2; 128 + signal for a preemption)."""

    prefix = "stopped"

    def __init__(self, message: str, status: int = USER_ERROR_STATUS) -> None:
        super().__init__(message)
        self.status = status


def check_range(
    key: str,
    value: object,
    minimum: float,
    maximum: float | None = None,
    why: str = "",
    whole: bool = False,
    why_below: str = "",
) -> None:
    """Validate a numeric setting where it enters (the composed config, or a checkpoint's stored one): the one form of
    a range check, whatever the command.  :param key: its name on the command line (``batch_size``).
    :param why: what the maximum protects (memory, time), said when it is exceeded.
    :param whole: an integer is required (a size, a count): ``2.5`` is refused as a string is.
    :param why_below: what the minimum counts (``<eos>`` and ``<unk>`` in a vocabulary), said when it is not reached.

    :raises InputError: ``<key>=<value>: must be <minimum> or more`` (or at most ``maximum``; a finite number: nan
        and inf are refused; a number, or a whole number, with the whole range), one line.
    """
    span = f"between {minimum} and {maximum:,}" if maximum is not None else f"{minimum} or more"
    if isinstance(value, float) and not math.isfinite(value):  # nan passes every comparison, inf every minimum
        raise InputError(f"{key}={value}: must be a finite number, {span}")
    if whole and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError(f"{key}={value!r}: must be a whole number, {span}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{key}={value!r}: must be a number, {span}")
    if value < minimum:
        raise InputError(f"{key}={value}: must be {minimum} or more" + (f" ({why_below})" if why_below else ""))
    if maximum is not None and value > maximum:
        raise InputError(f"{key}={value:,}: must be at most {maximum:,}" + (f" ({why})" if why else ""))


def check_one_of(key: str, value: object, choices: Sequence[str], where: str = "") -> None:
    """Validate a setting that is one of a few names where it enters: the one form of a choice check, whatever the
    command.  :param where: where the choices are defined (``sarnmt/kernels/``), said after them.

    :raises InputError: ``<key>=<value> is not a choice: use one of <choices>``, one line."""
    if value not in choices:
        raise InputError(
            f"{key}={value!r} is not a choice: use one of {', '.join(choices)}" + (f" ({where})" if where else "")
        )


def check_flag(key: str, value: object) -> None:
    """Validate a true/false setting where it is read (``truncate_long_input=maybe`` was taken as true).

    :raises InputError: ``<key>=<value>: must be true or false``, one line."""
    if not isinstance(value, bool):
        raise InputError(f"{key}={value!r}: must be true or false")


def verbose() -> bool:
    """Whether errors should keep their traceback: the user set ``HYDRA_FULL_ERROR=1``."""
    return os.environ.get(USER_FULL_ERROR, os.environ.get(FULL_ERROR)) == "1"


def describe(err: BaseException) -> str:
    """The one-line message of a user error, an operating-system error or a Hydra config error."""
    if isinstance(err, OSError) and not isinstance(err, UserError) and err.filename is not None:
        what = err.strerror or str(err)
        hint = {IsADirectoryError: "expected a file", NotADirectoryError: "expected a folder"}.get(type(err), "")
        return f"{err.filename}: {what}" + (f" ({hint})" if hint else "")
    text = str(err).split("\nConfig search path:")[0]  # Hydra's list of config folders: noise for the user
    cause = err.__cause__
    if cause is not None and type(err).__module__.startswith("hydra") and str(cause).strip():
        text += "\n" + str(cause).splitlines()[0]  # e.g. "Key 'x' is not in struct" under "Could not override 'x'"
    message, listing = "", False
    for line in text.splitlines():
        part = line.strip()
        if not part:
            continue
        item = line[:1].isspace() and (listing or message.endswith(":"))  # an indented entry of a list (options)
        if not message:
            message = part
        elif item:
            message += (", " if listing else " ") + part
        else:
            message += (" " if message.endswith((":", ".")) else "; ") + part
        listing = item
    return message or type(err).__name__


def _missing_value(err: BaseException) -> str:
    key = getattr(err, "full_key", None) or str(err).splitlines()[0]
    return f"missing value for {key}: give it on the command line ({key}=...)"


class Terminated(BaseException):  # noqa: N818 - a signal, like KeyboardInterrupt, not an error
    """SIGTERM, raised where the process is, so that the stack unwinds as for SIGINT's ``KeyboardInterrupt``: an output
    being written atomically is discarded (:mod:`sarnmt.utils.atomic`), the previous file left as it was."""


SIGNAL_STATUS = {"SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM}  # 130 and 143, as a shell reports
PIPE_STATUS = 128 + signal.SIGPIPE  # 141: what a Unix tool killed by SIGPIPE (a closed stdout: `| head`) exits with
STREAM_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # write errors only: with no file name, a standard stream's


def _raise_terminated(signum: int, frame: object) -> None:
    """The SIGTERM handler :func:`reported` installs. Where another handler composes it into its own (Lightning's,
    during training: :mod:`sarnmt.training.preemption` checkpoints and stops), that one is in charge: nothing here."""
    if signal.getsignal(signum) is _raise_terminated:
        raise Terminated(signum)


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` for the block (main thread only, and only over the default action)."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's own flush at exit finds nowhere to fail (a
    closed pipe or a full device would print "Exception ignored ... BrokenPipeError" after our line)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real stream (tests capture it), or already closed
        pass


@contextmanager
def reported() -> Iterator[None]:
    """Run a command line entry point's work: a :class:`UserError`, an ``OSError``, a Hydra config error (a typo in a
    key, a group option that does not exist) or a missing mandatory config value becomes ``error: <message>``
    (``stopped: <message>`` for a :class:`TrainingStopped`) on stderr and ``SystemExit`` (status 2, or the error's
    ``status``).

    A user error raised while Hydra builds a ``_target_`` (a setting checked where its object is made:
    ``sarnmt lm data.bptt=0``) is reported as itself, not inside Hydra's "Error in call to target".

    Signals and pipes as Unix tools have them: SIGINT and SIGTERM print ``interrupted: stopped by SIGINT`` (or
    SIGTERM) and exit 130 / 143, after the stack unwound (atomic outputs discarded, previous files kept); a closed
    standard output (``| head -1``) ends quietly with status 141; a full one (``> /dev/full``) is named."""
    from hydra.errors import HydraException
    from omegaconf.errors import MissingMandatoryValue

    try:
        with _sigterm_raises():
            yield
            if sys.stdout is not None:
                sys.stdout.flush()  # a full or closed stdout fails here, reported, not at the interpreter's exit
    except BrokenPipeError:
        _silence_stdout()
        raise SystemExit(PIPE_STATUS) from None
    except (KeyboardInterrupt, Terminated) as err:
        name = "SIGINT" if isinstance(err, KeyboardInterrupt) else "SIGTERM"
        print(f"interrupted: stopped by {name}", file=sys.stderr, flush=True)
        raise SystemExit(SIGNAL_STATUS[name]) from None
    except (UserError, OSError, MissingMandatoryValue, HydraException) as err:
        if isinstance(err, HydraException) and isinstance(err.__cause__, UserError):
            err = (
                err.__cause__
            )  # raised where Hydra built a ``_target_`` (a callback's setting): its own line, unwrapped
        if verbose():  # the traceback too, but still a user error's status: a caller tells refusals from bugs by it
            traceback.print_exc(file=sys.stderr)
        if isinstance(err, OSError) and err.filename is None and err.errno in STREAM_FULL:
            _silence_stdout()
            err = WriteError(f"could not write standard output: {err.strerror or err}")
        message = _missing_value(err) if isinstance(err, MissingMandatoryValue) else describe(err)
        print(f"{getattr(err, 'prefix', 'error')}: {message}", file=sys.stderr, flush=True)
        raise SystemExit(getattr(err, "status", USER_ERROR_STATUS)) from None
