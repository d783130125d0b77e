"""Lazy-EMD as a Hugging Face `evaluate` module: declaration and plumbing only.

The formula lives in the `movers` package (`movers/metrics/lazy_emd.py`); this file describes the
inputs and forwards every option unchanged.
"""
import evaluate
import movers  # From: movers

_CITATION = """\
@inproceedings{chen-etal-2020-lazy-emd,
    title = "Evaluating Natural Language Generation via Unbalanced Optimal Transport",
    author = "Chen, Yimeng and Lan, Yanyan and Xiong, Ruibin and Pang, Liang and Ma, Zhiming and Cheng, Xueqi",
    booktitle = "Proceedings of the Twenty-Ninth International Joint Conference on Artificial Intelligence (IJCAI-20)",
    year = "2020",
    pages = "3730--3736",
    doi = "10.24963/ijcai.2020/516",
    url = "https://doi.org/10.24963/ijcai.2020/516",
}
"""

_DESCRIPTION = """\
Lazy-EMD matches the contextual token vectors of a prediction and a reference by entropic unbalanced
optimal transport, min_P <C, P> + eps * H(P) + reg_candidate * KL(P1 | mu) + reg_reference * KL(P^T1 | nu),
with cost 1 - cos and uniform masses on the real tokens, and reports the transport cost <C, P*>: a
distance, lower is better. `similarities` = 1 - distance is the higher-is-better form; with
reg_candidate = inf, reg_reference = 0 it is BERTScore's precision, with (0, inf) its recall, and with
(inf, inf) it approaches 1 - WMD (as eps -> 0). The "original" preset (default) zeroes plan entries
with cost >= 0.999 after solving, as the authors' code; "paper" does not. The default encoder is the
bundled all-MiniLM-L6-v2 (no download); any Hugging Face model id or local folder works.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): Candidates, one per segment.
    references (`list` of `str`, or `list` of `list` of `str`): One reference per segment, or a
        non-empty list per segment (ragged lists allowed).
    reg (`float`): entropic strength eps > 0 (default 0.009, the original's).
    reg_candidate (`float`): KL weight of the candidate (prediction) marginal in [0, inf] (default 0.23).
    reg_reference (`float`): KL weight of the reference marginal in [0, inf] (default 0.31).
    preset (`str`): "original" (default: zero plan entries with cost >= 0.999 after solving) or "paper".
    mask (`bool` or `float`): override the preset's mask: True (0.999), False (none) or a cost threshold.
    idf (`bool` or `movers.Idf`): False (default, the original) = uniform masses; True = IDF from this
        call's references (both sides); a fitted `movers.Idf` table = fixed weights.
    model (`str`): Hugging Face model id or local folder; default the bundled all-MiniLM-L6-v2.
    layer (`int`): hidden_states index (0 = embeddings, -1 = last, the default).
    reference_aggregation (`str`): "min" (default: the closest reference) or "mean" over references.
    max_iter (`int`), tol (`float`): the solver's cap (200000) and stopping threshold (1e-6), as the original.
    solver (`str`): "sinkhorn" (default: Lazy-EMD by accelerated scaling iterations, the same optimum as
        the original's in fewer iterations), "sinkhorn-plain" (the original's plain iterations and
        iteration counts) or "emd": exact EMD with the same masses and cost, no mask (the original's
        WMD baseline; the reg_* arguments are then unused).
    long_texts (`str`): "window" (default: sliding windows), "truncate" (as the original) or "error".
    return_matching (`bool`): also return the tokens and the plan P* of every pair (see `matching`).
    batch_size (`int`), device (`str`), verbose (`bool`): runtime only; never change a score.
    centering (`str` or `movers.Centering`): subtract a token mean before comparing (Chen et al. 2020):
        "none" (default), "corpus" (one pair of means per call; order-free), "batch" (per run of
        `centering_batch` consecutive segments; order dependent) or a table from `movers.fit_centering`.
    centering_batch (`int`): segments per centring batch (default 32).
    empty_predictions (`str`): "worst" (default): an empty or whitespace-only prediction gets the
        metric's worst value, with a warning; "error": rejected. Empty references are always an error.
Returns:
    score (`float`): mean of `scores`.
    scores (`list` of `float`): Lazy-EMD distance per segment, in input order; lower is better, >= 0.
    similarity (`float`): mean of `similarities`.
    similarities (`list` of `float`): 1 - distance per segment; higher is better, 1 at most.
    converged (`list` of `bool`): whether the solver met `tol` for every reference of the segment.
    iterations (`list` of `int`): solver iterations per segment (largest over its references).
    per_reference (`list` of `list` of `float`): distances per reference, only with several references.
    matching (`list` of `list` of `dict`): only with `return_matching=True`; per segment and reference,
        `prediction_tokens`, `reference_tokens`, `weights` (the plan P*, rows = prediction tokens incl.
        [CLS]/[SEP]) and `distance`; draw one with `movers.lazy_emd_plot`.
    signature (`str`): reproducibility signature; report it with the score.
Examples:
    >>> lazy_emd = evaluate.load("lazy_emd")
    >>> results = lazy_emd.compute(predictions=["The boy in a coat.", "The man in a coat."],
    ...                            references=["The young man in a slicker.", "The young man in a slicker."])
    >>> [round(d, 4) for d in results["scores"]], [round(s, 4) for s in results["similarities"]]
    ([0.1999, 0.1795], [0.8001, 0.8205])
    >>> results["converged"], results["signature"].split("|")[:4]
    ([True, True], ['LazyEMD', 'preset:original', 'nrefs:1', 'agg:min'])
    >>> precision = lazy_emd.compute(predictions=["The man in a coat."], references=["The young man in a slicker."],
    ...                              reg=1e-4, reg_candidate=float("inf"), reg_reference=0.0, preset="paper")
    >>> round(precision["similarities"][0], 4)
    0.5918
    >>> results = lazy_emd.compute(predictions=["The cat sat on the mat."],
    ...                            references=[["A cat was sitting on the mat.", "The cat sat on the mat."]])
    >>> [round(d, 4) for d in results["per_reference"][0]], round(results["scores"][0], 4)
    ([0.0722, 0.0], 0.0)
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class LazyEmd(movers.MoversMetric):  # movers' input checks before evaluate's
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=movers.text_features(),
            codebase_urls=["https://github.com/Beastlyprime/lazy_emd"],
            reference_urls=["https://doi.org/10.24963/ijcai.2020/516"],
        )

    def _compute(self, predictions, references, reg=0.009, reg_candidate=0.23, reg_reference=0.31,
                 preset="original", mask=None, idf=False, model=None, layer=-1, reference_aggregation="min",
                 max_iter=200_000, tol=1e-6, solver="sinkhorn", long_texts="window", return_matching=False,
                 batch_size=64, device=None, verbose=False, centering="none", centering_batch=32,
                 empty_predictions="worst"):
        return movers.lazy_emd(
            predictions, references, reg=reg, reg_candidate=reg_candidate, reg_reference=reg_reference,
            preset=preset, mask=mask, idf=idf, model=model, layer=layer,
            reference_aggregation=reference_aggregation, max_iter=max_iter, tol=tol, solver=solver,
            long_texts=long_texts,
            return_matching=return_matching, batch_size=batch_size, device=device, verbose=verbose,
            centering=centering,
            centering_batch=centering_batch,
            empty_predictions=empty_predictions,
        ).to_dict()
