"""The embedding cache: scores with and without it, hits that skip the model, corrupted entries
recomputed, two writers at once, the size bound, the evaluate module's in-memory cache, the command.

Expected values are the same call without any cache (the code path the cache must not change). Under the
reproducibility rule (:data:`movers.core.result.REGROUPING_ATOL`) a run whose vectors all come from the cache
equals the run that stored them bit for bit, and so does a cacheless run of the same call (the same texts in
the same encoder batches); a run that encodes only some texts (the others read from the cache) puts them in
other batches and agrees to float32 rounding (``regrouped``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

import movers
from movers.text.embedding import Encoder, token_batches
from movers.text.embedding_cache import EmbeddingCache, using_cache

from .support.cli_process import run_movers, run_python
from .helpers import REPO, regrouped

PREDS = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog.", "He went to the store."]
REFS = ["A cat was sitting on the mat.", "The fast brown fox leaped over a lazy dog.", "She stayed at home."]
OTHER = ["A cat sat on a mat.", "The brown fox jumps.", "He stayed at the store to read."]


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "v1").rglob("*") if p.is_file() and not p.name.startswith(".tmp-"))


@pytest.mark.invariance
def test_a_text_embeds_to_float32_rounding_in_any_batch():
    """A text's vectors in another batch (alone, with other companions, other padding) move in their last bits
    only; the same call gives the same bits."""
    enc = Encoder()
    texts = PREDS + REFS + OTHER + ["word " * 40, "Hi."]
    together = enc.embed(texts, batch_size=64).vectors
    assert all(torch.equal(a, b) for a, b in zip(enc.embed(texts, batch_size=64).vectors, together, strict=True))
    for k, text in enumerate(texts):
        alone = enc.embed([text], batch_size=1).vectors[0]
        assert alone.shape == together[k].shape and torch.allclose(alone, together[k], rtol=0, atol=1e-5), text
    reverse = enc.embed(texts[::-1], batch_size=3).vectors
    assert all(torch.allclose(a, b, rtol=0, atol=1e-5) for a, b in zip(reverse, together[::-1], strict=True))
    # hand-computed plans: lengths sorted longest first, at most batch_size rows and max_tokens padded tokens
    assert [list(b) for b in token_batches([9, 9, 9, 7, 5, 5], 2, None)] == [[0, 1], [2, 3], [4, 5]]
    assert [list(b) for b in token_batches([300, 300, 300, 10], 64, 1024)] == [[0, 1, 2], [3]]
    assert [list(b) for b in token_batches([600, 10], 64, 1024)] == [[0], [1]]


@pytest.mark.invariance
@pytest.mark.parametrize("slug", ["moverscore", "twmd", "lazy_emd"])
def test_scores_with_and_without_the_cache_are_identical(slug, tmp_path):
    fn = getattr(movers, slug)
    plain_a, plain_b = fn(PREDS, REFS), fn(OTHER, REFS)
    cold = fn(PREDS, REFS, cache=tmp_path)
    new_system = fn(OTHER, REFS, cache=tmp_path)            # references from the cache, predictions new
    warm = fn(PREDS, REFS, cache=str(tmp_path))
    memory = EmbeddingCache()
    in_memory = [fn(PREDS, REFS, cache=memory), fn(OTHER, REFS, cache=memory)]
    # every vector read back as stored, or the same call: bit for bit
    assert cold.scores == warm.scores == plain_a.scores == in_memory[0].scores
    assert new_system.scores == in_memory[1].scores
    # the predictions encoded without their references: other batches
    assert new_system.scores == regrouped(plain_b.scores)
    assert cold.signature == plain_a.signature  # the cache is runtime only
    assert len(_entries(tmp_path)) == 9


@pytest.mark.invariance
def test_a_hit_returns_the_same_vectors_and_loads_no_model(tmp_path):
    """Two processes share a cache folder: the first stores, the second loads no model and reads the same bits;
    a third process with no cache, in the same environment, embeds the same bits (the cache changes nothing).
    This test's own process may run other thread counts (the reproducibility rule: float32 rounding)."""
    texts = PREDS + REFS
    script = f"""
import json, sys, torch, transformers
import movers
from movers.text.embedding import Encoder
from movers.text.embedding_cache import using_cache
loads = []
original = transformers.AutoModel.from_pretrained
transformers.AutoModel.from_pretrained = lambda *a, **k: (loads.append(a), original(*a, **k))[1]
cache = movers.EmbeddingCache({str(tmp_path / 'cache')!r}) if sys.argv[1] != "none" else movers.EmbeddingCache()
with using_cache(cache if sys.argv[1] != "none" else None):
    vectors = Encoder().embed({texts!r}).vectors
    score = movers.moverscore({PREDS!r}, {REFS!r}).score
torch.save(vectors, {str(tmp_path)!r} + f"/{{sys.argv[1]}}.pt")
print(json.dumps({{"loads": len(loads), "score": score, "hits": cache.info().hits}}))
"""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    runs = [run_python(script, [name], env=env, cwd=REPO) for name in ("first", "second", "none")]  # one by one
    assert all(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    first, second, none = (json.loads(r.stdout) for r in runs)
    assert first["loads"] == 1 and first["hits"] == len(texts)  # the metric reads what embed() stored
    assert second["loads"] == 0 and second["hits"] == len(texts) * 2  # embed(), then the metric's own call
    assert none["loads"] == 1 and none["hits"] == 0
    assert second["score"] == first["score"]  # both read the vectors embed() stored: bit for bit
    assert first["score"] == regrouped(none["score"])  # the metric's texts embedded in other batches
    stored, read, plain = (torch.load(tmp_path / f"{name}.pt") for name in ("first", "second", "none"))
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(read, stored, plain, strict=True))
    here = Encoder().embed(texts).vectors
    assert all(torch.allclose(a, b, rtol=0, atol=1e-5) for a, b in zip(read, here, strict=True))
    assert first["score"] == regrouped(movers.moverscore(PREDS, REFS).score)


