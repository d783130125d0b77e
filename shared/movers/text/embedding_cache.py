"""An embedding cache: token vectors kept across calls, in memory or in a folder, so that re-scoring a test
set with one new system encodes only the new system's texts.

* :class:`EmbeddingCache` ``()`` keeps entries in this process (what a training loop's repeated ``compute``
  calls need: the same references are embedded once); ``EmbeddingCache(folder)`` keeps them on disk, shared
  by every process that names the folder (``movers score --cache DIR``, ``MOVERS_CACHE``).
* An entry is one text's encoder output (its token ids and float32 vectors; a folder entry also records the
  wordpieces and special flags, for a person reading it), keyed by the text
  and the encoder's *namespace*: everything that can change a vector (the model files' content fingerprint
  and name with revision, the layer(s) and their aggregation, dtype, device type, window and long-text
  handling, the torch and transformers versions; :meth:`movers.Encoder.cache_namespace`). A text that fits one
  window reads the same under every long-text handling and is keyed without it
  (:attr:`movers.Encoder.single_pass_namespace`).
* A hit returns the stored vectors as they were stored, so a run whose vectors all come from the cache equals
  the run that stored them, bit for bit; a run that encodes only its new texts puts them in other encoder
  batches and agrees with a cacheless run to float32 rounding (:data:`movers.core.result.REGROUPING_ATOL`).
* Bounded: at most ``max_bytes`` (least recently used entries go first). On disk each entry is a file
  written to a temporary name and renamed into place, so two processes writing at once leave whole
  entries; an entry is checked (magic, lengths, SHA-256 of its bytes, its text and namespace) when read,
  and a corrupted or truncated one is deleted and recomputed. A folder that cannot be written is used
  read-only, with one warning.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import struct
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EmbeddingCache", "CacheInfo", "Row", "CACHE_ENV", "DEFAULT_MEMORY_BYTES", "DEFAULT_DISK_BYTES",
           "resolve_cache", "check_cache", "using_cache", "current_cache", "OBJECT_CACHE_BYTES", "object_cache_options"]

CACHE_ENV = "MOVERS_CACHE"
"""Environment variable naming a cache folder used when a call passes no ``cache``."""
SIZE_ENV = "MOVERS_CACHE_SIZE"
"""Environment variable: the folder cache's bound in bytes (default :data:`DEFAULT_DISK_BYTES`)."""
DEFAULT_MEMORY_BYTES = 512 * 2**20
DEFAULT_DISK_BYTES = 4 * 2**30

_MAGIC = b"movers-embedding\x01"
_LAYOUT = "v1"
_MAX_HEADER = 64 * 2**20

Row = tuple[np.ndarray, np.ndarray]
"""One text's encoder output on the host: its token ids (int64 [len], special tokens included) and float32
vectors [len, d]."""
Describe = Callable[[np.ndarray], tuple[list[str], list[bool]]]
"""Token ids -> (wordpieces, special flags): what a folder entry records beside the ids."""


@dataclass(frozen=True)
class CacheInfo:
    """What a cache holds and how this process used it."""

    location: str
    entries: int
    bytes: int
    max_bytes: int
    hits: int
    misses: int
    recomputed: int
    """Entries found corrupted or truncated (deleted, then computed again)."""

    def __str__(self) -> str:
        return (f"{self.location}: {self.entries} entries, {self.bytes / 2**20:.1f} MiB of "
                f"{self.max_bytes / 2**20:.0f} MiB; this process: {self.hits} hits, {self.misses} misses, "
                f"{self.recomputed} corrupted entries recomputed")


