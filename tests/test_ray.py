"""movers.integrations.ray on a local Ray cluster started here (one for the session, 2 CPUs, with
movers.integrations.ray.local_cluster): every metric's corpus score, signature and per-row scores equal one movers
call on the whole data set (to REGROUPING_ATOL; ΔBLEU the same bits), on blocks of unequal sizes that come in
shuffled order; a scoring actor killed mid-run is restarted by Ray and nothing is lost or counted twice; the
command line scores a folder of JSONL files on that cluster (ΔBLEU with rated references: its check on Ray)
and prints nothing on stderr. Misuse gets movers' own errors: arguments before any task, a bad row named by its
index value or its other columns, resources the cluster cannot grant refused or the pool made smaller within
seconds; writing the rows gives the corpus score in the same execution; a cluster that movers starts makes no
network request outside the loopback.

Inputs: real texts of tests/reference/ (tests/helpers.py's split_pairs: DailyDialog segments with ragged rated
references). Expected values: one-process calls (each metric's parity with its original is tested elsewhere).
Each Ray call starts one scoring actor (`concurrency=1`); actor start-ups are what these tests cost."""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from .helpers import REPO, regrouped, split_pairs

pytestmark = pytest.mark.system

SKIP = "Ray Data is the optional extra movers[ray] (pip install 'movers[ray]')"
if importlib.util.find_spec("ray") is None:  # not imported here: local_cluster imports it (Ray reads where a local
    pytest.skip(SKIP, allow_module_level=True)  # cluster listens when it is imported)

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
    """One local Ray cluster for every Ray test (2 CPUs; on the loopback, no dashboard, no usage reporting)."""
    from movers.integrations.ray import local_cluster

    local_cluster(num_cpus=2)
    import ray

    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


class _Raised:
    value: BaseException


@contextlib.contextmanager
def _refused(error: type[BaseException] | tuple[type[BaseException], ...], match: str | None = None):
    """pytest.raises(error, match=match) for calls that run Ray tasks: any other exception (one of Ray's own) fails
    the test with its type and message first, where pytest would print them after Ray's long traceback, at the end
    of the output that a log's excerpt may cut."""
    wanted = " or ".join(e.__name__ for e in (error if isinstance(error, tuple) else (error,)))
    raised = _Raised()
    try:
        yield raised
    except error as err:
        raised.value = err
        if match is not None and not re.search(match, str(err)):
            pytest.fail(f"expected {wanted} matching {match!r}; got {type(err).__name__}: {err}", pytrace=False)
    except Exception as err:  # noqa: BLE001  reported, with its type
        pytest.fail(f"expected {wanted}; got {type(err).__module__}.{type(err).__qualname__}: {str(err)[:4000]}",
                    pytrace=False)
    else:
        pytest.fail(f"expected {wanted}; nothing was raised", pytrace=False)


def ray_data():
    import ray.data

    return ray.data


def _dataset():
    import pandas as pd

    preds, refs, weights = split_pairs()
    frame = pd.DataFrame({"prediction": preds, "reference": refs, "weights": weights, "position": range(N)})
    return ray_data().from_pandas([frame.iloc[a:b] for a, b in BLOCKS])


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
    one_block = ray_data().from_pandas(pd.DataFrame({"prediction": preds, "reference": refs, "weights": weights}))
    assert one_block.materialize().num_blocks() == 1
    out = score(one_block, "delta_bleu", block_size=4, concurrency=2, num_cpus=0.5,
                reference_weights="weights").materialize()
    assert out.rows.num_blocks() >= N // 4  # scored in at least five tasks, not one
    want = one_call("delta_bleu", reference_weights="weights")
    assert out.score == want.score and sorted(out.rows.to_pandas()["delta_bleu"]) == sorted(want.scores)