@pytest.mark.invariance
def test_corrupted_and_truncated_entries_are_recomputed(tmp_path):
    want = movers.moverscore(PREDS, REFS).scores
    movers.moverscore(PREDS, REFS, cache=tmp_path)
    files = _entries(tmp_path)
    flipped, truncated, foreign = files[0], files[1], files[2]
    data = bytearray(flipped.read_bytes())
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    truncated.write_bytes(truncated.read_bytes()[:100])
    foreign.write_bytes(files[3].read_bytes())  # a whole entry of another text under this text's key
    cache = EmbeddingCache(tmp_path)
    repaired = movers.moverscore(PREDS, REFS, cache=cache).scores
    assert repaired == regrouped(want)  # three texts encoded again, in a batch of their own
    assert cache.info().recomputed == 3 and cache.info().hits == 3
    again = EmbeddingCache(tmp_path)
    assert movers.moverscore(PREDS, REFS, cache=again).scores == repaired  # every vector read back: bit for bit
    assert again.info().hits == 6 and again.info().recomputed == 0  # rewritten whole


@pytest.mark.invariance
def test_two_processes_writing_one_cache_at_once(tmp_path):
    script = f"""
import json, movers
print(json.dumps(movers.twmd({(PREDS + OTHER)!r}, {(REFS + REFS)!r}, cache={str(tmp_path)!r}).scores))
"""
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    with ThreadPoolExecutor(2) as pool:  # two processes at once
        procs = list(pool.map(lambda _: run_python(script, env=env, cwd=REPO, timeout=300), range(2)))
    assert all(p.returncode == 0 for p in procs), [p.stderr[-2000:] for p in procs]
    outs = [json.loads(p.stdout) for p in procs]
    want = movers.twmd(PREDS + OTHER, REFS + REFS).scores
    # a process may read some entries the other wrote and encode only the rest: other batches
    assert outs[0] == regrouped(want) and outs[1] == regrouped(want)
    cache = EmbeddingCache(tmp_path)
    assert movers.twmd(PREDS + OTHER, REFS + REFS, cache=cache).scores == regrouped(want)
    assert cache.info().hits == 9 and cache.info().recomputed == 0
    assert not [p for p in (tmp_path / "v1").rglob(".tmp-*")]


def test_the_cache_obeys_its_size_bound(tmp_path):
    enc = Encoder()
    one = EmbeddingCache(tmp_path)
    with using_cache(one):
        enc.embed(PREDS[:1])
    entry = _entries(tmp_path)[0].stat().st_size
    one.clear()
    bounded = EmbeddingCache(tmp_path, max_bytes=int(entry * 4.5))
    texts = [f"Sentence number {k} is here." for k in range(12)]
    for text in texts:
        with using_cache(bounded):
            enc.embed([text])
    info = bounded.info()
    assert info.bytes <= bounded.max_bytes and 3 <= info.entries < len(texts)
    with using_cache(bounded):
        enc.embed(texts[-1:])
    assert bounded.info().hits == 1  # the most recent entries stay
    memory = EmbeddingCache(max_bytes=3 * 384 * 4 * 10)
    with using_cache(memory):
        enc.embed(texts)
    assert memory.info().bytes <= memory.max_bytes and 0 < memory.info().entries < len(texts)


@pytest.mark.invariance
def test_an_evaluate_module_embeds_repeated_references_once(embedded):
    module = movers.load("moverscore")
    first = module.compute(predictions=PREDS, references=REFS)
    n_first = len(embedded)
    second = module.compute(predictions=OTHER, references=REFS)
    assert n_first == 6 and len(embedded) - n_first == 3  # only the new predictions
    assert first["scores"] == movers.moverscore(PREDS, REFS).scores  # the same call: bit for bit
    assert second["scores"] == regrouped(movers.moverscore(OTHER, REFS).scores)  # the new predictions alone
    before = len(embedded)
    module.compute(predictions=PREDS, references=REFS, cache=False)
    assert len(embedded) - before == 6  # off when asked


