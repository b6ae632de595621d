"""Every exception of the sandbox, in one leaf module (the zygote imports it too).

::

    SandboxError
    ├── SandboxUnavailable      no sandbox can run here (also a RuntimeError): the
    │                           caller's tool reports it, or /readyz fails
    ├── ZygoteError             a zygote could not be started or stopped answering
    ├── FrameError              the peer closed the pipe, sent garbage or too much
    │   └── FrameTimeout        the deadline passed before the frame was complete
    └── CompileFailure          the code does not compile under the policy: a RunResult
                                with its `kind`, never an exception to the caller

    Inside the confined child only, raised into the untrusted code:
    BaseException
    ├── Forbidden               a guard refused an operation
    ├── OutputLimit             the code printed more than the cap
    └── Timeout                 the code's time ran out (from a signal handler)

These three are BaseExceptions so that ``except Exception`` in the untrusted code
cannot turn a refusal into a silent success. A failing run is a `RunResult` with
an error kind, not an exception: only the plumbing above raises.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sandbox.result import ErrorKind


class SandboxError(Exception):
    """Base class of the sandbox's own errors."""


class SandboxUnavailable(SandboxError, RuntimeError):
    """``isolation="require"`` and the OS layer cannot be built here."""


class ZygoteError(SandboxError):
    """A zygote could not be started or stopped answering."""


class FrameError(SandboxError):
    """The peer closed the pipe, sent garbage, or sent more than allowed."""


class FrameTimeout(FrameError):
    """The deadline passed before the frame was complete."""


class CompileFailure(SandboxError):
    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message


class Forbidden(BaseException):
    """A guard refused an operation.

    A BaseException so that ``except Exception`` in the untrusted code does not
    turn a refusal into a silent success.
    """


class OutputLimit(BaseException):
    """The code printed more than the cap."""


class Timeout(BaseException):
    """The code's time ran out (raised from a signal handler)."""