class EmbeddingCache:
    """Token vectors by (encoder namespace, text), in this process (``folder=None``) or in a folder.

    Args:
        folder: None keeps entries in memory (for repeated calls in one process); a path keeps them on disk
            (created if missing), shared between processes and runs.
        max_bytes: The bound on what the cache holds (vectors and their tokens); the least recently used
            entries are removed past it. Default 512 MiB in memory; on disk ``MOVERS_CACHE_SIZE`` or 4 GiB.
    """

    def __init__(self, folder: str | os.PathLike | None = None, *, max_bytes: int | None = None) -> None:
        if max_bytes is None:
            max_bytes = DEFAULT_MEMORY_BYTES if folder is None else _env_size()
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"EmbeddingCache: `max_bytes` must be a positive int, got {max_bytes!r}.")
        self.folder = None if folder is None else Path(folder).expanduser()
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._memory: OrderedDict[str, tuple[Row, int]] = OrderedDict()
        self._memory_bytes = 0
        self._hits = self._misses = self._recomputed = 0
        self._written = 0  # bytes written since the folder was last measured
        self._measured: int | None = None
        self._read_only = False
        if self.folder is not None:
            if self.folder.exists() and not self.folder.is_dir():
                raise ValueError(f"EmbeddingCache: `folder` {str(self.folder)!r} exists and is not a folder.")
            try:
                (self.folder / _LAYOUT).mkdir(parents=True, exist_ok=True)
            except OSError as err:
                self._read_only_now(err)

    def __repr__(self) -> str:
        where = "memory" if self.folder is None else str(self.folder)
        return f"EmbeddingCache({where!r}, max_bytes={self.max_bytes})"

    # ---------------------------------------------------------------------------------------- use

    def get(self, namespace: str, texts: Sequence[str]) -> dict[str, Row]:
        """The entries found for `texts` (unique texts as keys); hits move to the front of the LRU order."""
        unique = list(dict.fromkeys(texts))
        found: dict[str, Row] = {}
        for text in unique:
            row = self._get_one(namespace, text)
            if row is not None:
                found[text] = row
        with self._lock:
            self._hits += len(found)
            self._misses += len(unique) - len(found)
        return found

    def put(self, namespace: str, rows: dict[str, Row], *, describe: Describe | None = None) -> None:
        """Store entries (text -> row), then remove the least recently used past the bound; `describe` gives the
        wordpieces and special flags a folder entry records (none without it)."""
        if self.folder is None:
            with self._lock:
                for text, row in rows.items():
                    key = _key(namespace, text)
                    size = _row_bytes(row)
                    if key in self._memory:
                        self._memory_bytes -= self._memory.pop(key)[1]
                    self._memory[key] = (row, size)
                    self._memory_bytes += size
                while self._memory_bytes > self.max_bytes and self._memory:
                    self._memory_bytes -= self._memory.popitem(last=False)[1][1]
            return
        if self._read_only:
            return
        for text, row in rows.items():
            try:
                self._written += self._write(namespace, text, row, describe)
            except OSError as err:
                self._read_only_now(err)
                return
        if self._estimate() > self.max_bytes:
            self.prune()

    def info(self) -> CacheInfo:
        """Entries, bytes and the bound; this process's hits, misses and recomputed entries."""
        if self.folder is None:
            entries, size, location = len(self._memory), self._memory_bytes, "memory"
        else:
            files = list(self._files())
            entries, size, location = len(files), sum(f[2] for f in files), str(self.folder)
        return CacheInfo(location, entries, size, self.max_bytes, self._hits, self._misses, self._recomputed)

    def clear(self) -> int:
        """Remove every entry; returns how many were removed."""
        with self._lock:
            if self.folder is None:
                n = len(self._memory)
                self._memory.clear()
                self._memory_bytes = 0
                return n
        n = 0
        for path, _, _ in self._files():
            n += _unlink(path)
        self._written, self._measured = 0, None
        return n

    def prune(self) -> None:
        """Remove the least recently used entries until the folder holds at most ``max_bytes``."""
        files = sorted(self._files(), key=lambda f: f[1])  # oldest use first
        total = sum(f[2] for f in files)
        for path, _, size in files:
            if total <= self.max_bytes:
                break
            if _unlink(path):
                total -= size
        self._written = 0
        self._measured = total

    # ------------------------------------------------------------------------------------ internals

    def _get_one(self, namespace: str, text: str) -> Row | None:
        key = _key(namespace, text)
        if self.folder is None:
            with self._lock:
                item = self._memory.get(key)
                if item is not None:
                    self._memory.move_to_end(key)
                return None if item is None else item[0]
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:  # absent (or removed by another process's pruning): a miss
            return None
        row = _decode(data, namespace, text)
        if row is None:
            with self._lock:
                self._recomputed += 1
            _unlink(path)
            return None
        try:
            os.utime(path)  # the file's mtime is its last use (least recently used go first)
        except OSError:
            pass
        return row

    def _path(self, key: str) -> Path:
        assert self.folder is not None
        return self.folder / _LAYOUT / key[:2] / key

    def _write(self, namespace: str, text: str, row: Row, describe: Describe | None) -> int:
        path = self._path(_key(namespace, text))
        path.parent.mkdir(exist_ok=True)
        data = _encode(namespace, text, row, describe)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)  # atomic: readers see the old entry, the new one, or none
        except BaseException:
            _unlink(Path(tmp))
            raise
        return len(data)

    def _files(self) -> Iterator[tuple[Path, float, int]]:
        """(path, last use, size) of every entry on disk; stale temporary files of dead writers are removed."""
        if self.folder is None:
            return
        root = self.folder / _LAYOUT
        if not root.is_dir():
            return
        now = time.time()
        for shard in os.scandir(root):
            if not shard.is_dir():
                continue
            for entry in os.scandir(shard.path):
                try:
                    stat = entry.stat()
                except OSError:
                    continue
                if entry.name.startswith(".tmp-"):
                    if now - stat.st_mtime > 3600:
                        _unlink(Path(entry.path))
                    continue
                yield Path(entry.path), stat.st_mtime, stat.st_size

    def _estimate(self) -> int:
        """Bytes on disk: measured once, then what this process wrote; measured again after writing a
        sixteenth of the bound (other processes write too)."""
        if self._measured is None or self._written > self.max_bytes // 16:
            self._measured = sum(f[2] for f in self._files())
            self._written = 0
        return self._measured + self._written

    def _read_only_now(self, err: OSError) -> None:
        if not self._read_only:
            warnings.warn(f"movers: the embedding cache folder {str(self.folder)!r} cannot be written "
                          f"({err.strerror or err}); it is read only for this process (scores are unchanged).",
                          RuntimeWarning, stacklevel=4)
        self._read_only = True