def test_refusals_name_the_reason(cluster):
    from movers.integrations.ray import score

    ds = _dataset()
    with _refused(ValueError, match=r"baseline='fit' is fitted on random pairs of the whole call"):
        score(ds, "moverscore", baseline="fit")
    with _refused(ValueError, match=r"return_plans is refused on Ray: return_plans keeps a transport plan"):
        score(ds, "twmd", return_plans=True)
    with _refused(ValueError, match=r"the data set has no column 'hyp'"):
        score(ds, "delta_bleu", prediction="hyp")
    with _refused(TypeError, match=r"unexpected keyword argument 'idff'"):
        score(ds, "moverscore", idff=True)
    with _refused(ValueError, match=r"centering='batch' averages runs of 32 consecutive rows .* pass index="):
        score(ds, "twmd")
    shifted = ds.map_batches(lambda frame: frame.assign(position=frame["position"] + 1), batch_format="pandas")
    with _refused(ValueError, match=r"`index` column 'position' must number the 20 rows 0..19 once each; "
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
    cmd = [sys.executable, "-m", "movers", "score", "--ray", "pairs", "-m", "delta_bleu", "--prediction-column",
           "hyp", "--reference-column", "refs", "--weights-column", "w", "--index-column", "i",
           "--address", cluster, "--output", "scored", "-f", "json"]  # paths relative to the command's folder
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stderr == ""  # a healthy run: no line of Ray's (its INFO lines and notes show with --ray-logs)
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


def _rows(changes=None):
    preds, refs, _ = split_pairs()
    rows = [{"prediction": p, "reference": r, "position": i} for i, (p, r) in enumerate(zip(preds, refs, strict=True))]
    for (i, column), value in (changes or {}).items():
        rows[i][column] = value
    return rows


def _corpus(*args, **kwargs) -> float:
    """movers.integrations.ray.score(...).score: both passes."""
    from movers.integrations.ray import score

    return score(*args, **kwargs).score


def _blocks(rows, size=8):
    import pandas as pd

    return ray_data().from_pandas([pd.DataFrame(rows[a:a + size]) for a in range(0, len(rows), size)])


@pytest.mark.parametrize("kwargs,error,match", [
    ({"concurrency": 0}, ValueError, r"`concurrency` must be a positive number of actors, got 0"),
    ({"concurrency": -1}, ValueError, r"`concurrency` must be a positive number of actors, got -1"),
    ({"concurrency": "2"}, TypeError, r"`concurrency` must be None .* got '2'"),
    ({"concurrency": 2.5}, TypeError, r"`concurrency` must be None .* got 2.5"),
    ({"concurrency": True}, TypeError, r"`concurrency` must be None .* got True"),
    ({"concurrency": (2, 1)}, ValueError, r"`concurrency` as \(min, max\) actors needs 1 <= min <= max, "
                                           r"got \(2, 1\)"),
    ({"num_cpus": 0}, ValueError, r"`num_cpus` \(per actor\) must be a number > 0, got 0"),
    ({"num_cpus": "1"}, ValueError, r"`num_cpus` \(per actor\) must be a number > 0, got '1'"),
    ({"num_gpus": -1}, ValueError, r"`num_gpus` \(per actor\) must be a number >= 0 or None, got -1"),
    ({"reference": None}, TypeError, r"`reference` must be a column name or a list of them, got None"),
    ({"prediction": 5}, TypeError, r"`prediction` must be a column name, got 5"),
    ({"index": 5}, TypeError, r"`index` must be None or a column name, got 5"),
    ({"block_size": 0}, ValueError, r"`block_size` must be a positive int, got 0"),
])
def test_bad_arguments_get_movers_message_before_any_task(cluster, kwargs, error, match):
    """Each naming the argument and what was expected (before, Ray's or Python's own errors from inside a task),
    and before any task runs: checked_call needs no data set and no cluster (the command line runs it before it
    starts one)."""
    from movers.integrations.ray import checked_call, score

    with _refused(error, match=r"movers.integrations.ray.score: " + match):
        checked_call("delta_bleu", **kwargs)
    t0 = time.monotonic()
    with _refused(error, match=match):
        score(_dataset(), "delta_bleu", **kwargs)
    assert time.monotonic() - t0 < 5  # no task ran


def test_a_bad_data_set_gets_movers_message(cluster):
    from movers.integrations.ray import score

    with _refused(TypeError, match=r"`ds` must be a ray.data.Dataset .* got list"):
        score(_rows(), "delta_bleu")
    for empty in (ray_data().from_items([]), _dataset().filter(lambda row: False)):
        with _refused(ValueError, match=r"the data set is empty; expected at least one row"):
            _corpus(empty, "delta_bleu")
    with _refused(ValueError, match=r"already has a column 'delta_bleu', the name of the score column"):
        score(_blocks([dict(r, delta_bleu=1.0) for r in _rows()]), "delta_bleu")


def test_a_bad_row_is_named_by_its_index_value_or_its_other_columns_and_the_column(cluster):
    """Inside a block a metric sees positions 0.. of that block: an error names the data set's row instead (its
    `index` value, else the values of its first other columns) and the column. Before, a None prediction at row 13
    of blocks of 8 said `predictions[5]`, an int or a list ended in pyarrow's "Unable to merge", and an index column
    of floats, strings or with a None failed deep inside a task."""
    from movers.integrations.ray import score

    preds, refs, _ = split_pairs()
    with _refused(TypeError, match=r"column 'prediction' \(the predictions\) must hold a string in every "
                                        r"row; the row with position=13 holds None"):
        _corpus(_blocks(_rows({(13, "prediction"): None})), "delta_bleu", index="position")
    with _refused(TypeError, match=r"column 'prediction' .* the row reference=\[" + repr(refs[13][0])[:20]):
        _corpus(_blocks(_rows({(13, "prediction"): None})), "delta_bleu")
    with _refused(ValueError, match=r"the row with position=13 has no reference in column 'reference'"):
        _corpus(_blocks(_rows({(13, "reference"): []})), "delta_bleu", index="position")
    for bad in (5, ["a", "b"]):  # a column Arrow cannot merge: its types, named, and what each row needs
        with _refused(ValueError, match=r"column 'prediction' holds string in some blocks of the data set and "
                                             r".* in others, which Arrow cannot put in one column"):
            score(ray_data().from_items(_rows({(13, "prediction"): bad})), "delta_bleu")
    # the row that holds the wrong value, also where pandas made the block's whole column floats (8.0, ..., 13.5)
    for position in (13.5, "13", None):
        rows = _rows({(13, "position"): position})
        with _refused((TypeError, ValueError), match=r"`index` column 'position' must hold each row's position "
                                                          r"\(an int 0, 1, ...\) in every row; the row "
                                                          r"prediction=.* holds " + re.escape(repr(position))):
            _corpus(_blocks(rows) if position is not None else ray_data().from_items(rows), "twmd",
                    index="position", centering_batch=4)
    # a metric's own message about a row of the block, with the data set's row and column instead
    with _refused(ValueError, match=r"moverscore: column 'prediction' of the row with position=13 must be a "
                                         r"non-empty text, got ' '"):
        _corpus(_blocks(_rows({(13, "prediction"): " "})), "moverscore", index="position",
                empty_predictions="error")


HINT = r"pass index=<a column with each row's position 0, 1, \.\.\.> to name each row by its position\.$"


def test_a_row_named_by_its_other_columns_says_how_to_name_rows_by_position(cluster):
    """Without `index`, a row is named by the values of its first other columns, which other rows may share (a
    block sees only its own rows): the error says so, how many rows of its block have the values shown when
    several do, and to pass index=. Rows 12, 13 and 14 share one reference and have no other column; blocks of
    8 rows (8..15 holds them): 3 rows of the block read `the row reference=['the same reference']`."""
    same = ["the same reference"]
    rows = _rows({(12, "reference"): same, (13, "reference"): same, (14, "reference"): same,
                  (13, "prediction"): None})
    bare = [{k: v for k, v in row.items() if k != "position"} for row in rows]
    with _refused(TypeError, match=r"must hold a string in every row; the row reference=\['the same reference'"
                                        r"\] holds None\. Without `index`, a row is named by its first columns' "
                                        r"values, and 3 rows of its block have the values shown \(rows of other "
                                        r"blocks may too\); " + HINT):
        _corpus(_blocks(bare), "delta_bleu", block_size=8)
    # its position column, not passed as `index`, tells the rows apart here, but no block can know that
    with _refused(TypeError, match=r"the row reference=\['the same reference'\], position=13 holds None\. "
                                        r"Without `index`, a row is named by its first columns' values, which rows "
                                        r"of other blocks may share; " + HINT):
        _corpus(_blocks(rows), "delta_bleu", block_size=8)
    with _refused(TypeError) as named:  # named by its position: no hint
        _corpus(_blocks(rows), "delta_bleu", index="position", block_size=8)
    assert str(named.value).endswith("the row with position=13 holds None."), str(named.value)


def test_a_bad_delta_bleu_weight_is_named_by_the_row_of_the_data_set(cluster):
    """ΔBLEU checks `reference_weights[i]` inside a block, where i is the row's place in its block (13 - 8 = 5
    for blocks of 8): the error names the row as the other bad rows are named (its `index` value, else its first
    other columns) and the weights column. Row 13 has 2 references, rated [0.51, 0.16]."""
    preds, refs, weights = split_pairs()
    assert len(refs[13]) == 2

    def rated(row13):
        rows = [dict(row, weights=w) for row, w in zip(_rows(), weights, strict=True)]
        rows[13]["weights"] = row13
        return _blocks(rows)

    for index in ("position", None):
        row = r"the row with position=13" if index else r"the row prediction=" + re.escape(repr(preds[13])[:20])
        with _refused(ValueError, match=r"^delta_bleu: the `reference_weights` \(column 'weights'\) of "
                                             + row + r".* must hold one weight per reference of that row \(2\), "
                                             r"got 1\."):
            _corpus(rated([0.51]), "delta_bleu", index=index, reference_weights="weights", block_size=8)
        with _refused(ValueError, match=r"^delta_bleu: value 2 of `reference_weights` \(column 'weights'\) of "
                                             + row + r".* must be a number in \[-1, 1\], got 1\.6\."):
            _corpus(rated([0.51, 1.6]), "delta_bleu", index=index, reference_weights="weights", block_size=8)
    with _refused(ValueError) as named:
        _corpus(rated([0.51, 1.6]), "delta_bleu", index="position", reference_weights="weights", block_size=8)
    assert "[5]" not in str(named.value) and "segment" not in str(named.value), str(named.value)


@pytest.mark.parametrize("kwargs,match", [
    ({"num_cpus": 8}, r"`num_cpus`=8 per actor, but no node of the cluster has more than 2 CPUs"),
    ({"num_gpus": 1}, r"`num_gpus`=1 per actor, but no node of the cluster has a GPU"),
    ({"num_cpus": 2}, r"one actor with `num_cpus`=2 takes every CPU of the cluster \(2\), and the tasks that read"),
])
def test_resources_the_cluster_cannot_grant_are_refused_within_seconds(cluster, kwargs, match):
    """Before, an actor of 8 CPUs on this 2-CPU cluster waited forever (no answer after 180 s)."""
    from movers.integrations.ray import score

    t0 = time.monotonic()
    with _refused(ValueError, match=match):
        score(_dataset(), "moverscore", **kwargs)
    assert time.monotonic() - t0 < 10


@pytest.mark.slow
def test_a_pool_that_would_starve_the_reads_is_made_smaller_with_a_warning(cluster, one_call, tmp_path):
    """Two actors of one CPU each hold both CPUs of the cluster, and the tasks that read the Parquet files can then
    never be scheduled (before: no answer after 180 s). The pool is cut to what leaves a CPU, with a warning."""
    import pandas as pd

    from movers.integrations.ray import score

    rows = _rows()
    for k in range(4):
        pd.DataFrame(rows[k * 5:(k + 1) * 5]).to_parquet(tmp_path / f"part{k}.parquet")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(_scored_with_warnings(score, tmp_path)), daemon=True)
    worker.start()
    worker.join(240)
    assert done, "no answer after 240 s"
    value, caught = done[0]
    assert any("`concurrency`=2 actors of 1 CPUs would take every CPU of the cluster (2)" in w and
               "scoring with 1 actor" in w for w in caught), caught
    assert value == one_call("delta_bleu").score  # exact sums: the same bits


