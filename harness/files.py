"""Opening a file that must be a plain regular file: never through a symbolic link and never waiting
on a FIFO or a device. Results folders, lock files and CI output paths may come from someone else's
machine or environment, so each is opened this one way."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class UnsafeFile(OSError):
    """A file that is a link, not a regular file (a FIFO, /dev/zero) or over a size cap."""


def open_regular(path: Path | str, flags: int, mode: int = 0o666) -> int:
    """A blocking descriptor of the regular file at ``path`` opened with ``flags``; UnsafeFile for a link
    (never followed) or anything else that is not a regular file, without waiting on it."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeFile(exc.errno, "a symbolic link (never followed)", str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeFile(errno.EINVAL, "not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd
