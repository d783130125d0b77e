"""Several systems in one run and sacreBLEU's paired tests, checked against sacreBLEU itself.

Three DailyDialog responders from the committed dialogue fixture (tests/reference/dbleu_dailydialog_segments:
8 contexts, 4 references each): hredf (the baseline, BLEU 2.9), CVAEf (4.4: no significant difference) and
dualencoder_train (1.6: significantly worse). sacreBLEU's own ``PairedTest`` and its command line give the expected
p-values and intervals. p-values must be equal; intervals agree to 1e-5 BLEU points (sacreBLEU sums bootstrap
statistics in float32, movers in float64).
"""
from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sacrebleu import significance as sacre_significance
from sacrebleu.metrics.bleu import BLEU

import movers
from movers.core import significance as sig

from .helpers import dialogue_systems, regrouped
from .test_cli import one_line_error, run

SYSTEMS = ("hredf", "CVAEf", "dualencoder_train")
ATOL_INTERVAL = 1e-5  # BLEU points; sacreBLEU's float32 bootstrap sums


@pytest.fixture(scope="module")
def dialogue(tmp_path_factory):
    """{system: hypotheses}, four reference streams, and the same written to files (system names as files)."""
    every, streams = dialogue_systems()
    systems = {name: every[name] for name in SYSTEMS}
    folder = tmp_path_factory.mktemp("dialogue")
    for name, lines in [*systems.items(), *((f"ref{k + 1}", stream) for k, stream in enumerate(streams))]:
        (folder / f"{name}.txt").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    return systems, streams, folder


def _sacrebleu(systems: dict, streams: list, test: str, n: int, confidence: int = -1) -> list:
    """sacreBLEU's PairedTest on BLEU (its seed from $SACREBLEU_SEED, set by the caller)."""
    _, results = sacre_significance.PairedTest(list(systems.items()), {"BLEU": BLEU(references=streams)},
                                               references=None, test_type=test, n_samples=n,
                                               n_ar_confidence=confidence)()
    return results["BLEU"]


def _assert_same(ours: list, theirs: list) -> None:
    for mine, expected in zip(ours, theirs, strict=True):
        assert mine.score == pytest.approx(expected.score, abs=1e-9)
        assert mine.p_value == expected.p_value  # counts of resamples: exactly equal
        if expected.mean is None:
            assert mine.interval is None
        else:
            assert mine.interval.mean == pytest.approx(expected.mean, abs=ATOL_INTERVAL)
            assert mine.interval.half_width == pytest.approx(expected.ci, abs=ATOL_INTERVAL)


@pytest.mark.parametrize("test, n, confidence", [("bs", 1000, -1), ("ar", 10_000, -1), ("ar", 2000, 500)])
def test_paired_tests_on_bleu_statistics_equal_sacrebleu(dialogue, monkeypatch, test, n, confidence):
    """movers.core.significance on sacreBLEU's own BLEU sufficient statistics and score function."""
    systems, streams, _ = dialogue
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    expected = _sacrebleu(systems, streams, test, n, confidence)
    bleu = BLEU()
    stats = [bleu._extract_corpus_statistics(h, streams) for h in systems.values()]
    scores = [bleu._aggregate_and_compute(s).score for s in stats]

    def corpus(sums):
        return np.array([bleu._compute_score_from_stats(list(row)).score for row in sums])

    if test == "bs":
        ours = sig.paired_bootstrap(stats, scores, corpus, samples=n, seed=12345)
    else:
        ours = sig.paired_randomization(stats, scores, corpus, trials=n, seed=12345, confidence=max(confidence, 0))
    _assert_same(ours, expected)
    # the data exercise both sides of 0.05: CVAEf vs hredf is not significant, dualencoder_train is
    assert ours[1].p_value > 0.05 and ours[2].p_value < 0.05


