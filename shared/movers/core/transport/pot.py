"""The two parts of POT that movers calls, loaded without POT's package import.

``import ot`` runs POT's ``__init__``, which imports every submodule: scikit-learn's clustering (for ``ot.lowrank``
and ``ot.gromov``), networkx, scipy.stats and more, seconds of a one-pair ``movers score`` spent on code that no
metric calls. The metrics call POT's network simplex (``ot.lp.emd_wrap.emd_c``, the C++ solver behind ``ot.emd``)
and its array backends (``ot.backend.get_backend``, the iterations of the unbalanced Sinkhorn). :func:`emd_c` and
:func:`get_backend` load those files of the installed POT (``ot/lp/emd_wrap*.so`` and the ``ot/utils.py`` and
``ot/backend.py`` that it imports) as modules of a private package whose path is POT's folder, so POT's
``__init__`` files do not run: the same compiled solver and the same backend code, so the same numbers. Where POT
is imported already, its own modules are used; where its files are not where POT 0.9.4 to 0.9.7 keep them, the
fallback is ``import ot``. ``partial_emd`` (``ot.partial``) imports POT in full.
"""
from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["emd_c", "get_backend", "module", "PRIVATE"]

PRIVATE = f"{__name__}._ot"
"""The name of the private package that POT's files are loaded under."""

_LOCK = threading.Lock()


@functools.cache
def module(name: str) -> Any:
    """POT's module ``ot.<name>`` ("lp.emd_wrap", "backend"): POT's own where ``ot`` is imported, else loaded under
    :data:`PRIVATE` (once per process)."""
    if "ot" not in sys.modules:
        with _LOCK:
            try:
                _private_package()
                loaded = importlib.import_module(f"{PRIVATE}.{name}")
            except ImportError:  # another layout: POT's own import
                pass
            else:
                # a Cython module enters itself in sys.modules under its own name too ("ot.lp.emd_wrap"): taken out,
                # so that a later `import ot` imports it as POT's submodule (the same module object, set on `ot.lp`)
                for key in [k for k, m in sys.modules.items() if k.startswith("ot.") and m is loaded]:
                    del sys.modules[key]
                return loaded
    return importlib.import_module(f"ot.{name}")


def _private_package() -> None:
    """:data:`PRIVATE` and its ``lp`` as packages whose path is POT's folder (their ``__init__`` never runs)."""
    if PRIVATE in sys.modules:
        return
    spec = importlib.util.find_spec("ot")  # a top-level name: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("POT (the package `ot`) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "lp").is_dir() or not (folder / "backend.py").is_file():
        raise ImportError(f"POT's files are not where movers reads them ({folder})")
    for name, path in ((PRIVATE, folder), (f"{PRIVATE}.lp", folder / "lp")):
        package = importlib.machinery.ModuleSpec(name, None, is_package=True)
        package.submodule_search_locations = [str(path)]
        sys.modules[name] = importlib.util.module_from_spec(package)


def emd_c() -> Any:
    """POT's network simplex, ``ot.lp.emd_wrap.emd_c``."""
    return module("lp.emd_wrap").emd_c


def get_backend(*arrays: Any) -> Any:
    """POT's backend of `arrays` (``ot.backend.get_backend``): numpy's or torch's."""
    return module("backend").get_backend(*arrays)