def _scored_with_warnings(score, folder):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = score(ray_data().read_parquet(str(folder)), "delta_bleu", concurrency=2).score
    return value, [str(w.message) for w in caught]


@pytest.mark.slow
def test_writing_the_rows_gives_the_score_in_the_same_execution(cluster, one_call, tmp_path, monkeypatch):
    """The docs' order, write_parquet then score: the corpus score comes from the exact sums of the score column as
    its blocks are written, with no second execution of the scoring pass and no read-back of the files (before:
    four executions, the last a read-back of the written files)."""
    import pyarrow.parquet as pq

    import movers.integrations.ray as movers_ray

    def forbidden(*args, **kwargs):
        raise AssertionError("the scoring pass ran again for the score")

    out = movers_ray.score(_dataset(), "moverscore", idf=True, concurrency=1)
    monkeypatch.setattr(movers_ray, "_mean", forbidden)
    monkeypatch.setattr(ray_data(), "read_parquet", forbidden)
    out.write_parquet(str(tmp_path / "scored"))
    want = one_call("moverscore", idf=True)
    assert out.score == regrouped(want.score)
    table = pq.read_table(tmp_path / "scored")
    assert table.num_rows == N and sorted(table.column("moverscore").to_pylist()) == regrouped(sorted(want.scores))


