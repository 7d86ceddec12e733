"""Reading the files a scenario names, safely: local regular files only, bounded in size.

A scenario names files (a trace, an empirical length column, a `base:` scenario). Such a name may
come from a file someone else wrote, so it is never handed to a library that would follow a URL
(pandas fetches `http://…` paths) or read a device (`/dev/zero` never ends, a FIFO blocks): it is
checked to be a path of a regular file, opened without blocking, checked again on the open file,
and read up to a byte limit. `inside` tells whether a path lies in one of some allowed folders
(symbolic links resolved), which the scenario loader uses to keep file references local.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:(//|[^\\/])")  # http://…, file:…, s3://…; not C:\ or C:/
MAX_PATH_CHARS = 4096


class FileRefused(ValueError):
    """A named file that will not be read; the message says why in one line."""


def shown(path: str | os.PathLike, limit: int = 80) -> str:
    """A path as it may appear in a one-line message: control characters escaped, bounded."""
    text = str(path)
    text = text if len(text) <= limit else text[: limit // 2] + "…" + text[-(limit // 2):]
    return text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text


def check_local(path: str | os.PathLike) -> Path:
    """The name as a local Path, or FileRefused if it is a URL or not a usable file name."""
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise FileRefused("an empty file name")
    if len(text) > MAX_PATH_CHARS or "\x00" in text:
        raise FileRefused(f"{shown(text)}: not a usable file name")
    if _URL.match(text) or text.startswith(("\\\\", "//")):
        raise FileRefused(f"{shown(text)}: only local files can be read, not URLs")
    return Path(text)


def inside(path: str | os.PathLike, roots: list[Path] | tuple[Path, ...]) -> bool:
    """True if `path` (symbolic links resolved) lies in one of `roots` or below."""
    real = Path(os.path.realpath(path))
    return any(real.is_relative_to(os.path.realpath(r)) for r in roots)


def read_bytes(path: str | os.PathLike, limit: int) -> bytes:
    """The file's bytes, if it is a local regular file of at most `limit` bytes (else FileRefused).

    OSError (missing file, no permission) passes through for the caller to word.
    """
    p = check_local(path)
    st = os.stat(p)
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"{shown(p)}: not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(p, flags)
    try:
        st = os.fstat(fd)  # the file we opened, not whatever the name pointed at a moment ago
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{shown(p)}: not a regular file")
        if st.st_size > limit:
            raise FileRefused(f"{shown(p)}: {_size(st.st_size)} is over the {_size(limit)} limit")
        chunks, total = [], 0
        while total <= limit:  # files in /proc report size 0: count what is really there
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise FileRefused(f"{shown(p)}: more than the {_size(limit)} limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def file_key(path: str | os.PathLike) -> tuple[str, int, int]:
    """(real path, size, modification time): a cache key that changes when the file does."""
    p = check_local(path)
    st = os.stat(p)
    return os.path.realpath(p), st.st_size, st.st_mtime_ns


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n:,} bytes"