@pytest.mark.parametrize("test, n", [("bs", 1000), ("ar", 10_000)])
def test_delta_bleu_with_weights_one_gives_sacrebleus_p_values(dialogue, monkeypatch, test, n):
    """movers.compare with ΔBLEU (every reference weight 1) = sacreBLEU's paired test on BLEU."""
    systems, streams, _ = dialogue
    monkeypatch.setenv("SACREBLEU_SEED", "12345")
    expected = _sacrebleu(systems, streams, test, n)
    references = [list(group) for group in zip(*streams)]
    ones = [[1.0] * len(group) for group in references]
    got = movers.compare("delta_bleu", systems, references, paired_bs=test == "bs", paired_ar=test == "ar",
                         reference_weights=ones)
    ours = [got["delta_bleu"][name] for name in SYSTEMS]
    _assert_same(ours, expected)
    assert got.seed == 12345 and got.samples == n and got.test == test
    assert all(r.signature == f"{r.result.signature}|{test}:{n}|seed:12345" and "|w:rated|" in r.signature
               for r in ours)


def test_command_line_paired_bs_equals_the_sacrebleu_command(dialogue):
    """`movers score -m delta_bleu ... --paired-bs` against `sacrebleu ... --paired-bs`, both as commands."""
    _, streams, folder = dialogue
    files = [str(folder / f"{s}.txt") for s in SYSTEMS]
    refs = [str(folder / f"ref{k + 1}.txt") for k in range(len(streams))]
    env = {"SACREBLEU_SEED": "12345"}
    sacre = subprocess.run([sys.executable, "-m", "sacrebleu", *refs, "-i", *files, "-m", "bleu", "--paired-bs",
                            "-f", "json", "-q"], capture_output=True, text=True, timeout=300,
                           env={**os.environ, **env})
    assert sacre.returncode == 0, sacre.stderr
    expected = {row["system"].removeprefix("Baseline: "): row["BLEU"] for row in json.loads(sacre.stdout)}
    proc = run("score", "-m", "delta_bleu", *(a for r in refs for a in ("-r", r)), "-c", *files, "--paired-bs", "-f", "json",
               env=env)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["delta_bleu"]
    assert list(got) == files
    for name in files:
        assert got[name]["score"] == pytest.approx(expected[name]["score"], abs=1e-9)
        assert got[name].get("p_value") == expected[name]["p_value"]
        assert got[name]["confidence"]["mean"] == pytest.approx(expected[name]["mean"], abs=ATOL_INTERVAL)
        assert got[name]["confidence"]["half_width"] == pytest.approx(expected[name]["ci"], abs=ATOL_INTERVAL)
        assert got[name]["signature"].endswith("|bs:1000|seed:12345")


def test_seed_follows_sacrebleus_rule(monkeypatch):
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    assert sig.resolve_seed(None) == 12345 and sig.resolve_seed(7) == 7 and sig.resolve_seed("None") is None
    monkeypatch.setenv("SACREBLEU_SEED", "42")
    assert sig.resolve_seed(None) == 42 and sig.resolve_seed(3) == 3
    monkeypatch.setenv("SACREBLEU_SEED", "none")
    assert sig.resolve_seed(None) is None
    with pytest.raises(ValueError, match="expected an integer or 'none'"):
        sig.resolve_seed("twelve")


def test_identical_systems_get_the_smallest_p_value_as_in_sacrebleu():
    """sacreBLEU counts resampled differences strictly above the observed one ("the != is important", after
    multeval): for a system identical to the baseline no difference exceeds 0, so p = 1 / (n + 1)."""
    scores = np.random.default_rng(0).random(30)
    stats, corpus = sig.mean_statistics(scores)
    ar = sig.paired_randomization([stats, stats], [scores.mean()] * 2, corpus, trials=200)
    assert ar[1].p_value == 1 / 201 == sacre_significance._compute_p_value(np.zeros(200), 0.0)
    bs = sig.paired_bootstrap([stats, stats], [scores.mean()] * 2, corpus, samples=200)
    assert bs[1].p_value == 1 / 201 and bs[0].interval == bs[1].interval


