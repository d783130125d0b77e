"""The one speed harness of the timings: the encoder floor, a fresh process per measurement, a quiet offline run.

* :func:`bertscorer`: bert-score loaded once, as its users keep it, for the timings that compare with it;
* :func:`floor`: the least any embedding metric must do, the one definition every timing uses: the bare encoder
  over every token of the unique texts, in windows of the model's positions (512) side by side, without overlap,
  sorted by length and batched as movers batches (:func:`movers.text.embedding.token_batches`); tokenization
  included, model loading and a warm-up excluded.
* :func:`fresh`: a function of this package run in a fresh Python process (``python -m shared.bench.child``, or
  under torchrun), returning what the function returned with the process's peak resident set (``peak_rss_mb``:
  interpreter, torch and encoder included). The measured library is the installed ``movers`` (or another tree's,
  ``path``), unchanged: what a child needs to set, it sets through options and environment variables. The
  timing studies take the runner as an argument (``run``, default :func:`fresh`); :func:`inline` runs the same
  functions in the calling process, for quick checks of a study's code (the tests' smoke runs).
* :func:`quiet_offline`: offline flags, no warnings, transformers' logs and bars off.
"""
from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import CHECKOUT

if TYPE_CHECKING:
    from movers import Encoder

__all__ = ["floor", "bertscorer", "fresh", "inline", "quiet_offline", "model_folder", "Runner", "OFFLINE"]

Runner = Callable[..., dict[str, Any]]
"""How a study runs one measurement: :func:`fresh` (a process of its own) or :func:`inline` (this one)."""

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
"""The environment of every fresh process: nothing is downloaded, no tokenizer threads of their own."""


def quiet_offline(*, category: type[Warning] = Warning) -> None:
    """Set up a timing run: offline flags, warnings of `category` ignored, transformers' logs and bars off."""
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)
    warnings.simplefilter("ignore", category)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def model_folder(model: str | None = None) -> str:
    """The folder transformers loads `model` from (default: the bundled encoder), for what is timed beside movers
    (bert-score, the originals); the encoder's tokenizer is read to find it, not its weights."""
    from movers import Encoder

    return str(Encoder(model).backbone.path)


def bertscorer(model: str | None = None, *, layers: int | None = None, device: str = "cpu", batch_size: int = 64
               ) -> Any:
    """bert-score as its users keep it between calls: a ``BERTScorer`` built once with the model folder of `model`
    (default the bundled encoder), its `layers`-th layer (default the last) and `batch_size`, and run once on a short
    pair, so that a timing of ``scorer.score`` counts the scoring alone, as movers' timings count a loaded
    encoder (``bert_score.score`` loads the model inside every call)."""
    from bert_score import BERTScorer

    from movers import Encoder

    backbone = Encoder(model).backbone
    scorer = BERTScorer(model_type=str(backbone.path), num_layers=layers or backbone.num_layers,
                        batch_size=batch_size, device=device)
    scorer.score(["A short warm-up text."], ["Another short warm-up text."])
    return scorer


def floor(texts: Sequence[str], encoder: Encoder | None = None) -> float:
    """Seconds the bare encoder (`encoder`'s model, default the bundled one) takes over every token of the unique
    `texts`: their content tokens cut into windows of the model's positions side by side (no overlap), each with
    its special tokens, sorted longest first and batched as movers batches; tokenization included. The model is
    loaded and run once on a short text before the clock starts."""
    import numpy as np
    import torch

    from movers import load_encoder
    from movers.text.embedding import CPU_BATCH_TOKENS, token_batches

    encoder = encoder or load_encoder()
    bb = encoder.backbone
    span = bb.window - len(bb.prefix) - len(bb.suffix)
    pad = bb.tokenizer.pad_token_id or 0
    model = bb.model

    def run(unique: list[str]) -> None:
        windows = [bb.with_specials(ids[s:s + span]) for ids in encoder.content_ids(unique)
                   for s in range(0, max(len(ids), 1), span)]
        windows.sort(key=len, reverse=True)
        cpu = bb.device.type == "cpu"
        with torch.inference_mode():
            for batch in token_batches([len(w) for w in windows], 64, CPU_BATCH_TOKENS if cpu else None):
                rows = [windows[k] for k in batch]
                ids = np.full((len(rows), len(rows[0])), pad, dtype=np.int64)  # padded on the host, one copy each
                mask = np.zeros_like(ids)
                for r, w in enumerate(rows):
                    ids[r, :len(w)] = w
                    mask[r, :len(w)] = 1
                model(input_ids=torch.from_numpy(ids).to(bb.device),
                      attention_mask=torch.from_numpy(mask).to(bb.device))

    run(["A short warm-up text."])
    start = time.perf_counter()
    run(list(dict.fromkeys(texts)))
    return time.perf_counter() - start


def fresh(function: Callable[..., dict[str, Any] | None], /, *, env: Mapping[str, str] | None = None,
          threads: int | None = None, processes: int = 1, path: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """``function(**kwargs)`` in a fresh Python process: what it returned (a JSON object), with the process's
    ``peak_rss_mb``. `function` is a module-level function of this package; `kwargs` go as JSON.

    Args:
        env: Variables set in the process (besides :data:`OFFLINE` and the caller's environment).
        threads: ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` of the process (default: torch's own choice).
        processes: More than 1: that many processes under torchrun (gloo on 127.0.0.1); rank 0 reports.
        path: A folder put first on ``PYTHONPATH``: the ``movers`` it holds is measured (another tree's).

    Raises:
        RuntimeError: The process failed; the message names the function and ends with its stderr.
    """
    package, _, module = function.__module__.rpartition(".")
    if package != __package__:
        raise ValueError(f"fresh: {function.__module__}.{function.__name__} is not a function of {__package__}.")
    full_env = {**os.environ, **OFFLINE, **(env or {})}
    if threads is not None:
        full_env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if path is not None:
        full_env["PYTHONPATH"] = os.pathsep.join([path, *filter(None, [os.environ.get("PYTHONPATH")])])
    launcher = [sys.executable, "-m"]
    if processes > 1:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        launcher += ["torch.distributed.run", "--nproc_per_node", str(processes), "--master_addr", "127.0.0.1",
                     "--master_port", str(port), "-m"]
    with tempfile.TemporaryDirectory(prefix="movers-bench-") as tmp:
        out = Path(tmp) / "result.json"
        run = subprocess.run([*launcher, f"{__package__}.child", str(out), module, function.__name__,
                              json.dumps(kwargs)], cwd=CHECKOUT, env=full_env, capture_output=True, text=True)
        if run.returncode != 0 or not out.is_file():
            raise RuntimeError(f"{module}.{function.__name__}({json.dumps(kwargs)[:200]}) failed in a fresh process "
                               f"(exit status {run.returncode}):\n{run.stderr[-2000:]}")
        return dict(json.loads(out.read_text(encoding="utf-8")))


def inline(function: Callable[..., dict[str, Any] | None], /, *, env: Mapping[str, str] | None = None,
           threads: int | None = None, processes: int = 1, path: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """:func:`fresh`'s measurement run in this process, for a quick check of a study's code: its seconds and peak
    resident set are this process's (loaded models included), not a fresh process's. `env` applies while the
    function runs, and the caller's environment is restored after it; `threads` is left to this process;
    several processes and another tree (`path`) need :func:`fresh`."""
    if processes > 1 or path is not None:
        raise ValueError("inline: several processes or another tree's movers need a fresh process (fresh).")
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        result = function(**json.loads(json.dumps(kwargs)))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return {**(result or {}), "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