@pytest.mark.slow
def test_reading_the_score_first_keeps_the_rows_for_the_write(cluster, one_call, tmp_path, monkeypatch):
    """The other order, score then write_parquet: the scoring pass runs once (its rows kept), and the write writes
    them without scoring again (before: the write ran the scoring pass a second time)."""
    import pyarrow.parquet as pq
    from ray.data._internal.execution import streaming_executor

    import movers.integrations.ray as movers_ray

    plans: list[str] = []
    execute = streaming_executor.StreamingExecutor.execute

    def counted(self, dag, *args, **kwargs):
        plans.append(dag.dag_str)
        return execute(self, dag, *args, **kwargs)

    monkeypatch.setattr(streaming_executor.StreamingExecutor, "execute", counted)
    out = movers_ray.score(_dataset(), "moverscore", idf=True, concurrency=1)
    want = one_call("moverscore", idf=True)
    assert out.score == regrouped(want.score)
    out.write_parquet(str(tmp_path / "scored"))
    scoring = [plan for plan in plans if "_ScoringActor" in plan]
    assert len(plans) >= 3 and len(scoring) == 1, plans  # statistics, scoring (kept), the sum and the write
    table = pq.read_table(tmp_path / "scored")
    assert table.num_rows == N and sorted(table.column("moverscore").to_pylist()) == regrouped(sorted(want.scores))


