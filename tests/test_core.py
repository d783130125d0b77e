"""The shared core: exact EMD, encoder batching/order/windows on any local model, validation, signatures."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

import movers
from movers.core import validation as v
from movers.text.embedding import Encoder, resolve_device
from movers.core.signature import format_signature
from movers.core.transport import emd

from .helpers import ATOL_EMD


# ----------------------------------------------------------------------------- exact EMD

def _lp_emd(a, b, cost):
    """The transport LP solved independently by scipy (HiGHS)."""
    n, m = cost.shape
    a_eq = np.zeros((n + m, n * m))
    for i in range(n):
        a_eq[i, i * m:(i + 1) * m] = 1
    for j in range(m):
        a_eq[n + j, j::m] = 1
    res = linprog(cost.ravel(), A_eq=a_eq, b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs")
    return res.fun


@pytest.mark.parametrize("n,m,seed", [(1, 1, 0), (3, 5, 1), (7, 4, 2), (12, 12, 3)])
def test_emd_matches_an_independent_lp_and_keeps_marginals(n, m, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random(n), rng.random(m)
    a, b = a / a.sum(), b / b.sum()
    cost = rng.random((n, m)) * 3
    got = emd(a, b, cost)
    assert got.cost == pytest.approx(_lp_emd(a, b, cost), abs=ATOL_EMD)
    np.testing.assert_allclose(got.plan.sum(1), a, atol=1e-9, rtol=0)
    np.testing.assert_allclose(got.plan.sum(0), b, atol=1e-9, rtol=0)
    assert (got.plan >= 0).all()


def test_emd_identity_symmetry_and_empty_side():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 3))
    d = np.linalg.norm(x[:, None] - x[None], axis=-1)
    w = np.full(5, 0.2)
    assert emd(w, w, d).cost == 0.0
    y = rng.normal(size=(4, 3))
    dxy = np.linalg.norm(x[:, None] - y[None], axis=-1)
    assert emd(w, np.full(4, 0.25), dxy).cost == pytest.approx(emd(np.full(4, 0.25), w, dxy.T).cost, abs=1e-12)


def test_emd_takes_numpy_or_torch_and_returns_the_same_type():
    """POT's backend convention: torch in -> torch out (float64, same device), same numbers as numpy."""
    rng = np.random.default_rng(6)
    a, b, cost = rng.random(4), rng.random(6), rng.random((4, 6))
    a, b = a / a.sum(), b / b.sum()
    np_out = emd(a, b, cost)
    t_out = emd(*(torch.from_numpy(x) for x in (a, b, cost)))
    assert isinstance(np_out.plan, np.ndarray) and isinstance(t_out.plan, torch.Tensor)
    assert isinstance(t_out.cost, torch.Tensor) and t_out.plan.dtype == torch.float64
    np.testing.assert_allclose(t_out.plan.numpy(), np_out.plan, atol=1e-15, rtol=0)
    assert float(t_out.cost) == float(np_out.cost)
    assert np_out.converged and np_out.iterations == 0
    assert emd(a, b, cost, return_plan=False).plan is None


def test_emd_leaves_metric_rules_to_the_metrics():
    """No renormalisation and no empty-side rule inside the solver: unequal or zero totals are errors."""
    w = np.full(5, 0.2)
    with pytest.raises(ValueError, match="same positive total"):
        emd(np.zeros(5), w, np.ones((5, 5)))
    with pytest.raises(ValueError, match="same positive total"):
        emd(2 * w, w, np.ones((5, 5)))


