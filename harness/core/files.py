"""Opening a file that must be a plain regular file: never through a symbolic link and never waiting
on a FIFO or a device. Results folders, lock files and CI output paths may come from someone else's
machine or environment, so each is opened this one way. Files this user caches in the shared temp dir
(a compiled kernel, an empty MLflow store) live in a checked private folder and are used only as checked."""
from __future__ import annotations

import errno
import hashlib
import os
import stat
import tempfile
from datetime import datetime, timezone
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


def private_folder(name: str) -> Path:
    """This user's folder ``<name>-<uid>`` in the temp dir, refused (UnsafeFile) unless only this user can
    write to it and its parent keeps others from renaming it away.

    The temp dir is shared and the name is predictable, so another user could create the folder first, or
    swap it between a check and a load, and plant a file that we would then trust.
    """
    parent = Path(tempfile.gettempdir())
    folder = parent / f"{name}-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info, above = folder.lstat(), parent.stat()
    if above.st_mode & 0o022 and not above.st_mode & stat.S_ISVTX:
        raise UnsafeFile(errno.EPERM, f"its parent {parent} is writable by others without the sticky bit (mode "
                         f"{stat.filemode(above.st_mode)}); set TMPDIR to a folder only you can write to", str(folder))
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise UnsafeFile(errno.EPERM, f"it must be a folder owned by uid {os.getuid()} that no one else can write to "
                         f"(found uid {info.st_uid}, mode {stat.filemode(info.st_mode)}); remove it", str(folder))
    return folder


def open_trusted(path: Path, digest: Path) -> tuple[int, bytes] | None:
    """A read-only descriptor of ``path`` and its bytes, when it is a regular file (never through a link) of
    ours, writable only by us, whose bytes hash to the sha256 recorded in ``digest``; None otherwise.

    The checks are made on the descriptor and the bytes read through it, so a caller that uses the
    descriptor or the bytes uses what was checked even if someone swaps the path in between.
    """
    try:
        fd = open_regular(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_uid == os.getuid() and not info.st_mode & 0o022:
            data = os.pread(fd, info.st_size, 0)  # pread: the descriptor's offset stays at 0 for the caller
            if hashlib.sha256(data).hexdigest() == digest.read_text(encoding="utf-8").strip():
                return fd, data
    except OSError:
        pass
    os.close(fd)
    return None


def unused_path(parent: Path, stem: str) -> Path:
    """``parent/stem-<UTC time>``, numbered ``-2``, ``-3`` ... when taken: a folder or file set aside
    twice within a second (a fast rerun) must not replace the first."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    candidate, n = parent / f"{stem}-{stamp}", 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{stem}-{stamp}-{n}"
    return candidate


def linked_entry(folder: Path) -> Path | None:
    """The first symbolic link anywhere under ``folder`` (links are not followed), or None. A received
    folder's subfolder that is a link would have whatever writes into it write into the link's target."""
    for parent, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            if os.path.islink(os.path.join(parent, name)):
                return Path(parent, name)
    return None
