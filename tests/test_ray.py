"""movers.integrations.ray on a local Ray cluster started here (one for the session, 2 CPUs): every metric's
corpus score, signature and per-row scores equal one movers call on the whole data set (to REGROUPING_ATOL;
ΔBLEU the same bits), on blocks of unequal sizes that come in shuffled order; a scoring actor killed mid-run
is restarted by Ray and nothing is lost or counted twice; the command line scores a folder of JSONL files on
that cluster (ΔBLEU with rated references: its check on Ray).

Inputs: real texts of tests/reference/ (tests/helpers.py's split_pairs: DailyDialog segments with ragged rated
references). Expected values: one-process calls (each metric's parity with its original is tested elsewhere).
Each Ray call starts one scoring actor (`concurrency=1`); actor start-ups are what these tests cost."""
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

from .helpers import REPO, regrouped, split_pairs

SKIP = "Ray Data is the optional extra movers[ray] (pip install 'movers[ray]')"
ray = pytest.importorskip("ray", reason=SKIP)
ray_data = pytest.importorskip("ray.data", reason=SKIP)

N = 20
BLOCKS = [(13, 20), (0, 3), (3, 13)]  # unequal blocks, not in input order
CONFIGS = [  # every metric and every call-level statistic: MoverScore (per-call IDF) in the fault test, ΔBLEU
    # (rated references) in the command-line test
    ("twmd", {"centering": "corpus", "variant": "trwmd"}),  # corpus centring: the first pass embeds (actors)
    ("lazy_emd", {"idf": True}),
    ("sms", {}),
    ("s_wms", {}),
    # TWMD's default batch centring, runs of 8, 8 and 4 rows by the index column; last, as its shuffle's worker
    # processes take the place of the idle workers the other cases reuse
    ("twmd", {"centering_batch": 8}),
]


@pytest.fixture(scope="session")
def cluster():
    """One local Ray cluster for every Ray test (2 CPUs, no dashboard, no usage reporting)."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_data.DataContext.get_current().enable_progress_bars = False
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def _dataset():
    import pandas as pd

    preds, refs, weights = split_pairs()
    frame = pd.DataFrame({"prediction": preds, "reference": refs, "weights": weights, "position": range(N)})
    return ray_data.from_pandas([frame.iloc[a:b] for a, b in BLOCKS])


def _in_order(rows: list[dict]) -> list[dict]:
    preds, refs, _ = split_pairs()
    rows = sorted(rows, key=lambda row: row["position"])
    assert [row["position"] for row in rows] == list(range(N))  # every row once: nothing lost, nothing twice
    assert [row["prediction"] for row in rows] == preds and [list(row["reference"]) for row in rows] == refs
    return rows


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
def test_a_killed_scoring_actor_is_restarted_and_nothing_is_lost_or_counted_twice(cluster, one_call):
    from movers.integrations.ray import score

    out = score(_dataset(), "moverscore", index="position", block_size=3, concurrency=1, idf=True)
    killed: list[int] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_kill_when_busy, args=("_ScoringActor", killed, stop), daemon=True)
    watcher.start()
    try:
        out = out.materialize()
        rows = _in_order(out.rows.take_all())
    finally:
        stop.set()
        watcher.join()
    assert killed, "no scoring actor was seen running a batch"
    want = one_call("moverscore", idf=True)
    assert [row["moverscore"] for row in rows] == regrouped(want.scores)
    assert out.signature == want.signature and out.score == regrouped(want.score)


def test_a_data_set_read_as_one_block_is_spread_over_the_pool(cluster, one_call):
    """A reader may return a whole data set as one block (Ray's Parquet reader does, up to 128 MiB), and a block
    goes to one actor whole: the rows are cut into blocks of at most `block_size` first, so each actor of the pool
    gets some. Before, one actor scored all 20 rows in one task while the other waited."""
    import pandas as pd

    from movers.integrations.ray import score

    preds, refs, weights = split_pairs()
    one_block = ray_data.from_pandas(pd.DataFrame({"prediction": preds, "reference": refs, "weights": weights}))
    assert one_block.materialize().num_blocks() == 1
    out = score(one_block, "delta_bleu", block_size=4, concurrency=2, num_cpus=0.5,
                reference_weights="weights").materialize()
    assert out.rows.num_blocks() >= N // 4  # scored in at least five tasks, not one
    want = one_call("delta_bleu", reference_weights="weights")
    assert out.score == want.score and sorted(out.rows.to_pandas()["delta_bleu"]) == sorted(want.scores)


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
    with pytest.raises(ValueError, match=r"centering='batch' averages runs of 32 consecutive rows .* pass index="):
        score(ds, "twmd")
    shifted = ds.map_batches(lambda frame: frame.assign(position=frame["position"] + 1), batch_format="pandas")
    with pytest.raises(ValueError, match=r"`index` column 'position' must number the 20 rows 0..19 once each; "
                                         r"it holds values from 1 to 20"):
        score(shifted, "twmd", index="position")


@pytest.mark.slow
def test_command_scores_a_folder_of_jsonl_files_on_the_cluster(cluster, one_call, tmp_path):
    preds, refs, weights = split_pairs()
    data = tmp_path / "pairs"
    data.mkdir()
    for name, (a, b) in zip("abc", BLOCKS, strict=True):  # read in name order: unequal files, shuffled rows
        data.joinpath(f"{name}.jsonl").write_text("".join(
            json.dumps({"hyp": preds[i], "refs": refs[i], "w": weights[i], "i": i}) + "\n" for i in range(a, b)),
            encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "movers", "score", "--ray", str(data), "-m", "delta_bleu", "--prediction-column",
           "hyp", "--reference-column", "refs", "--weights-column", "w", "--index-column", "i",
           "--address", cluster, "--output", str(tmp_path / "scored"), "-f", "json"]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    printed = json.loads(run.stdout)["delta_bleu"]
    want = one_call("delta_bleu", reference_weights="weights")
    assert printed == {"score": want.score, "signature": str(want.signature)}  # exact sums: the same bits
    written = json.loads((tmp_path / "scored" / "delta_bleu.json").read_text())
    assert {k: written[k] for k in ("score", "signature", "counts", "totals", "precisions", "bp")} == {
        "score": want.score, "signature": str(want.signature), **{k: want.extra[k] for k in
                                                                  ("counts", "totals", "precisions", "bp")}}
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "scored" / "delta_bleu.parquet").sort_by("i")
    assert table.column_names == ["hyp", "refs", "w", "i", "delta_bleu"]
    assert table.column("i").to_pylist() == list(range(N))
    assert table.column("delta_bleu").to_pylist() == want.scores


@pytest.mark.slow
@pytest.mark.parametrize("metric,options", CONFIGS, ids=[f"{m}-{'-'.join(o) or 'default'}" for m, o in CONFIGS])
def test_ray_equals_one_call(cluster, one_call, metric, options):
    from movers.integrations.ray import score

    got = score(_dataset(), metric, index="position", block_size=5, concurrency=1, **options).materialize()
    want = one_call(metric, **options)
    rows = _in_order(got.rows.take_all())
    assert got.signature == want.signature and "nrefs:var" in str(got.signature)
    assert got.score == regrouped(want.score)
    assert [row[metric] for row in rows] == regrouped(want.scores)