def test_emd_rejects_bad_input():
    with pytest.raises(ValueError, match="shapes"):
        emd(np.ones(2), np.ones(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="non-negative"):
        emd(np.array([1.0, -0.5]), np.ones(2), np.ones((2, 2)))
    with pytest.raises(ValueError, match="finite"):
        emd(np.ones(2), np.ones(2), np.array([[0, np.nan], [1, 0]]))


# ----------------------------------------------------------------------------- encoder

TEXTS = ["The cat sat on the mat.", "A dog.", "The cat sat on the mat.", "Über café 東京 🚀", "A dog."]


def test_embed_dedupes_and_restores_input_order():
    enc = Encoder()
    out = enc.embed(TEXTS, batch_size=2)
    assert len(out.vectors) == len(TEXTS)
    assert out.tokens[0] == out.tokens[2] and out.tokens[1][0] == "[CLS]" and out.tokens[1][-1] == "[SEP]"
    assert out.tokens[1][1:-1] == ["a", "dog", "."] and out.special[1] == [True, False, False, False, True]
    torch.testing.assert_close(out.vectors[0], out.vectors[2], rtol=0, atol=0)
    assert list(enc.iter_token_ids(TEXTS, chunk=2)) == enc.token_ids(TEXTS) == [list(x) for x in out.ids]
    single = [enc.embed([t], batch_size=1).vectors[0] for t in TEXTS]
    for got, want in zip(out.vectors, single):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


def test_cpu_batches_are_bounded_in_rows_and_padded_tokens(monkeypatch):
    # Hand-computed: lengths sorted longest first; a batch takes min(batch_size, budget // first length) rows.
    from movers.text.embedding import token_batches

    lengths = [600, 300, 120, 100, 40, 40, 40, 10, 10]
    assert [list(b) for b in token_batches(lengths, 64, 1024)] == [[0], [1, 2, 3], [4, 5, 6, 7, 8]]
    assert [list(b) for b in token_batches(lengths, 2, 1024)] == [[0], [1, 2], [3, 4], [5, 6], [7, 8]]
    assert [list(b) for b in token_batches(lengths, 4, None)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert token_batches([], 64, 1024) == []
    # The budget changes the batches, never the vectors (padding is masked).
    texts = ["word " * 300, "A dog.", "The cat sat on the mat.", "word " * 90]
    got = Encoder().embed(texts, batch_size=64).vectors
    monkeypatch.setattr("movers.text.embedding.CPU_BATCH_TOKENS", 10**9)
    want = Encoder().embed(texts, batch_size=64).vectors
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=0)


def test_layers_index_hidden_states():
    enc = Encoder(layer=0)
    assert enc.layers == (0,) and Encoder(layer=-1).layers == (6,) and Encoder(layer=-7).layers == (0,)
    emb0 = enc.embed(["a dog"]).vectors[0]
    last = Encoder(layer=6).embed(["a dog"]).vectors[0]
    assert not torch.allclose(emb0, last)
    with pytest.raises(TypeError, match="`layer` must be an int"):
        _ = Encoder(layer="last").layers
    with pytest.raises(TypeError, match=r"`layer` must be an int or a list of ints, got 2.5"):
        movers.moverscore(["a dog"], ["a cat"], layer=2.5)  # not "'float' object is not iterable"
    with pytest.raises(ValueError, match="non-empty list"):
        _ = Encoder(layer=[]).layers


def test_device_resolution():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture(scope="module")
def tiny_local_model(tmp_path_factory):
    """A randomly initialised 2-layer BERT with a 32-position window, saved as a local folder."""
    import transformers

    from movers.text.models import resolve_model

    folder = tmp_path_factory.mktemp("tiny-bert")
    minilm, _ = resolve_model(None)
    tok = transformers.AutoTokenizer.from_pretrained(minilm, model_max_length=32)
    tok.save_pretrained(folder)
    config = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return str(folder)


def test_any_local_folder_works_and_long_texts_are_windowed(tiny_local_model):
    text = " ".join(["river"] * 50 + ["mountain"] * 20)  # 70 content tokens > 30
    enc = Encoder(tiny_local_model, long_texts="window")
    assert enc.name.endswith("@local") and enc.backbone.window == 32 and enc.backbone.num_layers == 2
    out = enc.embed([text, "short text"])
    assert len(out.tokens[0]) == 72 and out.vectors[0].shape == (72, 16)
    truncated = Encoder(tiny_local_model, long_texts="truncate").embed([text])
    assert len(truncated.tokens[0]) == 32
    got = movers.moverscore([text, "short text"], [text, "a short text"], model=tiny_local_model)
    assert got.scores[0] == 1.0 and "model:" + enc.name in got.signature


# ----------------------------------------------------------------------------- validation and signatures

def test_validation_messages_name_the_argument():
    with pytest.raises(ValueError, match=r"m: `k` must be one of \['a', 'b'\], got 'c'"):
        v.check_choice("m", "k", "c", ["a", "b"])
    with pytest.raises(ValueError, match="must be finite"):
        v.check_number("m", "k", float("nan"))
    with pytest.raises(TypeError, match="must be a number"):
        v.check_number("m", "k", True)
    preds, refs = v.check_pairs("m", ("a", "b"), ["x", ["y", "z"]])
    assert preds == ["a", "b"] and refs == [["x"], ["y", "z"]]


def test_signature_format():
    assert format_signature("X", [("a", 1), ("b", False), ("c", 1e-09), ("d", "e")]) == "X|a:1|b:no|c:1e-09|d:e"
    with pytest.raises(ValueError, match="`a` is None"):
        format_signature("X", [("a", None)])
    with pytest.raises(ValueError, match="must not contain"):
        format_signature("X", [("a", "p|q")])


def test_a_signature_names_only_the_declared_libraries():
    """The tail's keys are LIBRARIES', the one declaration the docs' tests also read."""
    from movers.core.signature import LIBRARIES, library_versions

    assert [key for key, _ in library_versions(*LIBRARIES)] == ["v", *LIBRARIES.values()]
    with pytest.raises(ValueError, match="library 'numpy' has no key; name one of"):
        library_versions("numpy")


def test_import_is_light_and_registry_lists_modules():
    import subprocess
    import sys

    code = "import sys, movers; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"MOVERS_NO_AUTOREGISTER": "1", "PATH": ""})
    assert out.stdout.split() == ["False", "False"]
    # POT's package import pulls scikit-learn (~160 MB): only the metrics that solve with POT load its solver, and
    # they load it without POT's package import (movers.core.transport.pot)
    solver = "movers.core.transport.pot._ot.lp.emd_wrap"
    show = f"print({solver!r} in sys.modules, 'ot' in sys.modules, 'sklearn' in sys.modules)"
    code = (f"import sys, movers; movers.twmd(['a cat'], [['a dog']]); {show}; "
            f"movers.moverscore(['a cat'], [['a dog']]); {show}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, MOVERS_NO_AUTOREGISTER="1"))
    assert out.stdout.split() == ["False", "False", "False", "True", "False", "False"]
    with pytest.raises(ValueError, match="unknown module 'bleu'"):
        movers.module_dir("bleu")