# ---------------------------------------------------------------------------------------- entries

def _key(namespace: str, text: str) -> str:
    return hashlib.sha256(namespace.encode() + b"\0" + text.encode("utf-8", "surrogatepass")).hexdigest()


def _row_bytes(row: Row) -> int:
    ids, vectors = row
    return int(vectors.nbytes) + int(ids.nbytes)


def _encode(namespace: str, text: str, row: Row, describe: Describe | None) -> bytes:
    ids, vectors = row
    tokens, special = describe(ids) if describe is not None else ([""] * len(ids), [False] * len(ids))
    header = json.dumps({"namespace": namespace, "text": text, "tokens": tokens, "ids": ids.tolist(),
                         "special": special, "shape": list(vectors.shape)}, ensure_ascii=True).encode("ascii")
    body = _MAGIC + struct.pack("<I", len(header)) + header + np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    return body + hashlib.sha256(body).digest()


def _decode(data: bytes, namespace: str, text: str) -> Row | None:
    """The row of an entry's bytes, or None when they are not a whole, matching entry."""
    head = len(_MAGIC) + 4
    if len(data) < head + 32 or not data.startswith(_MAGIC):
        return None
    body, digest = data[:-32], data[-32:]
    if hashlib.sha256(body).digest() != digest:
        return None
    (size,) = struct.unpack("<I", body[len(_MAGIC):head])
    if size > _MAX_HEADER or head + size > len(body):
        return None
    try:
        meta = json.loads(body[head:head + size])
        shape = [int(x) for x in meta["shape"]]
        tokens, ids, special = list(meta["tokens"]), [int(i) for i in meta["ids"]], list(meta["special"])
    except (ValueError, KeyError, TypeError):
        return None
    if meta.get("namespace") != namespace or meta.get("text") != text or len(shape) != 2 \
            or not len(tokens) == len(ids) == len(special) == shape[0]:
        return None
    raw = body[head + size:]
    if len(raw) != 4 * shape[0] * shape[1]:
        return None
    vectors = np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(shape)
    return np.asarray(ids, dtype=np.int64), vectors


