"""What a process imports before it works. ``movers <command> --help`` builds its parser from the declarations
(metric slugs, languages, defaults) without torch, transformers, POT, scikit-learn or scipy.stats; a metric that
solves an exact transport loads POT's compiled solver without POT's package import (scikit-learn, networkx), and
solves exactly what ``ot.emd`` solves. Each check is a fresh Python process (what is imported is per process); the
timings are the study ``python -m shared.bench cold-start`` (docs/benchmarks.md), not a test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import movers

from .helpers import ATOL_EMD, REPO

HEAVY = ("torch", "transformers", "ot", "sklearn", "scipy.stats", "spacy", "sacrebleu", "pandas", "matplotlib",
         "evaluate", "datasets")

_SOURCE = Path(movers.__file__).resolve().parents[1]  # a checkout's shared/ goes on the process's path
ENV = {**os.environ, "OMP_NUM_THREADS": "1",
       **({"PYTHONPATH": str(_SOURCE)} if "site-packages" not in _SOURCE.parts else {})}


def _python(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=600,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


HELP = """
import contextlib, io, json, sys
from movers.cli import COMMANDS, main
heavy = {heavy!r}
out = {{}}
for argv in [["--help"], *([name, "--help"] for name in COMMANDS), ["space", "build", "--help"]]:
    with contextlib.redirect_stdout(io.StringIO()) as text:
        status = main(argv)
    out[" ".join(argv)] = [status, text.getvalue().startswith("usage: ") or argv == ["--help"],
                           [m for m in heavy if m in sys.modules]]
print(json.dumps(out))
"""


def test_the_help_of_every_subcommand_imports_no_heavy_library():
    from movers.cli import COMMANDS

    out = _python(HELP.format(heavy=HEAVY))
    assert set(out) == {"--help", "space build --help", *(f"{name} --help" for name in COMMANDS)}
    assert {argv: got for argv, got in out.items() if got != [0, True, []]} == {}


def test_the_help_lists_every_metric_and_the_plan_metrics_from_the_registry(capsys):
    """The choices a parser prints come from the registry without importing a metric file: `movers explain`'s are
    the metrics whose spec has a plan."""
    from movers.cli import main
    from movers.metrics import WITHOUT_PLAN, get, slugs

    assert {s for s in slugs() if not get(s).has_plan} == set(WITHOUT_PLAN)
    assert slugs(plans=True) == [s for s in slugs() if get(s).has_plan]
    assert main(["explain", "--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert f"one of {', '.join(slugs(plans=True))}" in flat


SOLVE = """
import json, sys
import numpy as np
import torch
from movers.core.transport import pot
from movers.core.transport.exact import network_simplex
from movers.core.transport.unbalanced import unbalanced_sinkhorn_batch
from tests.test_start_up import problems, uot_batch

plans = [network_simplex(a, b, c) for a, b, c in problems()]
uot = unbalanced_sinkhorn_batch(*uot_batch(), reg=0.05, reg_a=2.0, reg_b=3.0, max_iter=500, tol=1e-9)
solver = pot.module("lp.emd_wrap")
loaded = [m for m in ("ot", "sklearn", "networkx", "scipy.stats") if m in sys.modules]
import ot  # POT's own import afterwards: the same compiled module, set on ot.lp
print(json.dumps({"plans": [[p.tolist(), v] for p, v in plans], "uot": uot.cost.tolist(), "loaded": loaded,
                  "name": solver.__name__, "file": solver.__file__, "same": ot.lp.emd_wrap.emd_c is pot.emd_c(),
                  "after": [float(ot.emd2(a, b, c)) for a, b, c in problems()]}))
"""


def problems() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Random exact problems (seeded), with a zero-mass row and column, as MoverScore and SMS pose them."""
    rng = np.random.default_rng(7)
    out = []
    for n, m in ((1, 1), (3, 5), (8, 6), (12, 12)):
        a, b = rng.random(n), rng.random(m)
        if n > 3:
            a[1], b[2] = 0.0, 0.0
        out.append((a / a.sum(), b / b.sum(), rng.random((n, m)) * 3))
    return out


def uot_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch of unbalanced problems on CPU (iterated in numpy, through POT's numpy backend)."""
    generator = torch.Generator().manual_seed(3)
    a, b = torch.rand(3, 5, generator=generator, dtype=torch.float64), torch.rand(3, 4, generator=generator,
                                                                                   dtype=torch.float64)
    return a, b, torch.rand(3, 5, 4, generator=generator, dtype=torch.float64)


def test_the_exact_solver_loads_without_pots_package_and_solves_what_ot_emd_solves():
    """In a fresh process the solver is POT's own compiled module, loaded without `import ot` (so without
    scikit-learn); its plans equal ``ot.emd``'s (POT's public function, here in a process that imported POT) to the
    last bit, the unbalanced iterations on POT's numpy backend equal those run here on POT's own backend, and POT
    imported afterwards works and shares the module."""
    import ot

    from movers.core.transport import pot
    from movers.core.transport.exact import network_simplex
    from movers.core.transport.unbalanced import unbalanced_sinkhorn_batch

    out = _python(SOLVE)
    assert out["loaded"] == [] and out["name"].startswith("movers.core.transport.pot.")
    assert out["file"] == ot.lp.emd_wrap.__file__ and out["same"]
    pot.module.cache_clear()  # here: POT's own modules (this process imported POT)
    for (plan, value), (a, b, c) in zip(out["plans"], problems(), strict=True):
        here, cost = network_simplex(a, b, c)
        assert np.array_equal(np.array(plan), here) and value == cost  # the same solver: the same bits
        want, log = ot.emd(a, b, c, log=True)  # POT's public function (its own rescaling of b: ulps apart)
        np.testing.assert_allclose(plan, want, atol=1e-12, rtol=0)
        assert value == pytest.approx(log["cost"], abs=ATOL_EMD, rel=0)
    here = unbalanced_sinkhorn_batch(*uot_batch(), reg=0.05, reg_a=2.0, reg_b=3.0, max_iter=500, tol=1e-9)
    assert out["uot"] == here.cost.tolist()
    assert out["after"] == [float(ot.emd2(a, b, c)) for a, b, c in problems()]


@pytest.mark.parametrize("module", ["lp.emd_wrap", "backend"])
def test_where_pot_is_imported_its_own_modules_are_used(module):
    """This process imported POT (the tests do): the solver and the backend are POT's own."""
    import importlib

    import ot  # noqa: F401

    from movers.core.transport import pot

    pot.module.cache_clear()  # chosen again, as a process that imported POT first chooses
    assert pot.module(module) is importlib.import_module(f"ot.{module}")
