"""The timings of shared/bench and their one harness: every timing's entry point (``python -m shared.bench speed``
in its three forms and beside each original, ``scale``, ``systems``, ``ray``) on a tiny data folder written here
from the committed fixtures, and the harness itself (the floor, a fresh process).

The smoke runs measure in this process (``run=inline``): they check a study's code and what it writes, not its
numbers. What only a process of its own shows is checked in one (the streamed metric's flat memory, a Ray cluster).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shared.bench import harness, lengths, ray, scale, speed, systems
from shared.bench.harness import inline

from .helpers import REPO, data_path, real_pairs, reference_records


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A data folder laid out as ../shared/data with a few records of each set the timings read, from the committed
    fixtures: WMT15/16 (12 pairs), SummEval (6 summaries; each source article is 10 fixture summaries joined) and
    WebNLG 2020 (2 systems x 3 inputs)."""
    root = tmp_path_factory.mktemp("data")

    def write(name: str, records: list[dict], docs: list[dict] | None = None) -> None:
        (root / name).mkdir()
        (root / name / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        if docs is not None:
            (root / name / f"{name}_docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs),
                                                            encoding="utf-8")

    hyps, refs = real_pairs("wmt15_16", 12)
    write("wmt15_16_da_seg_toen", [{"id": str(i), "lp": "de-en", "hypothesis": h, "references": [r], "human": 0.1 * i}
                                   for i, (h, r) in enumerate(zip(hyps, refs, strict=True))])
    summaries = [r["hypothesis"] for r in reference_records("bertscore_L6_idf-off") if r["group"] == "summeval"]
    write("summeval", [{"id": str(i), "doc_id": f"d{i}", "hypothesis": s, "references": [summaries[-1 - i]],
                        "human": {"relevance": float(i)}} for i, s in enumerate(summaries[:6])],
          [{"doc_id": f"d{k}", "source": " ".join(summaries[10 * k:10 * k + 10])} for k in range(3)])
    write("webnlg2020_human", [{"id": f"{s}.{j}", "system": s, "sample_id": j, "hypothesis": hyps[3 * k + j],
                                "references": [refs[j], refs[j + 3]], "human": {"fluency": float(j)}}
                               for k, s in enumerate(["A", "B"]) for j in range(3)])
    return root


@pytest.fixture(autouse=True)
def movers_data(tiny, monkeypatch):
    monkeypatch.setenv("MOVERS_DATA", str(tiny))
    return tiny


# ------------------------------------------------------------------------------------------------- the harness

def test_the_floor_runs_every_token_once_in_windows_side_by_side():
    """The encoder sees each distinct text's content tokens once, cut into windows of 510 (512 positions less
    [CLS] and [SEP]) that do not overlap, each with its two special tokens: counted at the model's input."""
    from movers import load_encoder

    encoder = load_encoder()
    long = " ".join(["The committee approved the new budget after a long debate on Friday."] * 90)
    texts = [long, "A short text.", "A short text.", ""]
    n = [len(ids) for ids in encoder.tokenize([long, "A short text.", ""])]
    assert n[0] > 1020 and n[2] == 0
    windows = [-(-k // 510) or 1 for k in n]  # ceil(k / 510), and one window for the empty text
    seen: list[int] = []
    hook = encoder.backbone.model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(int(kwargs["attention_mask"].sum())), with_kwargs=True)
    try:
        assert harness.floor(texts, encoder) > 0
    finally:
        hook.remove()
    assert seen[0] == len(encoder.tokenize(["A short warm-up text."])[0]) + 2  # the warm-up, before the clock
    assert sum(seen[1:]) == sum(n) + 2 * sum(windows)


def test_fresh_runs_a_function_of_the_package_in_a_process_of_its_own(tmp_path):
    got = harness.fresh(ray.write, n=5, folder=str(tmp_path))
    assert got["pairs"] == 5 and got["peak_rss_mb"] > 20 and len(list(tmp_path.glob("part-*.parquet"))) == 1
    with pytest.raises(RuntimeError, match=r"ray.write\(.*failed in a fresh process"):
        harness.fresh(ray.write, n=5, folder=str(tmp_path / "no" / "such" / "folder"))
    with pytest.raises(ValueError, match="not a function of shared.bench"):
        harness.fresh(json.dumps, obj=1)


# ------------------------------------------------------------------------------------------------ the timings

def test_speed_of_a_metric_without_an_original_times_it_beside_the_floor(tmp_path, capsys):
    """`speed --metric twmd`: no original to compare with, so time and peak memory beside the floor."""
    assert speed.main(["--metric", "twmd", "--pairs", "6", "--repeats", "1", "--json", str(tmp_path / "s.json")],
                      run=inline) == 0
    out = capsys.readouterr()
    assert "no comparison with the original for 'twmd'" in out.err
    assert '| twmd | {"centering": "batch"} | this |' in out.out and "6 WMT15/16 pairs, best of 1" in out.out
    result = json.loads((tmp_path / "s.json").read_text())
    (row,) = result["rows"]
    assert row["x_floor"] == row["seconds"] / result["floor"]["seconds"] and row["peak_rss_mb"] > 100


@pytest.mark.parametrize("metric, options", [
    # imports the original and bert-score, and times both beside movers (most of a minute): a system test
    pytest.param("moverscore", ["--refs", "3", "--systems", "2"], marks=[pytest.mark.slow, pytest.mark.system]),
    ("sms", ["--n", "2", "--long", "4", "--repeat", "1"]),
    ("lazy_emd", ["--pairs", "3", "--repeat", "1", "--no-plain"]),
])
def test_speed_beside_the_original(metric, options, tmp_path, capsys):
    out_folder = [] if metric == "lazy_emd" else ["--out", str(tmp_path)]  # lazy_emd's timing prints, saves nothing
    assert speed.main(["--metric", metric, *options, *out_folder]) == 0
    out = capsys.readouterr().out
    if metric == "moverscore":  # movers agrees with PyPI moverscore 1.0.3 on the timed pairs
        assert "movers throughput / original" in out and "movers / floor time" in out and "bert-score 0.3.13" in out
        assert json.loads((tmp_path / "speed_moverscore.json").read_text())["max_diff"] <= 1e-4
    elif metric == "sms":
        assert "| glove | s+wms |" in out and "| 4 | s+wms |" in out
    else:  # the re-enactment of the original and movers compute the same numbers
        assert "| encoder floor (bare forward, every token of the unique texts) |" in out
        assert float(out.split("max |score difference| = ")[1].split()[0]) < 1e-3


def test_length_benchmark_pairs_and_table(capsys, tmp_path, movers_data):
    preds, refs = lengths.pairs(40, row_words=200)
    words = " ".join(json.loads(line)["source"] for line in
                     (movers_data / "summeval" / "summeval_docs.jsonl").read_text(encoding="utf-8").splitlines()).split()
    assert len(preds) == 5 and all(len(p.split()) == 40 == len(r.split()) for p, r in zip(preds, refs, strict=True))
    assert preds[1] == " ".join(words[80:120]) and refs[1] == " ".join(words[100:140])  # half a passage later
    assert speed.main(["--lengths", "30", "--row-words", "120", "--metric", "moverscore", "--metric", "delta_bleu",
                       "--no-bertscore", "--threads", "1", "--json", str(tmp_path / "l.json")], run=inline) == 0
    out = capsys.readouterr().out
    assert ("| L words (pairs) | floor | encoding (truncated) | encoding (whole text) | moverscore | "
            "moverscore (whole text) | delta_bleu |") in out
    assert "| 30 (4) |" in out and "bert-score truncates" not in out  # the footnote only with its column
    saved = json.loads((tmp_path / "l.json").read_text())
    row = saved["rows"]["30"]
    assert set(row) == {"floor", "encoding:truncate", "encoding:window", "moverscore", "moverscore@whole",
                        "delta_bleu"} and row["delta_bleu"]["transport"] == 0
    assert 0 < row["moverscore"]["transport"] < row["moverscore"]["seconds"]


def test_systems_benchmark_runs_every_scenario(tmp_path, capsys):
    """The several-systems benchmark on 2 systems x 3 inputs: its scores are checked equal to scoring one by one
    (the study raises otherwise), and the texts encoded follow from the data: one by one, each call encodes its
    system's outputs and the references; with a cache, in one run or in the evaluation loop, each text once."""
    names, references = systems.load_systems(2, 3)
    refs = {r for group in references for r in group}
    per_call = [len(set(outputs) | refs) for outputs in names.values()]
    once = len(set().union(*names.values()) | refs)
    assert systems.main(["--systems", "2", "--inputs", "3", "--evaluations", "2", "--json", str(tmp_path / "s.json")],
                        run=inline) == 0
    out = capsys.readouterr().out
    assert "2 systems x 3 inputs" in out and "Scores equal in every scenario to float32 rounding" in out
    saved = json.loads((tmp_path / "s.json").read_text())
    assert out == systems.render(saved)  # the report is its JSON rendered (what the docs include)
    assert systems.main(["--render", str(tmp_path / "s.json")]) == 0 and capsys.readouterr().out == out
    rows = saved["rows"]
    assert rows["one-by-one"]["texts"] == sum(per_call) and saved["floor"]["texts"] == once
    assert rows["one-by-one-cache"]["texts"] == rows["one-run"]["texts"] == rows["evaluations"]["texts"] == once
    assert len(rows["evaluations"]["evaluations"]) == 2


def test_scale_reports_every_size_and_the_throughput(tmp_path, capsys):
    assert scale.main(["--metric", "delta_bleu", "--base", "6", "--sizes", "1,2", "--call-sizes", "1,2",
                       "--block-size", "4", "--processes", "1", "--json", str(tmp_path / "scale.json")],
                      run=inline) == 0
    out = capsys.readouterr().out
    assert "| metric | call 6 | call 12 | stream 6 | stream 12 | max/min | pairs/s 1p |" in out
    assert "bert-score (same MiniLM, last layer) on the 6 base pairs: peak" in out
    (row,) = json.loads((tmp_path / "scale.json").read_text())["rows"]
    assert {"call", "call_2x", "stream_1x", "stream_2x"} <= set(row) and row["pairs_per_s_1p"] > 0


@pytest.mark.system
@pytest.mark.slow
def test_scale_reports_flat_memory_for_a_streamed_metric(tmp_path, monkeypatch):
    """Peak memory is a process's own: each measurement in a fresh process, on the real WMT15/16 pairs (a system
    test; a plain run checks the study's code in this process, above)."""
    monkeypatch.setenv("MOVERS_DATA", str(data_path("wmt15_16_da_seg_toen").parent))
    out = subprocess.run([sys.executable, "-m", "shared.bench", "scale", "--metric", "delta_bleu", "--base", "50",
                          "--sizes", "1,20", "--block-size", "25", "--processes", "", "--no-bertscore",
                          "--json", str(tmp_path / "scale.json")], cwd=REPO, env=dict(os.environ),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| delta_bleu | " in out.stdout and "| max/min |" in out.stdout
    row = json.loads((tmp_path / "scale.json").read_text())["rows"][0]
    assert row["stream_20x"] / row["stream_1x"] <= 1.2  # 1,000 pairs in blocks of 25: memory of one block


@pytest.mark.system
@pytest.mark.slow
def test_ray_against_one_process(tmp_path, capsys):
    """`ray`: the pairs written to Parquet, scored by one process and by a local Ray cluster (in a process of its
    own: the cluster's workers are that process's children)."""
    pytest.importorskip("ray")

    def run(function, /, **kwargs):
        return (harness.fresh if kwargs.get("mode") == "ray" else inline)(function, **kwargs)

    assert ray.main(["--metric", "delta_bleu", "--pairs", "12", "--json", str(tmp_path / "ray.json")], run=run) == 0
    assert "delta_bleu, 12 pairs: 1 process x 2 threads" in capsys.readouterr().out
    result = json.loads((tmp_path / "ray.json").read_text())["throughput"]
    assert result["process"]["pairs"] == result["ray"]["pairs"] == 12 and result["ray"]["workers"] >= 2
