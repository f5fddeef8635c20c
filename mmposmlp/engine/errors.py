"""Errors a user can fix, and the small path helpers the pre-flight checks share (a leaf: imports nothing of ours).

Every :class:`UserError` names the problem and its fix in one sentence; our tools print it without a traceback.
"""


class UserError(Exception):
    """An error with a message that names the problem and its fix; printed without traceback."""


class UnknownTypeError(UserError, KeyError):
    """A config ``type`` no registry knows, with the closest registered names. A ``KeyError`` like mmengine's,
    so code that catches mmengine's error catches this one; printed as its sentence, not as a quoted key."""

    def __str__(self):
        return str(self.args[0]) if self.args else ''


def is_local_path(path) -> bool:
    """A non-empty path string without a URL scheme (``s3://``, ``http://`` ... are not checked on disk)."""
    return isinstance(path, str) and bool(path) and '://' not in path
