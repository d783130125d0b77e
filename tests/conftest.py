"""The suite's settings, hooks and fixtures: an offline, fresh Hugging Face home; the order the files start in; the
``--torch-threads`` option; the session's wheel and one-call results. What tests share that is not a fixture (paths,
tolerances, fixture texts) is in :mod:`tests.helpers`."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

# Two workers share a machine that may have two cores, each with torch's default thread count: OpenMP threads that
# spin while they wait for work take those cores from the other worker (the GNU OpenMP of torch's wheels spins by
# default). Passive waiting lets them sleep: the same threads and the same numbers, about a quarter less time on
# the suite's model-heavy files. Set before anything imports torch; the processes the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .helpers import DATA, REPO, split_pairs  # noqa: E402 (after the OpenMP setting)

# The suite runs offline, in a fresh Hugging Face home of its own (evaluate's module cache included): the same
# on a developer's machine as in CI, and the user's own HF_HOME is never written to. The bundled encoder and
# GloVe come from site-packages, so nothing needs the user's hub cache.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_EVALUATE_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")          # lm-eval's tasks read local JSONL through datasets
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # MLflow would send usage events
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="movers-tests-hf-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ.pop("HF_MODULES_CACHE", None)

os.environ.setdefault("MOVERS_DATA", str(DATA))  # the study commands the tests run read the same folder

# The files that run longest, longest first, as timed on the project's 2-core machine: those of a system run (whole
# pytest sessions under other kernels, six Spaces in chromium, local Ray and torchrun clusters), then those of a
# plain run (every page's examples, the parity runs, the command lines, the operation counts, MLflow, the linters).
# A file without tests in a run drops out of its order. pytest-xdist gives each worker one file at a time in
# collection order (--no-loadscope-reorder in pyproject.toml; by default it orders files by their number of tests,
# which put the longest file last and left one worker idle for three minutes): these start first and the short
# files fill in behind them.
LONGEST_FIRST = ("test_any_cpu.py", "test_space.py", "test_ray.py", "test_docs.py", "test_distributed.py",
                 "test_moverscore.py", "test_cli.py", "test_batched.py", "test_mlflow.py", "test_code_quality.py",
                 "test_cache.py", "test_timings.py", "test_bench.py", "test_lazy_emd.py", "test_languages.py")


# The system tests (marker ``system``, declared with what it covers in pyproject.toml) are most of the suite's time
# on a 2-core machine, so the run a contributor repeats (plain ``pytest``: the README's second command) leaves them
# out, and ``pytest -m system`` runs them alone; .ci/run runs both. Any ``-m`` expression selects by itself, and
# ``--with-system-tests`` keeps them in a plain run (CI's lowest-versions step).
def _leaves_out_system_tests(config) -> bool:
    return not config.option.markexpr and not config.getoption("--with-system-tests")


def pytest_collection_modifyitems(config, items):
    unknown = [name for name in LONGEST_FIRST if not (REPO / "tests" / name).is_file()]
    if unknown:  # a renamed or removed file would silently fall back to the end of the order
        raise pytest.UsageError(f"tests/conftest.py: LONGEST_FIRST names {unknown}, which are not test files")
    if _leaves_out_system_tests(config):
        system, kept = [], []
        for item in items:
            (system if item.get_closest_marker("system") else kept).append(item)
        if system:
            config.hook.pytest_deselected(items=system)
            items[:] = kept
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_terminal_summary(terminalreporter, config):
    """Where the system tests were left out, their declaration says so: what they start and the command."""
    if _leaves_out_system_tests(config) and not hasattr(config, "workerinput"):
        declared = next(line for line in config.getini("markers") if line.startswith("system:"))
        terminalreporter.write_line(f"left out, the tests marked {declared}")


def pytest_addoption(parser):
    parser.addoption("--with-system-tests", action="store_true",
                     help="also run the system tests (marker `system`), which a run without -m leaves out")
    parser.addoption("--torch-threads", default="", metavar="N,M",
                     help="run every test once per torch thread count (torch.set_num_threads, and OMP_NUM_THREADS "
                          "and MKL_NUM_THREADS for the subprocesses it starts); tests/test_any_cpu.py uses it")


def pytest_generate_tests(metafunc):
    counts = metafunc.config.getoption("--torch-threads")
    if counts and "torch_threads" in metafunc.fixturenames:
        metafunc.parametrize("torch_threads", [int(n) for n in counts.split(",")], indirect=True,
                             ids=lambda n: f"{n}thread")


@pytest.fixture(autouse=True)
def torch_threads(request, monkeypatch):
    """The torch thread count of this test when ``--torch-threads`` is given (else torch's own, untouched)."""
    count = getattr(request, "param", None)
    if count is None:
        yield None
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    monkeypatch.setenv("OMP_NUM_THREADS", str(count))
    monkeypatch.setenv("MKL_NUM_THREADS", str(count))
    try:
        yield count
    finally:
        torch.set_num_threads(before)


@pytest.fixture()
def embedded(monkeypatch) -> list[str]:
    """The texts the encoder runs through its model from here on (no MOVERS_CACHE folder, so only an object's own
    cache counts)."""
    from movers.text.embedding import Encoder

    monkeypatch.delenv("MOVERS_CACHE", raising=False)
    texts: list[str] = []
    original = Encoder._run

    def counting(self, batch, **kwargs):
        texts.extend(batch)
        return original(self, batch, **kwargs)

    monkeypatch.setattr(Encoder, "_run", counting)
    return texts


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """A movers wheel built from this checkout (the tests may run against an installed, non-editable movers, as in
    CI); shared by the tests that install it (the Space build, the Inspect entry point)."""
    from movers.integrations.spaces.build import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"), source=REPO)


@pytest.fixture(scope="session")
def one_call():
    """``one_call(slug, **options)``: ``movers.<slug>`` on all of :func:`split_pairs` in one process (the expected
    values of the split runs), computed once per session; ``reference_weights="weights"`` passes their weights."""
    import warnings

    import movers

    preds, refs, weights = split_pairs()
    done: dict[tuple, object] = {}

    def call(slug: str, **options):
        key = (slug, tuple(sorted(options.items())))
        if key not in done:
            kwargs = {k: weights if v == "weights" else v for k, v in options.items()}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a segment without content words (SMS): tested elsewhere
                done[key] = getattr(movers, slug)(preds, refs, **kwargs)
        return done[key]

    return call
