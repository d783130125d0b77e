"""Find, load and register the evaluate module folders shipped with movers.

* :func:`load` = ``evaluate.load(<packaged folder>)``: no network, always the installed version; a metric
  registered at run time (no folder) gets its generated module class instantiated directly.
* :func:`register` copies each module script into evaluate's offline cache fallback
  (``$HF_MODULES_CACHE/evaluate_modules/metrics/evaluate-metric--<slug>/<hash>/``) so that a bare
  ``evaluate.load("<slug>")`` works offline in any new process (evaluate has no plugin mechanism;
  see the README's "evaluate integration"). ``import movers`` registers automatically (opt out with
  ``MOVERS_NO_AUTOREGISTER=1``), and writes nothing when the registration is already current (a stamp
  file records what was registered); ``movers register`` does it explicitly.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["module_dir", "module_names", "load", "register", "is_registered", "NAMESPACES"]

logger = logging.getLogger("movers")

NAMESPACES = ("evaluate-metric", "movers")
"""Cache namespaces registered: bare names (``evaluate-metric--<slug>``) and ``movers/<slug>``."""


def _modules_root() -> Path:
    """The module folders packaged in the wheel (movers/evaluate_modules/), or, in a source checkout
    or editable install, the repository's metrics/ (the same files)."""
    package = Path(__file__).resolve().parents[2]
    packaged = package / "evaluate_modules"
    if packaged.is_dir() and any(packaged.glob("*/*.py")):
        return packaged
    return package.parents[1] / "metrics"


def module_names() -> list[str]:
    """Slugs of all shipped modules (folders holding ``<slug>/<slug>.py``)."""
    root = _modules_root()
    return sorted(p.name for p in root.iterdir() if (p / f"{p.name}.py").is_file())


def module_dir(name: str) -> str:
    """Path of the folder of module `name` (e.g. ``"moverscore"``)."""
    names = module_names()
    if name not in names:
        raise ValueError(f"movers.load: unknown module {name!r}; choose one of {names}.")
    return str(_modules_root() / name)


def load(name: str, *args: Any, **kwargs: Any) -> Any:
    """``evaluate.load`` of the shipped module `name`, offline and version-exact; for a metric registered at
    run time (``movers.metrics.register``), an instance of its generated module class."""
    if name not in module_names():
        from ... import metrics as registry

        if name in registry.slugs():
            from .evaluate_module import instance

            if args:
                kwargs["config_name"] = args[0]
            return instance(name, **kwargs)
        raise ValueError(f"movers.load: unknown module {name!r}; choose one of "
                         f"{sorted(set(module_names()) | set(registry.slugs()))}.")
    import evaluate

    try:
        return evaluate.load(module_dir(name), *args, **kwargs)
    except OSError as err:  # evaluate copies the script into HF_HOME first: read-only, full or broken
        from .evaluate_module import instance

        warnings.warn(f"movers.load: evaluate could not use its module cache {_cache_root(None)} "
                      f"({err.strerror or err}); the {name} module is built in memory instead.", RuntimeWarning,
                      stacklevel=2)
        if args:
            kwargs["config_name"] = args[0]
        return instance(name, **kwargs)


def _cache_root(modules_cache: str | os.PathLike | None) -> Path:
    """evaluate's HF_MODULES_CACHE: its resolved value if evaluate is imported (it reads the
    environment once, at import), else the same rule without importing evaluate (slow)."""
    if modules_cache is not None:
        return Path(modules_cache)
    evaluate = sys.modules.get("evaluate")
    if evaluate is not None and hasattr(evaluate, "config"):
        return Path(evaluate.config.HF_MODULES_CACHE)
    hf_home = os.path.expanduser(os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"),
                                                                       "huggingface")))
    return Path(os.getenv("HF_MODULES_CACHE", os.path.join(hf_home, "modules")))


def _atomic_write(path: Path, data: bytes) -> None:
    """Write `path` whole or not at all (a temporary file renamed over it); a failed write (full disk, read-only
    folder) leaves no temporary file behind."""
    if path.is_file() and path.read_bytes() == data:
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".movers-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


_STAMP = ".movers-registered.json"


def _stamp(root: Path, names: list[str], namespaces: Iterable[str]) -> dict:
    """What a current registration looks like: each script's hash and where it was copied from."""
    scripts = {name: Path(module_dir(name)) / f"{name}.py" for name in names}
    return {"namespaces": list(namespaces), "root": str(root),
            "scripts": {name: [str(path), hashlib.sha256(path.read_bytes()).hexdigest()]
                        for name, path in scripts.items()}}


def _target(root: Path, ns: str, name: str, digest: str) -> Path:
    return root / "evaluate_modules" / "metrics" / f"{ns}--{name}" / digest / f"{name}.py"


