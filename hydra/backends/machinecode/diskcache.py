"""hydra's disk cache, robust to bad entries, concurrent writers and unwritable directories.

Takes: an object file (``engine.load_native``: the cpu backend's kernels and loops) or
a driver's generated source (the cuda backend), and its file name under ``cache_dir()``.
Guarantees: ``read_object(name)`` returns the bytes ``write_object(name, data)`` stored,
or None (a miss) when the file is missing or damaged in any way: each file holds a
magic word and the SHA-256 of its payload, checked before LLVM sees a byte, and is
written to a temporary name and ``os.replace``d, so processes racing on one entry each
see a whole file or none.  ``load_module(name, source)`` returns the driver module,
whose numba functions use numba's disk cache (``.nbi`` index and ``.nbc`` data files in
the directory's ``__pycache__``), and it never fails because of what is on disk:

- a driver source file whose text is not the expected one (truncated, garbage, empty)
  is rewritten; it is read and compiled directly, so no ``.pyc`` is involved;
- an index or data file that cannot be read back (``UnpicklingError``, ``EOFError``,
  anything numba raises rebuilding it) is a miss: numba compiles and overwrites the
  entry, and numba writes every cache file to a temporary name and ``os.replace``s it,
  so several processes may race on one entry and each sees a whole file or none;
- a directory that cannot be written (or created) makes the kernel run uncached, with
  one ``HydraCacheWarning`` per process (both kinds of entry).

numba is imported only by ``load_module``: a cached cpu kernel runs without it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import uuid
import warnings


class HydraCacheWarning(UserWarning):
    """The disk cache cannot be used; kernels compile in every process."""


_warned = False


def cache_dir() -> str:
    return os.environ.get("HYDRA_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "hydra")


def warn_uncached(reason: str) -> None:
    """Warn once per process that the cache is off, and why."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"hydra: the disk cache at {cache_dir()} cannot be written ({reason}); "
                      f"kernels run uncached (set HYDRA_CACHE_DIR to a writable directory)",
                      HydraCacheWarning, stacklevel=4)


def write_atomic(path: str, text: str | bytes) -> None:
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


_MAGIC = b"hydra-object-1\n"


def read_object(name: str) -> bytes | None:
    """The payload of cache file ``name``, or None if it is missing or damaged."""
    try:
        with open(os.path.join(cache_dir(), name), "rb") as f:
            data = f.read()
    except OSError:
        return None
    head, digest, payload = data[:len(_MAGIC)], data[len(_MAGIC):len(_MAGIC) + 32], \
        data[len(_MAGIC) + 32:]
    if head != _MAGIC or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def write_object(name: str, payload: bytes) -> None:
    """Store ``payload`` as cache file ``name``; warn once and go on if it cannot be."""
    try:
        os.makedirs(cache_dir(), exist_ok=True)
        write_atomic(os.path.join(cache_dir(), name),
                     _MAGIC + hashlib.sha256(payload).digest() + payload)
    except OSError as e:
        warn_uncached(str(e) or type(e).__name__)


def _source_file(name: str, source: str) -> str:
    """The path of the driver's source under the cache directory, with ``source`` in it.

    An existing file with the right text is left alone: numba's index keys on its mtime."""
    os.makedirs(cache_dir(), exist_ok=True)
    path = os.path.join(cache_dir(), name + ".py")
    try:
        with open(path) as f:
            good = f.read() == source
    except (OSError, UnicodeDecodeError):
        good = False
    if not good:
        write_atomic(path, source)
    return path


def load_module(name: str, source: str):
    """The driver module ``name`` (see the module docstring)."""
    try:
        path = _source_file(name, source)
        mod = _exec(name, source, path)
    except (OSError, RuntimeError) as e:  # numba: RuntimeError "no locator available"
        warn_uncached(str(e) or type(e).__name__)
        return _exec(name, source)
    for value in vars(mod).values():
        if hasattr(value, "_cache") and hasattr(value, "stats"):  # a numba dispatcher
            _tolerate(value._cache, _tolerant_file())
    return mod


def _exec(name: str, source: str, path: str | None = None):
    """The module ``name`` made from ``source``: from its file at ``path`` (registered in
    ``sys.modules`` while it runs: numba's cache needs both), or with no file behind it
    and not registered (uncached)."""
    mod = type(sys)(name)
    if path is None:
        exec(compile(source, f"<hydra driver {name}>", "exec"), mod.__dict__)
        return mod
    mod.__file__ = path
    sys.modules[name] = mod
    try:
        exec(compile(source, path, "exec"), mod.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


@functools.cache
def _tolerant_file():
    from numba.core.caching import IndexDataCacheFile

    class _TolerantFile(IndexDataCacheFile):
        """Index and data files that read back as empty (a miss) when they are damaged."""

        def _load_index(self):
            try:
                return super()._load_index()
            except Exception:  # noqa: BLE001  (any damage: numba then overwrites the index)
                return {}

        def load(self, key):
            try:
                return super().load(key)
            except Exception:  # noqa: BLE001
                return None
    return _TolerantFile


def _tolerate(cache, tolerant) -> None:
    """Make one numba function cache treat damage as a miss and write failures as
    "uncached" (see the module docstring)."""
    cache._cache_file.__class__ = tolerant
    load, save = cache.load_overload, cache.save_overload

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except Exception:  # noqa: BLE001  (e.g. rebuilding a damaged library)
            return None

    def save_overload(sig, data):
        try:
            save(sig, data)
        except OSError as e:
            warn_uncached(str(e))

    cache.load_overload, cache.save_overload = load_overload, save_overload