# ------------------------------------------------------------------- several systems = separate runs

SHORT = {
    "base": ["The cat sat on the mat.", "A dog barked.", "It rains today.", "He went home.", "We ate fish."],
    "para": ["A cat sat on the mat.", "The dog barked loudly.", "It is raining.", "He walked home.", "We had fish."],
    "off": ["The mat is red.", "Birds sing.", "Tomorrow is sunny.", "She left work.", "They cooked rice."],
}
SHORT_REFS = ["A cat was sitting on the mat.", "The dog barked.", "It is raining today.", "He walked home.",
              "They ate fish."]


@pytest.mark.invariance
@pytest.mark.slow
def test_each_system_equals_a_separate_run_and_references_are_encoded_once(monkeypatch):
    from transformers.models.bert import modeling_bert

    rows = [0]
    forward = modeling_bert.BertModel.forward

    def counted(self, *args, **kwargs):
        rows[0] += len({tuple(row.tolist()) for row in kwargs["input_ids"]})
        return forward(self, *args, **kwargs)

    separate = {slug: {name: getattr(movers, slug)(hyps, SHORT_REFS) for name, hyps in SHORT.items()}
                for slug in ("moverscore", "twmd")}
    monkeypatch.setattr(modeling_bert.BertModel, "forward", counted)
    got = movers.compare(["moverscore", "twmd"], SHORT, SHORT_REFS, paired_bs=True, paired_bs_n=200)
    # one encoder pass over the unique texts of all systems and the references, for both metrics
    assert rows[0] == len(set(SHORT_REFS).union(*SHORT.values()))
    for slug, by_system in separate.items():
        for name, alone in by_system.items():
            mine = got[slug][name]
            assert mine.result.signature == alone.signature
            assert mine.signature == f"{alone.signature}|bs:200|seed:12345"
            # other encoder batches than the run alone: equal to float32 rounding (the reproducibility rule)
            assert mine.score == regrouped(alone.score) and mine.result.scores == regrouped(alone.scores)
        assert got[slug]["base"].p_value is None and got[slug]["base"].interval is not None
        assert all(0 < got[slug][name].p_value <= 1 for name in ("para", "off"))