def _unlink(path: Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0


def _env_size() -> int:
    raw = os.environ.get(SIZE_ENV, "")
    if not raw:
        return DEFAULT_DISK_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"movers: {SIZE_ENV}={raw!r} must be a positive number of bytes.")
    return value


# ---------------------------------------------------------------------------------------- options

_FOLDERS: dict[str, EmbeddingCache] = {}
_FOLDERS_LOCK = threading.Lock()


_CURRENT: contextvars.ContextVar[EmbeddingCache | None] = contextvars.ContextVar("movers_embedding_cache",
                                                                                default=None)
"""The cache of the innermost :func:`using_cache` block (per thread / task; None outside)."""


@contextlib.contextmanager
def using_cache(cache: EmbeddingCache | None) -> Iterator[None]:
    """Within the block every encoder reads and stores token vectors in `cache` (None: no cache)."""
    token = _CURRENT.set(cache)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_cache() -> EmbeddingCache | None:
    return _CURRENT.get()


OBJECT_CACHE_BYTES = 256 * 2**20
"""The bound of the in-memory cache a long-lived scoring object keeps: an evaluate module object, a
``movers.torchmetrics`` metric, a ``movers.reward`` (least recently used first out)."""


def object_cache_options(holder: Any, spec: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` with ``cache=`` the holder's own in-memory cache (made on first use, kept as
    ``holder._movers_cache``), so that a training loop's repeated evaluations embed the same references once.
    Left as they are when the metric (`spec`, a MetricSpec) has no ``cache`` option, the caller set ``cache``
    (False: off), or ``MOVERS_CACHE`` names a folder. Scores agree either way to float32 rounding
    (:data:`movers.core.result.REGROUPING_ATOL`)."""
    if not spec.has_option("cache") or "cache" in options or os.environ.get(CACHE_ENV):
        return dict(options)
    cache = getattr(holder, "_movers_cache", None)
    if cache is None:
        cache = EmbeddingCache(max_bytes=OBJECT_CACHE_BYTES)
        holder._movers_cache = cache
    return {**options, "cache": cache}


def check_cache(name: str, cache: Any) -> None:
    """A ``cache`` option's type (what :func:`resolve_cache` accepts), checked before anything is scored."""
    if cache is None or cache is False or isinstance(cache, EmbeddingCache):
        return
    if isinstance(cache, (str, os.PathLike)) and str(cache):
        return
    raise TypeError(f"{name}: `cache` must be None (MOVERS_CACHE or no cache), False, a folder path or a "
                    f"movers.EmbeddingCache, got {type(cache).__name__} {cache!r}.")


def resolve_cache(name: str, cache: Any) -> EmbeddingCache | None:
    """A call's ``cache`` option as a cache. None: the cache of an enclosing :func:`using_cache` block (e.g.
    ``movers score --cache DIR``), else the folder in ``MOVERS_CACHE`` if set, else none; False: none; a path:
    that folder (one object per folder and process); an EmbeddingCache: itself."""
    check_cache(name, cache)
    if cache is None:
        cache = current_cache() or os.environ.get(CACHE_ENV) or False
    if cache is False:
        return None
    if isinstance(cache, EmbeddingCache):
        return cache
    folder = str(Path(cache).expanduser().resolve())
    with _FOLDERS_LOCK:
        if folder not in _FOLDERS:
            _FOLDERS[folder] = EmbeddingCache(folder)
        return _FOLDERS[folder]
