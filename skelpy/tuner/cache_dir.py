"""The private cache folder: created 0700, files 0600, whatever the umask; nothing read from
or written through a place another user could have planted it.

The rules are SSH's (``StrictModes``): a folder or file is trusted only when this user (or
root) owns it and neither its group nor others may write to it; a symlink inside the cache
folder is never followed. A folder that fails is not used (the store keeps its data in
memory, models are not loaded), with one warning that says why and how to fix it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


class UnsafePath(OSError):
    """A folder or file that skelpy will not read from or write through."""


def _trusted_owner(uid: int) -> bool:
    return uid in (os.geteuid(), 0) if hasattr(os, "geteuid") else True


def _check(st: os.stat_result, path: Path, what: str) -> None:
    if not _trusted_owner(st.st_uid):
        raise UnsafePath(f"{what} {path} belongs to uid {st.st_uid}, not to this user; "
                         "skelpy does not use it")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafePath(f"{what} {path} is writable by other users (mode "
                         f"{stat.S_IMODE(st.st_mode):o}); run `chmod 700 {path}` or choose "
                         "another SKELPY_CACHE_DIR")


def check_dir(path: Path) -> None:
    """Raise :class:`UnsafePath` unless ``path`` is a folder this user trusts."""
    if os.name != "posix":
        return
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is not a folder")
    _check(st, path, "the folder")


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700 whatever the umask, or check an
    existing one; raises :class:`UnsafePath` or ``OSError``."""
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, DIR_MODE)
        except FileExistsError:
            pass
        else:
            os.chmod(path, DIR_MODE)             # mkdir's mode is filtered by the umask
    check_dir(path)
    return path


def check_file(path: Path) -> os.stat_result | None:
    """The ``lstat`` of an existing file this user trusts, None when it does not exist;
    raises :class:`UnsafePath` for a symlink, a non-regular file or a foreign/writable one."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePath(f"{path} is a symbolic link; skelpy does not follow links in its "
                         "cache folder")
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePath(f"{path} is not a regular file")
    if os.name == "posix":
        _check(st, path, "the file")
    return st


def create_file(path: Path) -> None:
    """Create an empty file with mode 0600 if none exists (never through a symlink)."""
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)                 # in case the umask took bits away
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600, never through a symlink."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{id(data):x}.tmp")
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, path)                        # replaces a symlink itself, not its target


def read_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a trusted regular file (checked on the open descriptor, so a file
    swapped after the check is not read), at most ``max_bytes``."""
    if check_file(path) is None:
        raise FileNotFoundError(path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(f"{path} is not a regular file")
        if os.name == "posix":
            _check(st, path, "the file")
        if st.st_size > max_bytes:
            raise UnsafePath(f"{path} is {st.st_size} bytes, more than the {max_bytes} "
                             "a model file may have")
        return f.read(max_bytes + 1)[:max_bytes]