def is_registered(names: Iterable[str] | None = None, *, namespaces: Iterable[str] = NAMESPACES,
                  modules_cache: str | os.PathLike | None = None) -> bool:
    """Whether the cache already holds this version of every module script (reads, never writes)."""
    root = _cache_root(modules_cache)
    names, namespaces = list(names or module_names()), list(namespaces)
    stamp_file = root / "evaluate_modules" / "metrics" / _STAMP
    try:
        recorded = json.loads(stamp_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    expected = _stamp(root, names, namespaces)
    if any(recorded.get("scripts", {}).get(n) != expected["scripts"][n] for n in names) \
            or recorded.get("root") != expected["root"] or not set(namespaces) <= set(recorded.get("namespaces", [])):
        return False
    # each copy must be whole: a truncated script (a full disk, a killed process) would fail every load
    for ns in namespaces:
        for n in names:
            target = _target(root, ns, n, expected["scripts"][n][1])
            try:
                if hashlib.sha256(target.read_bytes()).hexdigest() != expected["scripts"][n][1]:
                    return False
            except OSError:
                return False
    return True


def register(names: Iterable[str] | None = None, *, namespaces: Iterable[str] = NAMESPACES,
             modules_cache: str | os.PathLike | None = None) -> list[str]:
    """Copy module scripts into evaluate's cache fallback; returns the script paths written.

    Idempotent and safe to run concurrently (atomic replace); the script's mtime is refreshed so that
    evaluate (which picks the most recently modified hash folder) loads this version.
    """
    root = _cache_root(modules_cache)
    written = []
    names, namespaces = list(names or module_names()), list(namespaces)
    for name in names:
        script = Path(module_dir(name)) / f"{name}.py"
        code = script.read_bytes()
        digest = hashlib.sha256(code).hexdigest()
        for ns in namespaces:
            levels = [root, root / "evaluate_modules", root / "evaluate_modules" / "metrics",
                      root / "evaluate_modules" / "metrics" / f"{ns}--{name}"]
            folder = levels[-1] / digest
            folder.mkdir(parents=True, exist_ok=True)
            for level in levels + [folder]:
                init = level / "__init__.py"
                if not init.exists():
                    init.touch()
            target = folder / f"{name}.py"
            _atomic_write(target, code)
            meta = {"original file path": str(script), "local file path": str(target)}
            _atomic_write(folder / f"{name}.json", json.dumps(meta).encode())
            os.utime(target)
            written.append(str(target))
    if set(names) == set(module_names()):
        _atomic_write(root / "evaluate_modules" / "metrics" / _STAMP,
                      json.dumps(_stamp(root, names, namespaces)).encode())
    return written


def launched_as_command() -> bool:
    """Whether this process is the ``movers`` command starting (its console script, or ``python -m movers``):
    its ``main()`` registers once its one-line warning format is in place, and ``movers register`` reports a
    failure itself, so the import does not."""
    argv = list(getattr(sys, "orig_argv", []))
    as_module = "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "movers"
    return as_module or (bool(sys.argv) and Path(sys.argv[0]).name == "movers")


class _CachedModuleNotice(logging.Filter):
    """Drops evaluate's "Using the latest cached version of the module from ...evaluate-metric--<slug>..." for
    movers' own registered modules: loading them from the cache is how the bare name works (offline or not),
    not a failure to report on every ``evaluate.load``. evaluate's other messages, and this one for other
    modules, pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "Using the latest cached version of the module" not in text:
            return True
        return not any(f"evaluate-metric--{name}" in text for name in module_names())


_NOTICE_FILTER = _CachedModuleNotice()


def autoregister() -> None:
    """Called on ``import movers``: register (or repair) the modules; never raises (a read-only cache must not
    break the import) but says once, in one line, what could not be written and what still works. Also hides
    evaluate's notice that a registered movers module was loaded from its cache (:class:`_CachedModuleNotice`)."""
    if os.getenv("MOVERS_NO_AUTOREGISTER"):
        return
    logger = logging.getLogger("evaluate.loading")
    if _NOTICE_FILTER not in logger.filters:
        logger.addFilter(_NOTICE_FILTER)
    try:
        if not is_registered():
            register()
    except OSError as err:
        warnings.warn(f"movers: could not register the evaluate modules in {_cache_root(None)} "
                      f"({err.strerror or err}); "
                      f"evaluate.load('<slug>') by bare name will not find them, movers.load('<slug>') works. "
                      f"Free the space or set HF_HOME to a writable folder (MOVERS_NO_AUTOREGISTER=1 silences "
                      f"this).", RuntimeWarning, stacklevel=3)
