"""``movers`` commands (and test scripts) run as processes of their own, forked from one that imported the
command line and its libraries once.

A ``python -m movers ...`` process spends most of its time importing torch, transformers and movers (about 7 CPU
seconds for a two-line ``movers score``, most of it before the first text is read). The command-line tests run
dozens of commands, so they share that start: a multiprocessing fork server imports those libraries once
(:mod:`tests.support.cli_preload`, nothing computed, so no thread pool is forked), and each command is a fresh process
forked from it that sets its own environment, working folder and thread count, reads its stdin and writes its
stdout and stderr through real file descriptors, runs ``movers.cli.main`` (what the ``movers`` console script and
``python -m movers`` run) and exits with its status. Its files, environment and memory are its own, as a
command's are.

What the fork server cannot give a command is a different environment at import time: a call whose environment
changes a variable that libraries read when they are imported (the Hugging Face and transformers variables, the
instruction-set and thread variables, a PYTHONPATH folder that this process does not import from already, ...)
runs as ``python -m movers`` instead, as do the tests that check the real command itself (``real=True``).
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

IMPORT_TIME = ("HF_", "TRANSFORMERS_", "HUGGINGFACE_", "MKL_", "ONEDNN_", "ATEN_", "OMP_", "KMP_", "PYTHONPATH",
               "PYTHONHOME", "TORCH", "CUDA", "XDG_", "MOVERS_NO_AUTOREGISTER")
"""Prefixes of the variables read when libraries are imported; the thread counts are applied per command."""
SET_BY_LIBRARIES = ("KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK", "TORCHINDUCTOR_CACHE_DIR", "HF_XET_HIGH_PERFORMANCE",
                    "HF_HUB_ENABLE_HF_TRANSFER")
"""Variables that libraries set on themselves in the process that imports or uses them (scikit-learn, which POT
imports, the first two; torch's compiler its default folder; lm-eval, on import, the Hub's download settings, which
an offline run never reads): the tests' process gains them as it collects and runs, and a command that asks for
none of them runs as it would without them. No test asks for them."""

_CONTEXT: multiprocessing.context.ForkServerContext | None = None
_SERVER_ENV: dict[str, str] = {}
"""The environment the fork server started with (it starts on the first forked command, from this process's)."""


def _context() -> multiprocessing.context.ForkServerContext:
    global _CONTEXT
    if _CONTEXT is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tests.support.cli_preload"])
        _SERVER_ENV.update(os.environ)
        _CONTEXT = context
    return _CONTEXT


def _new_paths(value: str | None) -> list[str]:
    """The folders of a PYTHONPATH value that this process (and so the fork server, which has its ``sys.path``) does
    not import from already: neither on ``sys.path`` nor the folder holding the movers imported here (an editable
    install finds it without a ``sys.path`` entry; the tests put a checkout's ``shared/`` on their commands' path)."""
    import movers

    known = {os.path.realpath(p or os.curdir) for p in sys.path}
    known.add(os.path.realpath(Path(movers.__file__).parents[1]))
    return [p for p in (value or "").split(os.pathsep) if p and os.path.realpath(p) not in known]


def _differs_at_import(env: dict[str, str]) -> bool:
    server = _SERVER_ENV or os.environ
    keys = set(env) | set(server)
    return any(_new_paths(env.get(k)) != _new_paths(server.get(k)) if k == "PYTHONPATH" else env.get(k) != server.get(k)
               for k in keys if k.startswith(IMPORT_TIME) and k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                                         *SET_BY_LIBRARIES))


def _child(kind: str, payload: str, argv: list[str], env: dict[str, str], cwd: str,
           files: tuple[str, str, str]) -> None:
    """The forked process: the environment, folder, standard streams and threads of the command, then the command
    (``kind`` "movers": ``movers.cli.main(argv)``; "python": the code `payload` as ``python -c payload argv``)."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, (path, flags) in enumerate(zip(files, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY), strict=True)):
        os.dup2(os.open(path, flags), fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's own stdin)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if env.get("OMP_NUM_THREADS"):  # torch sets OpenMP's and MKL's thread counts alike
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    if env.get("PYTHONWARNINGS") in ("ignore", "default", "error", "always", "module", "once"):
        import warnings

        warnings.simplefilter(env["PYTHONWARNINGS"])  # type: ignore[arg-type]
    try:
        if kind == "movers":
            from movers.cli import main

            sys.argv = ["movers", *argv]
            status = main(argv)
        else:
            sys.argv = ["-c", *argv]
            exec(compile(payload, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 (a test's own code)
            status = 0
    except SystemExit as stop:  # argparse's usage errors, sys.exit in a command
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status or 0)


def _fork(kind: str, payload: str, argv: list[str], stdin: str, env: dict[str, str], cwd: str,
          timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="movers-command-") as folder:
        files = tuple(str(Path(folder, name)) for name in ("stdin", "stdout", "stderr"))
        Path(files[0]).write_text(stdin, encoding="utf-8")
        for path in files[1:]:
            Path(path).touch()
        process = _context().Process(target=_child, args=(kind, payload, list(argv), dict(env), cwd, files))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            raise subprocess.TimeoutExpired([kind, *argv], timeout)
        out, err = (Path(p).read_text(encoding="utf-8") for p in files[1:])
    return subprocess.CompletedProcess([kind, *argv], process.exitcode, out, err)


def run_movers(argv: list[str], *, stdin: str = "", env: dict[str, str], cwd: str | os.PathLike | None = None,
               real: bool = False, timeout: float = 600) -> subprocess.CompletedProcess:
    """``movers ARGV`` with `stdin`, `env` and `cwd`: forked from the fork server, or ``python -m movers`` when
    `real` or when `env` changes what is read at import time. Returns what ``subprocess.run`` returns."""
    cwd = str(cwd or os.getcwd())
    if real or _differs_at_import(env):
        return subprocess.run([sys.executable, "-m", "movers", *argv], input=stdin, capture_output=True, text=True,
                              env=env, cwd=cwd, timeout=timeout)
    return _fork("movers", "", argv, stdin, env, cwd, timeout)


def run_python(code: str, argv: list[str] = (), *, stdin: str = "", env: dict[str, str] | None = None,
               cwd: str | os.PathLike | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -c CODE ARGV`` as a process forked from the fork server (``python -c`` itself where `env` changes
    what is read at import time). Returns what ``subprocess.run`` returns."""
    env = dict(os.environ if env is None else env)
    cwd = str(cwd or os.getcwd())
    if _differs_at_import(env):
        return subprocess.run([sys.executable, "-c", code, *argv], input=stdin, capture_output=True, text=True,
                              env=env, cwd=cwd, timeout=timeout)
    return _fork("python", code, list(argv), stdin, env, cwd, timeout)