_AUDIT = """
import os, socket, sys

LOG = os.environ["MOVERS_NET_LOG"]
LOCAL = ("127.", "::1", "localhost", "::ffff:127.")


def _outside(host):
    return isinstance(host, str) and host and not host.startswith(LOCAL) and host != socket.gethostname()


def _hook(event, args):
    if event in ("socket.connect", "socket.sendto") and isinstance(args[1], tuple) and _outside(args[1][0]):
        where = f"{event} {args[1][0]}"
    elif event == "socket.getaddrinfo" and _outside(args[0]):
        where = f"{event} {args[0]}"
    else:
        return
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {' '.join(sys.argv)[:120]}: {where}\\n")


sys.addaudithook(_hook)
"""


@pytest.mark.slow
def test_a_cluster_that_movers_starts_makes_no_request_outside_the_loopback(tmp_path):
    """A local cluster started as the command line, the docs and these tests start it (local_cluster), in a process
    of its own: every Python process of the cluster (the driver, Ray's API server, its agents, the workers) logs
    each connection and name lookup through an audit hook, and none reaches beyond the loopback; the cluster's
    own address is the loopback's. Before, Ray's API server asked cloud metadata servers (169.254.169.254,
    metadata.google.internal) which cloud it ran on, usage reporting off or not."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(_AUDIT, encoding="utf-8")
    log = tmp_path / "net.log"
    script = textwrap.dedent("""
        from movers.integrations.ray import local_cluster
        local_cluster(num_cpus=1)
        import ray, ray.data
        print(ray.util.get_node_ip_address(), ray.data.range(8).map_batches(lambda b: b).sum("id"))
        ray.shutdown()
    """)
    env = dict(os.environ, MOVERS_NET_LOG=str(log), PYTHONPATH=os.pathsep.join(
        [str(hooks), str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["127.0.0.1", "28"]
    assert not log.exists(), log.read_text()[:3000]