@pytest.mark.invariance
@pytest.mark.slow
def test_command_line_several_systems_equal_separate_runs(tmp_path):
    for name, lines in [*SHORT.items(), ("refs", SHORT_REFS)]:
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run("score", "-m", "moverscore", "-r", "refs.txt", "-c", "base.txt", "para.txt", "off.txt", "-f", "json",
               "--per-segment", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["moverscore"]
    assert list(out) == ["base.txt", "para.txt", "off.txt"]
    for name, hyps in SHORT.items():
        alone = movers.moverscore(hyps, SHORT_REFS)
        entry = out[f"{name}.txt"]
        assert set(entry) == {"score", "signature", "scores"} and entry["signature"] == alone.signature
        assert entry["score"] == regrouped(alone.score) and entry["scores"] == regrouped(alone.scores)


# ---------------------------------------------------------------------------------- output formats

@pytest.fixture()
def three(tmp_path):
    for name, lines in [*SHORT.items(), ("refs", SHORT_REFS), ("short", SHORT["base"][:4])]:
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def _main(cwd: Path, *args: str, capsys, monkeypatch) -> subprocess.CompletedProcess:
    """In process: the same main() as the console script."""
    from movers.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.delenv("SACREBLEU_SEED", raising=False)
    status = main(["score", "-m", "delta_bleu", "-r", "refs.txt", "-c", "base.txt", "para.txt", "off.txt", *args])
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess([], status, out, err)


def test_text_table_marks_significant_systems(three, capsys, monkeypatch):
    proc = _main(three, "--paired-ar", "--paired-ar-n", "500", capsys=capsys, monkeypatch=monkeypatch)
    assert proc.returncode == 0, proc.stderr
    got = movers.compare("delta_bleu", {f"{k}.txt": v for k, v in SHORT.items()}, SHORT_REFS, paired_ar=True,
                         paired_ar_n=500)["delta_bleu"]
    lines = proc.stdout.splitlines()
    assert lines[0] == got["base.txt"].signature and lines[0].endswith("|ar:500|seed:12345")
    assert lines[1].split() == ["System", "Score", "p-value"]
    assert lines[2].split() == ["Baseline:", "base.txt", f"{got['base.txt'].score:.4f}"]
    for line, name in zip(lines[3:5], ("para.txt", "off.txt")):
        r = got[name]
        assert line.split() == [name, f"{r.score:.4f}", f"{r.p_value:.4f}" + ("*" if r.p_value < 0.05 else "")]
    ends = {line.index(score) + len(score) for line, score in zip(lines[1:5], ["Score", *(
        f"{got[n].score:.4f}" for n in ("base.txt", "para.txt", "off.txt"))])}
    assert len(ends) == 1  # the score column is right-aligned
    assert lines[-1].startswith("Paired approximate randomization test (500 trials, seed 12345)")


def test_json_tsv_and_latex_shapes(three, capsys, monkeypatch):
    as_json = json.loads(_main(three, "--paired-bs", "--paired-bs-n", "100", "-f", "json", capsys=capsys,
                               monkeypatch=monkeypatch).stdout)
    entries = as_json["delta_bleu"]
    assert list(entries) == ["base.txt", "para.txt", "off.txt"]
    assert set(entries["base.txt"]) == {"score", "signature", "confidence"}
    assert set(entries["off.txt"]) == {"score", "signature", "confidence", "p_value"}
    assert entries["off.txt"]["confidence"]["samples"] == 100 and entries["off.txt"]["confidence"]["seed"] == 12345

    tsv = _main(three, "--paired-bs", "--paired-bs-n", "100", "-f", "tsv", capsys=capsys, monkeypatch=monkeypatch)
    rows = list(csv.reader(io.StringIO(tsv.stdout), delimiter="\t"))
    assert rows[0] == ["metric", "system", "score", "mean", "half_width", "low", "high", "p_value", "signature"]
    assert [r[1] for r in rows[1:]] == ["base.txt", "para.txt", "off.txt"] and rows[1][7] == ""
    assert float(rows[3][7]) == entries["off.txt"]["p_value"]
    assert float(rows[2][3]) == pytest.approx(entries["para.txt"]["confidence"]["mean"], abs=1e-12)

    per_segment = _main(three, "-f", "csv", "--per-segment", capsys=capsys, monkeypatch=monkeypatch)
    rows = list(csv.reader(io.StringIO(per_segment.stdout)))
    assert rows[0] == ["metric", "system", "segment", "score"] and len(rows) == 1 + 3 * 5

    latex = _main(three, "--paired-bs", "--paired-bs-n", "100", "-f", "latex", capsys=capsys,
                  monkeypatch=monkeypatch).stdout.splitlines()
    body = latex[latex.index(r"\begin{tabular}{lr}"):]
    assert latex[0] == "% " + entries["base.txt"]["signature"]
    assert body[1:4] == [r"\toprule", r"System & DeltaBLEU \\", r"\midrule"] and body[-2:] == [r"\bottomrule",
                                                                                              r"\end{tabular}"]
    assert body[4].startswith(r"Baseline: base.txt & ") and r"$\mu = " in body[4] and r"\pm" in body[4]
    assert body[6].startswith(r"off.txt & ") and body[6].endswith(r"\\")
    assert ("$^*$" in body[6]) == (entries["off.txt"]["p_value"] < 0.05)


def test_latex_escapes_system_names(three, capsys, monkeypatch):
    (three / "my_sys&1.txt").write_text((three / "para.txt").read_text(encoding="utf-8"), encoding="utf-8")
    from movers.cli import main

    monkeypatch.chdir(three)
    assert main(["score", "-m", "delta_bleu", "-r", "refs.txt", "-c", "base.txt", "my_sys&1.txt", "-f",
                 "latex"]) == 0
    assert r"my\_sys\&1.txt & " in capsys.readouterr().out


def test_one_system_output_is_unchanged(three, capsys, monkeypatch):
    from movers.cli import main

    monkeypatch.chdir(three)
    assert main(["score", "-m", "delta_bleu", "-r", "refs.txt", "-c", "base.txt"]) == 0
    api = movers.delta_bleu(SHORT["base"], SHORT_REFS)
    assert capsys.readouterr().out == f"{api.signature} = {api.score:.4f}\n"


@pytest.mark.parametrize("args, message", [
    (["-c", "base.txt", "short.txt"], "files must have the same number of lines, got base.txt: 5, short.txt: 4, "
                                      "refs.txt: 5."),
    (["-c", "base.txt", "--paired-bs"], "--paired-bs compares systems with the first"),
    (["-c", "base.txt", "para.txt", "--confidence"], "--confidence takes one system"),
    (["-c", "base.txt", "para.txt", "--per-segment"], "--per-segment with several systems needs --format"),
    (["-c", "base.txt", "para.txt", "--paired-ar", "--seed", "x"], "--seed: expected an integer or 'none', got 'x'."),
    (["-c", "base.txt", "base.txt"], "hypothesis file 'base.txt' is given twice"),
    (["-c", "base.txt", "para.txt", "--paired-bs", "--paired-bs-n", "0"], "--paired-bs-n must be >= 1, got 0."),
])
def test_several_systems_errors_are_one_line(three, args, message, capsys, monkeypatch):
    from movers.cli import main

    monkeypatch.chdir(three)
    status = main(["score", "-m", "delta_bleu", "-r", "refs.txt", *args])
    out, err = capsys.readouterr()
    line = one_line_error(subprocess.CompletedProcess([], status, out, err))
    assert message in line


@pytest.mark.slow
def test_a_metric_error_names_the_system_file_and_line(three, capsys, monkeypatch):
    (three / "blank.txt").write_text("A cat.\n \nIt rains.\nHome.\nFish.\n", encoding="utf-8")
    from movers.cli import main

    monkeypatch.chdir(three)
    status = main(["score", "-m", "moverscore", "-r", "refs.txt", "-c", "base.txt", "blank.txt", "--opt",
                   "empty_predictions=error"])
    out, err = capsys.readouterr()
    assert "(line 2 of blank.txt)" in one_line_error(subprocess.CompletedProcess([], status, out, err))


def test_the_real_command_errors_on_unequal_systems(three):
    line = one_line_error(run("score", "-m", "delta_bleu", "-r", "refs.txt", "-c", "base.txt", "short.txt",
                              "--paired-bs", cwd=three))
    assert "short.txt: 4" in line


def test_compare_errors():
    with pytest.raises(ValueError, match="system 'b' has 2 predictions, the references 3 segments"):
        movers.compare("delta_bleu", {"a": ["x", "y", "z"], "b": ["x", "y"]}, ["x", "y", "z"])
    with pytest.raises(ValueError, match="choose one of `paired_bs` and `paired_ar`"):
        movers.compare("delta_bleu", [["x"], ["y"]], ["x"], paired_bs=True, paired_ar=True)
    with pytest.raises(ValueError, match="a paired test needs a baseline and at least one system"):
        movers.compare("delta_bleu", [["x"]], ["x"], paired_ar=True)
    with pytest.raises(TypeError, match="an option no metric accepts: 'colour'"):
        movers.compare(["delta_bleu", "twmd"], [["x"]], ["x"], colour="red")
    got = movers.compare("delta_bleu", [["a cat"], ["a dog"]], ["a cat"])
    assert got.systems == ("system 1", "system 2") and got.test is None and got["delta_bleu"]["system 2"].p_value is None
