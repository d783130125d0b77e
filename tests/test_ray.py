"""movers.integrations.ray on a local Ray cluster started here (one for the session, 2 CPUs): every metric's
corpus score, signature and per-row scores equal one movers call on the whole data set (to REGROUPING_ATOL;
ΔBLEU the same bits), on blocks of unequal sizes that come in shuffled order; a scoring actor killed mid-run
is restarted by Ray and nothing is lost or counted twice; the command line scores a file on that cluster.

Inputs: real texts of tests/reference/ (ΔBLEU's DailyDialog segments, with their rated references). Expected
values: one-process calls (each metric's parity with its original is tested elsewhere)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import REPO, reference_records, regrouped

SKIP = "Ray Data is the optional extra movers[ray] (pip install 'movers[ray]')"
ray = pytest.importorskip("ray", reason=SKIP)
ray_data = pytest.importorskip("ray.data", reason=SKIP)

N = 24
BLOCKS = [(15, 24), (0, 4), (4, 15)]  # unequal blocks, not in input order
CONFIGS = [  # MoverScore (per-call IDF) runs in the fault test
    ("twmd", {"centering_batch": 8}),  # the default batch centring, runs of 8 rows by the index column
    ("twmd", {"centering": "corpus", "variant": "trwmd"}),
    ("lazy_emd", {"idf": True}),
    ("s_wms", {}),
    ("delta_bleu", {"reference_weights": "weights"}),
]


@pytest.fixture(scope="session")
def cluster():
    """One local Ray cluster for every Ray test (2 CPUs, no dashboard, no usage reporting)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_data.DataContext.get_current().enable_progress_bars = False
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _texts():
    records = reference_records("dbleu_dailydialog_segments")[:N]
    return ([r["hypothesis"] for r in records], [list(r["references"]) for r in records],
            [list(r["ref_weights"]) for r in records])


def _dataset():
    import pandas as pd

    preds, refs, weights = _texts()
    frame = pd.DataFrame({"prediction": preds, "reference": refs, "weights": weights, "position": range(N)})
    return ray_data.from_pandas([frame.iloc[a:b] for a, b in BLOCKS])


@pytest.mark.slow
@pytest.mark.parametrize("metric,options", CONFIGS, ids=[f"{m}-{'-'.join(o) or 'default'}" for m, o in CONFIGS])
def test_ray_equals_one_call(cluster, metric, options):
    import movers
    from movers.integrations.ray import score

    preds, refs, weights = _texts()
    got = score(_dataset(), metric, index="position", block_size=5, concurrency=1, **options).materialize()
    call = {k: (weights if v == "weights" else v) for k, v in options.items()}
    want = getattr(movers, metric)(preds, refs, **call)
    rows = sorted(got.rows.take_all(), key=lambda row: row["position"])
    assert [row["position"] for row in rows] == list(range(N))  # every row once
    assert [row["prediction"] for row in rows] == preds and [list(row["reference"]) for row in rows] == refs
    assert got.signature == want.signature
    if metric == "delta_bleu":  # exact sums: the same bits
        assert got.score == want.score and [row[metric] for row in rows] == want.scores
        assert got.extra["counts"] == want.extra["counts"] and got.extra["precisions"] == want.extra["precisions"]
    else:
        assert got.score == regrouped(want.score)
        assert [row[metric] for row in rows] == regrouped(want.scores)


def _kill_when_busy(marker: str, killed: list[int], stop: threading.Event) -> None:
    """Kill (SIGKILL) the first worker process whose title says it is running a `marker` batch."""
    while not stop.is_set():
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                title = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if title.startswith("ray::") and marker in title and "submit" in title:  # a batch in flight
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
                return
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the actor's process in /proc")
def test_a_killed_scoring_actor_is_restarted_and_nothing_is_lost_or_counted_twice(cluster):
    import movers
    from movers.integrations.ray import score

    preds, refs, _ = _texts()
    out = score(_dataset(), "moverscore", index="position", block_size=3, concurrency=1, idf=True)
    killed: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_kill_when_busy, args=("_ScoringActor", killed, stop), daemon=True)
    watcher.start()
    try:
        out = out.materialize()
        rows = out.rows.take_all()
    finally:
        stop.set()
        watcher.join()
    assert killed, "no scoring actor was seen running a batch"
    want = movers.moverscore(preds, refs, idf=True)
    rows.sort(key=lambda row: row["position"])
    assert [row["position"] for row in rows] == list(range(N))  # nothing lost, nothing twice
    assert [row["moverscore"] for row in rows] == regrouped(want.scores)
    assert out.signature == want.signature and out.score == regrouped(want.score)


def test_refusals_name_the_reason(cluster):
    from movers.integrations.ray import score

    ds = _dataset()
    with pytest.raises(ValueError, match=r"baseline='fit' is fitted on random pairs of the whole call"):
        score(ds, "moverscore", baseline="fit")
    with pytest.raises(ValueError, match=r"return_plans is refused on Ray: return_plans keeps a transport plan"):
        score(ds, "twmd", return_plans=True)
    with pytest.raises(ValueError, match=r"the data set has no column 'hyp'"):
        score(ds, "delta_bleu", prediction="hyp")
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'idff'"):
        score(ds, "moverscore", idff=True)


@pytest.mark.slow
def test_batch_centring_needs_the_index_column(cluster):
    from movers.integrations.ray import score

    with pytest.raises(ValueError, match=r"centering='batch' averages runs of 32 consecutive rows .* pass index="):
        score(_dataset(), "twmd")


@pytest.mark.slow
def test_command_scores_a_jsonl_file_on_the_cluster(cluster, tmp_path):
    import movers

    preds, refs, weights = _texts()
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"hyp": p, "refs": r, "w": w, "i": i}) + "\n"
                            for i, (p, r, w) in enumerate(zip(preds, refs, weights, strict=False))), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "movers", "score", "--ray", str(data), "-m", "delta_bleu", "--prediction-column",
           "hyp", "--reference-column", "refs", "--weights-column", "w", "--index-column", "i",
           "--address", cluster, "--output", str(tmp_path / "scored"), "-f", "json"]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = json.loads(run.stdout)["delta_bleu"]
    want = movers.delta_bleu(preds, refs, reference_weights=weights)
    assert printed["score"] == want.score and printed["signature"] == str(want.signature)
    written = json.loads((tmp_path / "scored" / "delta_bleu.json").read_text())
    assert written == printed
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "scored" / "delta_bleu.parquet").sort_by("i")
    assert table.column_names == ["hyp", "refs", "w", "i", "delta_bleu"]
    assert table.column("delta_bleu").to_pylist() == want.scores