@pytest.mark.invariance
@pytest.mark.parametrize("surface", ["torchmetrics", "reward"])
def test_torchmetrics_and_reward_objects_embed_repeated_references_once(surface, embedded):
    """A Lightning metric's epochs and a TRL reward's steps meet the same references again: like an evaluate
    module, each object keeps an in-memory cache (reset() keeps it; not pickled), and its scores are those of
    one fresh call."""
    import copy
    import pickle

    if surface == "torchmetrics":
        pytest.importorskip("torchmetrics", reason="the lightning extra (in the test extra) is not installed")
        from movers.torchmetrics import MoverScore

        def make(**options):
            return MoverScore(**options)

        def score(obj, preds):
            obj.reset()
            obj.update(preds, REFS)
            obj.compute()
            return obj.result.scores
    else:
        def make(**options):
            return movers.reward("moverscore", **options)

        def score(obj, preds):
            return obj(preds, reference=REFS)

    obj = make()
    first = score(obj, PREDS)
    n_first = len(embedded)
    second = score(obj, OTHER)
    assert n_first == 6 and len(embedded) - n_first == 3  # only the new predictions
    fresh = movers.moverscore(PREDS, REFS, cache=False).scores, movers.moverscore(OTHER, REFS, cache=False).scores
    assert list(first) == list(fresh[0])  # the same call: bit for bit
    assert list(second) == regrouped(list(fresh[1]))  # the new predictions encoded alone: other batches
    assert copy.deepcopy(obj)._movers_cache is None and pickle.loads(pickle.dumps(obj))._movers_cache is None
    off = make(cache=False)
    before = len(embedded)
    score(off, PREDS)
    score(off, PREDS)
    assert len(embedded) - before == 12 and off._movers_cache is None  # off when asked


def test_an_unwritable_folder_is_read_only_with_one_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        EmbeddingCache(blocker)
    with pytest.raises(TypeError, match="`cache` must be None"):
        movers.moverscore(PREDS, REFS, cache=3)
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "v1").write_text("a file where the cache's folder of entries goes")  # unwritable, even for root
    with pytest.warns(RuntimeWarning, match="cannot be written"):
        got = movers.moverscore(PREDS, REFS, cache=EmbeddingCache(folder)).scores
    assert got == movers.moverscore(PREDS, REFS).scores


def test_cache_command_info_and_clear(tmp_path):
    movers.moverscore(PREDS, REFS, cache=tmp_path)
    exe = str(Path(sys.executable).parent / "movers")
    info = subprocess.run([exe, "cache", "info", "--cache", str(tmp_path)], capture_output=True, text=True)
    assert info.returncode == 0 and f"{tmp_path}: 6 entries" in info.stdout
    env = dict(os.environ, MOVERS_CACHE=str(tmp_path))
    clear = run_movers(["cache", "clear"], env=env)  # forked from the tests' fork server (tests/support/cli_process.py)
    assert clear.returncode == 0 and clear.stdout.strip() == f"removed 6 entries from {tmp_path}"
    assert not _entries(tmp_path)
    missing = run_movers(["cache", "info"], env={k: v for k, v in os.environ.items() if k != "MOVERS_CACHE"})
    assert missing.returncode == 2 and missing.stderr.startswith("movers cache: error: no cache folder")


@pytest.mark.invariance
def test_score_command_with_a_cache_folder(tmp_path):
    for name, lines in (("refs", REFS), ("a", PREDS), ("b", OTHER)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    folder = tmp_path / "cache"

    def score(*args: str) -> str:  # each a process of its own, forked from the tests' fork server
        proc = run_movers(["score", "-m", "moverscore", "-m", "twmd", "-r", "refs.txt", *args, "-f", "json",
                           "--per-segment"], env=dict(os.environ), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    plain = json.loads(score("-c", "b.txt"))
    score("-c", "a.txt", "--cache", str(folder))
    assert len(_entries(folder)) == 6
    cached = json.loads(score("-c", "b.txt", "--cache", str(folder)))  # the references read from the cache
    assert len(_entries(folder)) == 9
    for slug in ("moverscore", "twmd"):
        assert cached[slug]["signature"] == plain[slug]["signature"]
        assert cached[slug]["scores"] == regrouped(plain[slug]["scores"])  # b.txt encoded without the references
    two = json.loads(score("-c", "a.txt", "b.txt", "--cache", str(folder)))
    assert two["twmd"]["b.txt"]["scores"] == cached["twmd"]["scores"]  # every vector read back: bit for bit
    bad = run_movers(["score", "-m", "moverscore", "-r", "refs.txt", "-c", "a.txt", "--cache", "refs.txt"],
                     env=dict(os.environ), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.startswith("movers score: error: --cache: EmbeddingCache: `folder`")
