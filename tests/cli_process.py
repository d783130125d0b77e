"""``movers`` commands run as processes of their own, forked from one that imported the command line once.

A ``python -m movers ...`` process spends most of its time importing torch, transformers and movers (about 7 CPU
seconds for a two-line ``movers score``, most of it before the first text is read). The command-line tests run
dozens of commands, so they share that start: a multiprocessing fork server imports those libraries once
(:mod:`tests.cli_preload`, nothing computed, so no thread pool is forked), and each command is a fresh process
forked from it that sets its own environment, working folder and thread count, reads its stdin and writes its
stdout and stderr through real file descriptors, runs ``movers.cli.main`` (what the ``movers`` console script and
``python -m movers`` run) and exits with its status. Its files, environment and memory are its own, as a
command's are.

What the fork server cannot give a command is a different environment at import time: a call whose environment
changes a variable that libraries read when they are imported (the Hugging Face and transformers variables, the
instruction-set and thread variables, PYTHONPATH, ...) runs as ``python -m movers`` instead, as do the tests
that check the real command itself (``real=True``).
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

IMPORT_TIME = ("HF_", "TRANSFORMERS_", "HUGGINGFACE_", "MKL_", "ONEDNN_", "ATEN_", "OMP_", "KMP_", "PYTHON",
               "TORCH", "CUDA", "MOVERS_CACHE")
"""Prefixes of the variables read when libraries are imported; OMP_NUM_THREADS alone is applied per command."""

_CONTEXT: multiprocessing.context.ForkServerContext | None = None


def _context() -> multiprocessing.context.ForkServerContext:
    global _CONTEXT
    if _CONTEXT is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["tests.cli_preload"])
        _CONTEXT = context
    return _CONTEXT


def _differs_at_import(env: dict[str, str]) -> bool:
    keys = set(env) | set(os.environ)
    return any(env.get(k) != os.environ.get(k) for k in keys
               if k != "OMP_NUM_THREADS" and k.startswith(IMPORT_TIME))


def _command(argv: list[str], env: dict[str, str], cwd: str, files: tuple[str, str, str]) -> None:
    """The forked process: the environment, folder, standard streams and threads of the command, then main()."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, (path, flags) in enumerate(zip(files, (os.O_RDONLY, os.O_WRONLY, os.O_WRONLY), strict=True)):
        os.dup2(os.open(path, flags), fd)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (the process's own stdin)
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.argv = ["movers", *argv]
    if env.get("OMP_NUM_THREADS"):
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    from movers.cli import main

    try:
        status = main(argv)
    except SystemExit as stop:  # argparse's usage errors, sys.exit in a command
        status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status or 0)


def run_movers(argv: list[str], *, stdin: str = "", env: dict[str, str], cwd: str | os.PathLike | None = None,
               real: bool = False, timeout: float = 600) -> subprocess.CompletedProcess:
    """``movers ARGV`` with `stdin`, `env` and `cwd`: forked from the fork server, or ``python -m movers`` when
    `real` or when `env` changes what is read at import time. Returns what ``subprocess.run`` returns."""
    cwd = str(cwd or os.getcwd())
    if real or _differs_at_import(env):
        return subprocess.run([sys.executable, "-m", "movers", *argv], input=stdin, capture_output=True, text=True,
                              env=env, cwd=cwd, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="movers-command-") as folder:
        files = tuple(str(Path(folder, name)) for name in ("stdin", "stdout", "stderr"))
        Path(files[0]).write_text(stdin, encoding="utf-8")
        for path in files[1:]:
            Path(path).touch()
        process = _context().Process(target=_command, args=(list(argv), dict(env), cwd, files))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            raise subprocess.TimeoutExpired(["movers", *argv], timeout)
        out, err = (Path(p).read_text(encoding="utf-8") for p in files[1:])
    return subprocess.CompletedProcess(["movers", *argv], process.exitcode, out, err)
