"""Error types that the CLI turns into exit codes.

A :class:`UserError` is a problem with what the user asked for (a bad value, a missing
program, no privileges): one line, exit code 2, nothing created. Anything else that goes
wrong while measuring is a :class:`LabError`, which names the command that failed.
"""


class UserError(Exception):
    """Bad input or an unmet precondition; reported as one line with exit code 2."""

    exit_code = 2


class LabError(Exception):
    """The lab could not be built or operated as asked (a failed ``ip``/``tc`` command...)."""

    exit_code = 1


class SystemFault(Exception):
    """The machine failed at something that was asked correctly (a full disk, an I/O
    error while writing the output): one line naming the path and the cause, exit code 1."""

    exit_code = 1


class StorageError(SystemFault):
    """The results database cannot be written (disk full, a read-only file or mount, an
    immutable file, an I/O error): a fault of the system, one line, exit code 1."""
