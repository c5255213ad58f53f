"""Horovod's exception classes, and the mapping from kolo's status codes.

kolo's native module raises ``kolo._kolo.Error`` with ``args == (code,
message, membership, skip_sync)`` (an absl status code; the kind of
membership change that ended the op, see python/elastic_binding.h).
``translate`` turns it into the class a Horovod script expects: caller
mistakes (invalid argument, not found, out of range, already exists) become
``ValueError``; a planned membership change at a membership check (workers
joined or left an elastic job) ``HostsUpdatedInterrupt``; everything else
(cross-rank disagreements, a peer lost, a job ended, timeouts)
``HorovodInternalError``. The kolo code stays on the exception as
``kolo_code``, the membership kind as ``kolo_membership`` ("" when none).

Thread-safety: plain classes and a pure function.
"""

# absl::StatusCode values (absl/status/status.h).
OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14

_VALUE_ERROR_CODES = (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, OUT_OF_RANGE)

NOT_INITIALIZED = 'Horovod has not been initialized; use hvd.init().'


class HorovodInternalError(RuntimeError):
    """An operation failed on every rank (ranks disagreed, a peer was lost,
    the job ended); the job goes on and the next operation may succeed."""


class HostsUpdatedInterrupt(RuntimeError):
    """Hosts were added or removed in an elastic job (raised by
    ``State.commit()``); ``skip_sync`` says whether the state need not be
    synchronised again."""

    def __init__(self, skip_sync=False):
        super().__init__()
        self.skip_sync = skip_sync


class HorovodVersionMismatchError(ImportError):
    """Kept for scripts that catch it: kolo links no framework, so it never
    raises it."""

    def __init__(self, name, version, framework):
        super().__init__(
            f'Framework {framework} installed with version {version} but '
            f'found version {name}.')
        self.name = name
        self.version = version
        self.framework = framework


def translate(error, not_initialized=False):
    """The Horovod-compatible exception for a ``kolo._kolo.Error``.

    ``not_initialized``: the caller found kolo not initialised, so the message
    is Horovod's own for that case.
    """
    code, message = error.args[0], error.args[1]
    membership = error.args[2] if len(error.args) > 2 else ''
    if not_initialized:
        exc = HorovodInternalError(NOT_INITIALIZED)
        membership = ''
    elif code in _VALUE_ERROR_CODES:
        exc = ValueError(message)
    elif membership in ('hosts_updated', 'leaving'):
        exc = HostsUpdatedInterrupt(bool(error.args[3]))
        exc.args = (message,)
    else:
        exc = HorovodInternalError(message)
    exc.kolo_code = code
    exc.kolo_membership = membership
    return exc
