"""The Gradio demo behind every module's Hub Space (`metrics/<slug>/app.py`, `movers space build`).

One page per metric: clickable examples (including the papers' own), the options as widgets with the
metric's defaults, the corpus score with its signature right next to it, a per-segment table, the
alignment heat map of one pair (from :func:`movers.explain`) for every optimal-transport metric, and,
for ΔBLEU, the matched n-grams with their weights. Bad input is shown as a message that names the
field, never as a bare error badge. The metric card (the Space's README.md) is shown below, with its
images served from the Space folder.

Gradio is imported only here, on launch; it is not a dependency of movers.
"""
from __future__ import annotations

import html
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["build", "launch", "parse_inputs", "delta_bleu_ngrams", "METRICS", "InputError"]

REF_SEP = "|||"


class InputError(ValueError):
    """Bad text in one of the page's fields; `field` is the label the person sees."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# ----------------------------------------------------------------------------------- what each page offers

@dataclass(frozen=True)
class Option:
    """One keyword option of a metric as a widget: `kind` in radio/dropdown/checkbox/number/text.

    `choices` are shown as they are; `to_value` maps a widget value to the keyword argument (e.g. the
    label "(preset)" to None). The default is the metric's own default.
    """

    name: str
    kind: str
    default: Any
    info: str = ""
    choices: Sequence[Any] = ()
    to_value: Callable[[Any], Any] | None = None

    def value(self, raw: Any) -> Any:
        if self.to_value is not None:
            return self.to_value(raw)
        if self.kind == "number" and raw is not None and float(raw).is_integer() and isinstance(self.default, int):
            return int(raw)
        if self.kind == "text":
            return raw.strip() or None
        return raw


def _none_if(label: str) -> Callable[[Any], Any]:
    return lambda raw: None if raw in (label, None, "") else raw


def _bool_or_none(raw: Any) -> Any:
    return {"(preset)": None, "True": True, "False": False}.get(raw, raw)


def _layer(raw: Any) -> Any:
    return None if raw is None else int(raw)


@dataclass(frozen=True)
class Example:
    label: str
    predictions: str
    references: str
    weights: str = ""


@dataclass(frozen=True)
class MetricPage:
    slug: str
    options: list[Option]
    examples: list[Example]
    explain: bool = True                    # an OT metric: show the alignment heat map
    lower_is_better: bool = False
    segment_extras: tuple[str, ...] = ()    # per-segment lists in the result shown as table columns
    weights: bool = False                   # ΔBLEU: a reference-weights field
    extra_defaults: dict[str, Any] = field(default_factory=dict)


_LONG = Option("long_texts", "radio", "window", "texts over 512 pieces: sliding windows, truncate, or refuse",
               ("window", "truncate", "error"))
_MODEL = Option("model", "text", "", "Hub id or local folder; empty = the bundled all-MiniLM-L6-v2")

_WMT_PAIRS = Example(
    "WMT16-style pairs: close, paraphrase, unrelated",
    "The cat sat on the mat.\nA quick brown fox jumps over the lazy dog.\nHe went to the store to buy milk.",
    "A cat was sitting on the mat.\nThe fast brown fox leaped over a lazy dog.\nShe stayed at home and read a book.")
_SLICKER = Example(
    "Lazy-EMD paper: the young man in a slicker",
    "The boy in a coat.\nThe man in a coat.",
    "The young man in a slicker.\nThe young man in a slicker.")
_SUMMARY = Example(
    "Multi-sentence summaries (SMS's setting)",
    "Heavy rain flooded the city centre on Monday. Schools were closed and buses stopped running. "
    "The river is expected to fall by Wednesday.",
    "Schools and bus services shut down after Monday's storm flooded the city centre. "
    "Forecasters say the river will go down by midweek. ||| Monday's rain closed the schools.")
_ESSAY = Example(
    "Multi-sentence: same facts, different order",
    "The museum opened in 1902. It holds over ten thousand paintings. Visitors come from all over the world.",
    "Tourists from every country visit the museum. It has more than 10,000 paintings. It first opened in 1902.")


# The options SMS and S+WMS share (SMS adds `variant` in front).
_DOCUMENT_OPTIONS = [
    Option("embedding", "text", "glove", "glove (bundled GloVe 6B 50d) or a Hub id / folder (contextual)",
           to_value=lambda raw: raw.strip() or "glove"),
    Option("layer", "number", None, "contextual embeddings only; empty = last layer", to_value=_layer),
    Option("segmenter", "radio", "punkt", "sentence splitter", ("punkt", "regex")),
    Option("tokenizer", "radio", "spacy", "word tokenizer", ("spacy", "whitespace")),
    Option("stop_words", "radio", "en", "drop English stop words, or keep all words", ("en", "none"),
           _none_if("none")),
    Option("reference_aggregation", "radio", "max", "several references: max or mean", ("max", "mean")),
    _LONG,
]

METRICS: dict[str, MetricPage] = {
    "moverscore": MetricPage(
        "moverscore",
        [Option("preset", "radio", "1.0.3", "1.0.3: 1-d (PyPI 1.0.3); github: 1/(1+d); paper: p-means of 5 layers, "
                "n-grams", ("1.0.3", "github", "paper")),
         Option("idf", "checkbox", False, "IDF weights from this call (off: uniform weights, the default)"),
         Option("layer", "number", None, "hidden_states index; empty = the preset's", to_value=_layer),
         Option("n_gram", "number", None, "n-gram size; empty = the preset's", to_value=_layer),
         Option("cost", "dropdown", "(preset)", "ground cost", ("(preset)", "euclidean", "sqeuclidean", "cosine"),
                _none_if("(preset)")),
         Option("transform", "dropdown", "(preset)", "distance to score",
                ("(preset)", "1/(1+d)", "1-d", "exp(-d)", "d"), _none_if("(preset)")),
         Option("remove_subwords", "checkbox", True, "give ## word pieces no mass"),
         Option("remove_punctuation", "checkbox", True, "give punctuation tokens no mass"),
         Option("stop_words", "radio", "none", "none, or the shipped 153-word English list", ("none", "en"),
                _none_if("none")),
         Option("reference_aggregation", "radio", "max", "several references: max or mean", ("max", "mean")),
         _LONG, _MODEL],
        [_WMT_PAIRS,
         Example("One prediction, two references (the closer one counts)",
                 "The committee approved the new budget on Friday.",
                 "On Friday the committee passed the new budget. ||| The budget was rejected by the committee."),
         _SLICKER]),
    "sms": MetricPage(
        "sms",
        [Option("variant", "radio", "sms", "points: sentences, words, or both", ("sms", "wms", "s+wms")),
         *_DOCUMENT_OPTIONS],
        [_SUMMARY, _ESSAY, _WMT_PAIRS], segment_extras=("distances",)),
    "s_wms": MetricPage(
        "s_wms",
        _DOCUMENT_OPTIONS,
        [_SUMMARY, _ESSAY, _WMT_PAIRS], segment_extras=("distances",)),
    "twmd": MetricPage(
        "twmd",
        [Option("variant", "radio", "twmd", "Sinkhorn-tempered (TWMD) or one softmax (TRWMD)", ("twmd", "trwmd")),
         Option("centering", "radio", "batch", "subtract token means of each batch, of the call, or none",
                ("batch", "corpus", "none")),
         Option("temperature", "number", None, "T > 0; empty = the paper's (0.1 TWMD, 0.15 TRWMD)"),
         Option("iterations", "number", 1, "Sinkhorn sweeps (TWMD)"),
         Option("relaxed", "radio", "expectation", "TRWMD side value", ("expectation", "logsumexp")),
         Option("centering_batch", "number", 32, "segments per centring batch"),
         Option("preset", "radio", "wmt", "wmt: keep [CLS]; sts: drop both specials", ("wmt", "sts")),
         Option("layer", "number", None, "hidden_states index; empty = the model's default", to_value=_layer),
         Option("reference_aggregation", "radio", "max", "several references: max or mean", ("max", "mean")),
         _LONG, _MODEL],
        [_WMT_PAIRS, _SLICKER], segment_extras=("precision", "recall")),
    "lazy_emd": MetricPage(
        "lazy_emd",
        [Option("reg", "number", 0.009, "entropic strength ε"),
         Option("reg_candidate", "number", 0.23, "λc, KL weight of the prediction marginal"),
         Option("reg_reference", "number", 0.31, "λr, KL weight of the reference marginal"),
         Option("preset", "radio", "original", "original: mask costs ≥ 0.999 after solving; paper: no mask",
                ("original", "paper")),
         Option("mask", "dropdown", "(preset)", "override the preset's mask", ("(preset)", "True", "False"),
                _bool_or_none),
         Option("idf", "checkbox", False, "IDF masses from this call's references (off: uniform, the original)"),
         Option("layer", "number", -1, "hidden_states index (-1 = last)", to_value=_layer),
         Option("solver", "radio", "sinkhorn", "accelerated scaling, the original's iterations, or exact EMD",
                ("sinkhorn", "sinkhorn-plain", "emd")),
         Option("reference_aggregation", "radio", "min", "several references: closest (min) or mean",
                ("min", "mean")),
         _LONG, _MODEL],
        [_SLICKER, _WMT_PAIRS], lower_is_better=True, segment_extras=("similarities",)),
    "delta_bleu": MetricPage(
        "delta_bleu",
        [Option("variant", "radio", "paper", "the paper's formula, or Galley's sacreBLEU fork", ("paper", "galley")),
         Option("tokenize", "dropdown", "13a", "sacreBLEU tokenizer",
                ("13a", "intl", "zh", "ja-mecab", "ko-mecab", "char", "none")),
         Option("lowercase", "checkbox", False, "lowercase texts (never the weights)"),
         Option("max_ngram_order", "number", 4, "N (the paper's experiments used 2)"),
         Option("smooth_method", "radio", "exp", "sacreBLEU smoothing", ("exp", "floor", "add-k", "none")),
         Option("smooth_value", "number", None, "floor / add-k value; empty = the variant's default"),
         Option("effective_order", "checkbox", False, "average only over orders the hypothesis has")],
        [Example("Galley et al.: a response against a good and a bad rated reference",
                 "yes , we have it", "yes , we have one copy ||| no .", "0.8 ||| -0.5"),
         Example("Conversation responses, each with rated references",
                 "i am going to the beach this weekend .\nthat sounds like a great idea .",
                 "we are going to the beach on saturday . ||| i am staying home this weekend .\n"
                 "what a great idea ! ||| that sounds terrible .",
                 "0.9 ||| -0.6\n1.0 ||| -0.8"),
         Example("No weights: plain multi-reference BLEU (= sacreBLEU)",
                 "The cat sat on the mat.", "The cat sat on a mat. ||| A cat was on the mat.")],
        explain=False, weights=True),
}


# ------------------------------------------------------------------------------------------ parsing

def _lines(text: str) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def parse_inputs(predictions: str, references: str, weights: str | None = None
                 ) -> tuple[list[str], list[list[str]], list[list[float]] | None]:
    """The page's three text boxes as metric inputs; raises :class:`InputError` naming the field."""
    preds = _lines(predictions)
    if not preds:
        raise InputError("predictions", "enter at least one prediction, one per line.")
    ref_lines = _lines(references)
    if len(ref_lines) != len(preds):
        raise InputError("references", f"{len(ref_lines)} line(s) for {len(preds)} prediction(s); give one line "
                                       f"per prediction (several references on a line separated by {REF_SEP}).")
    refs = []
    for i, line in enumerate(ref_lines, 1):
        parts = [r.strip() for r in line.split(REF_SEP)]
        if any(not r for r in parts):
            raise InputError("references", f"line {i} has an empty reference between {REF_SEP} separators.")
        refs.append(parts)
    if weights is None or not weights.strip():
        return preds, refs, None
    weight_lines = _lines(weights)
    if len(weight_lines) != len(preds):
        raise InputError("reference weights", f"{len(weight_lines)} line(s) for {len(preds)} prediction(s); give "
                                              f"one line per prediction, or leave the field empty for weight 1.")
    out: list[list[float]] = []
    for i, (line, seg_refs) in enumerate(zip(weight_lines, refs), 1):
        items = [w.strip() for w in line.split(REF_SEP)]
        if len(items) != len(seg_refs):
            raise InputError("reference weights", f"line {i} has {len(items)} weight(s) for {len(seg_refs)} "
                                                  f"reference(s); separate them with {REF_SEP} like the references.")
        row = []
        for j, item in enumerate(items, 1):
            try:
                row.append(float(item))
            except ValueError:
                raise InputError("reference weights", f"line {i}, weight {j}: {item!r} is not a number "
                                                      f"(expected a value in [-1, 1]).") from None
        out.append(row)
    return preds, refs, out


def _field_of(message: str) -> str:
    """The field a metric's error message is about: its first `argument` in backticks."""
    m = re.search(r"`([A-Za-z_]+)", message)
    if not m:
        return "input"
    arg = m.group(1)
    return {"reference_weights": "reference weights"}.get(arg, arg if arg in ("predictions", "references")
                                                          else f"option {arg}")


# ----------------------------------------------------------------------------------- ΔBLEU n-grams

def delta_bleu_ngrams(prediction: str, references: list[str], weights: list[float] | None, *,
                      variant: str = "paper", tokenize: str = "13a", lowercase: bool = False,
                      max_ngram_order: int = 4, **_: Any) -> list[dict[str, Any]]:
    """Every n-gram of `prediction` with the credit ΔBLEU gives it (one segment).

    Rows: ``ngram``, ``n``, ``count`` (in the prediction), ``reference`` (1-based index of the reference
    whose weight is used, 0 when no reference has the n-gram), ``weight``, ``credit`` (the numerator term:
    paper: ``max_j w_j · min(#g(h), #g(r_j))``; galley: ``max w_j · min(#g(h), max_j #g(r_j))``) and
    ``total`` (the denominator term ``max_j w_j · #g(h)``). Per order, the credits add up to the
    segment's weighted match counts before negative sums are set to 0. Tokenised with sacreBLEU's
    tokenizer exactly as the metric does.
    """
    from sacrebleu.metrics.bleu import BLEU
    from sacrebleu.metrics.helpers import extract_all_word_ngrams

    weights = list(weights) if weights is not None else [1.0] * len(references)
    tok = BLEU(tokenize=tokenize, lowercase=lowercase, max_ngram_order=max_ngram_order).tokenizer

    def grams(text: str) -> Counter:
        return extract_all_word_ngrams(tok((text.lower() if lowercase else text).rstrip()), 1, max_ngram_order)[0]

    hyp = grams(prediction)
    refs = [grams(r) for r in references]
    max_w = max(weights)
    rows = []
    for gram, count in sorted(hyp.items(), key=lambda kv: (len(kv[0]), kv[0])):
        having = [(j, w, ref[gram]) for j, (ref, w) in enumerate(zip(refs, weights)) if gram in ref]
        if not having:
            j, w, credit = -1, 0.0, 0.0
        elif variant == "galley":
            j, w, _ = max(having, key=lambda t: t[1])
            credit = w * min(count, max(k for _, _, k in having))
        else:
            j, w, k = max(having, key=lambda t: t[1] * min(count, t[2]))
            credit = w * min(count, k)
        rows.append({"ngram": " ".join(gram), "n": len(gram), "count": count, "reference": j + 1,
                     "weight": w, "credit": credit, "total": max_w * count})
    return rows


# ----------------------------------------------------------------------------------------- heat map

def _heatmap(slug: str, prediction: str, reference: str, options: dict[str, Any]):
    """The alignment of one pair from :func:`movers.explain` as a PIL image and a caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from .explanation import explain, plot_explanation

    exp = explain(slug, prediction, reference, **options)
    n, m = len(exp.prediction_labels), len(exp.reference_labels)
    row_chars = min(max(map(len, exp.prediction_labels), default=1), 40)  # plot_explanation cuts at 40
    col_chars = min(max(map(len, exp.reference_labels), default=1), 40)
    fig, ax = plt.subplots(figsize=(min(3.5 + 0.6 * m + 0.07 * row_chars, 16.0),
                                    min(2.5 + 0.45 * n + 0.05 * col_chars, 14.0)), dpi=100)
    plot_explanation(exp, ax=ax, annotate=n * m <= 400)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")  # long (sentence) labels stay inside the image
    plt.close(fig)
    buf.seek(0)
    image = Image.open(buf)
    image.load()
    distance = "" if exp.distance is None else f", transport distance {exp.distance:.4f}"
    caption = (f"Transport plan (rows: prediction, columns: reference; cost {exp.cost_label}): "
               f"this pair alone scores {exp.score:.4f}{distance}.")
    return image, caption


# -------------------------------------------------------------------------------------------- page

def _card(path: Path) -> tuple[dict[str, Any], str, list[str]]:
    """Front matter, body (image links made absolute gradio file URLs) and the folders to allow."""
    import yaml

    text = path.read_text(encoding="utf-8")
    meta: dict[str, Any] = {}
    body = text
    if text.startswith("---"):
        _, front, body = text.split("---", 2)
        meta = yaml.safe_load(front) or {}
    folder = path.resolve().parent

    def absolute(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^[a-z]+:|^/", target) or not (folder / target).is_file():
            return m.group(0)
        return f"![{m.group(1)}](/gradio_api/file={(folder / target).as_posix()})"

    body = re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", absolute, body)
    return meta, body, [str(folder)]


def _fmt(x: Any) -> Any:
    return round(float(x), 4) if isinstance(x, (int, float)) and not isinstance(x, bool) else x


def build(name: str, card: str | Path | None = None):
    """The Gradio Blocks page of module `name`; `card` = its README.md (default: the packaged copy).

    Returns ``(blocks, allowed_paths)``: the folder of the card, so that its images can be served.
    """
    import gradio as gr

    from .registry import load, module_dir

    page = METRICS[name]
    card_path = Path(card) if card is not None else Path(module_dir(name)) / "README.md"
    meta, article, allowed = _card(card_path)
    title = f"{meta.get('title', name)} {meta.get('emoji', '')}".strip()
    module_cache: dict[str, Any] = {}

    def module():
        if "m" not in module_cache:
            module_cache["m"] = load(name)
        return module_cache["m"]

    def compute(predictions: str, references: str, weights: str, segment: float | None, *raw_options):
        options = {o.name: o.value(v) for o, v in zip(page.options, raw_options)}
        options = {k: v for k, v in options.items() if v is not None}
        # On bad input: the message, and no stale or placeholder result beside it.
        hidden = gr.update(value=None, visible=False)
        empty = (gr.update(value="", visible=False), "", hidden, hidden, "", hidden)
        try:
            preds, refs, w = parse_inputs(predictions, references, weights if page.weights else None)
            kwargs = dict(options)
            if w is not None:
                kwargs["reference_weights"] = w
            result = module().compute(predictions=preds, references=refs, **kwargs)
        except InputError as err:
            return (gr.update(value=f"⚠️ **{err.field}** — {err.message}", visible=True),) + empty[1:]
        except (ValueError, TypeError) as err:
            msg = str(err)
            return (gr.update(value=f"⚠️ **{_field_of(msg)}** — {msg}", visible=True),) + empty[1:]
        except Exception as err:  # e.g. a model id that cannot be loaded: still a readable message
            return (gr.update(value=f"⚠️ **could not score** — {type(err).__name__}: {err}", visible=True),) \
                + empty[1:]

        direction = "lower is better" if page.lower_is_better else "higher is better"
        score = (f"<div id='score-value'><span class='movers-score'>{result['score']:.4f}</span> "
                 f"<span class='movers-note'>{html.escape(str(meta.get('title', name)))}, corpus score "
                 f"({direction})</span></div><div class='movers-sig-label'>signature</div>"
                 f"<code id='signature-value'>{html.escape(result['signature'])}</code>")
        # Numbers first: long texts would otherwise push them out of view.
        extras = [k for k in page.segment_extras if isinstance(result.get(k), list)]
        headers = ["#", "score", *extras, "prediction", "reference(s)"]
        rows = [[i + 1, _fmt(result["scores"][i]), *[_fmt(result[k][i]) for k in extras], p, f" {REF_SEP} ".join(r)]
                for i, (p, r) in enumerate(zip(preds, refs))]
        table = {"headers": headers, "data": rows}

        k = min(max(int(segment or 1), 1), len(preds)) - 1
        image, caption, ngrams = None, "", None
        if page.explain:
            try:
                image, caption = _heatmap(name, preds[k], refs[k][0], options)
                caption = f"Segment {k + 1}, first reference. " + caption
            except Exception as err:  # the score stands; say why the picture is missing
                caption = f"⚠️ No alignment view for segment {k + 1}: {type(err).__name__}: {err}"
        else:
            seg_w = w[k] if w is not None else None
            found = delta_bleu_ngrams(preds[k], refs[k], seg_w, **options)
            ngrams = {"headers": ["n-gram", "n", "count", "reference", "weight", "credit", "total"],
                      "data": [[g["ngram"], g["n"], g["count"], g["reference"] or "-", _fmt(g["weight"]),
                                _fmt(g["credit"]), _fmt(g["total"])] for g in found]}
            caption = (f"Segment {k + 1}: each n-gram of the prediction, the reference whose weight it takes, and "
                       f"its credit (numerator) and total (denominator) in the modified precision.")
        return (gr.update(value="", visible=False), score, gr.update(value=table, visible=True),
                gr.update(value=image, visible=page.explain), caption,
                gr.update(value=ngrams, visible=not page.explain))

    css = ("#score-value .movers-score{font-size:2.4em;font-weight:700} .movers-note{color:#666}"
           " .movers-sig-label{font-weight:600;margin-top:0.4em}"
           " #signature-value{display:block;word-break:break-all;font-size:0.85em;padding:0.4em;"
           "background:rgba(128,128,128,0.1);border-radius:4px}")
    with gr.Blocks(title=title) as demo:
        gr.Markdown(f"# {title}\n\n{meta.get('description', '')}")
        with gr.Row():
            with gr.Column(scale=5):
                predictions = gr.Textbox(label="predictions (one per line)", lines=4, elem_id="predictions")
                references = gr.Textbox(label=f"references (one line per prediction; several separated by {REF_SEP})",
                                        lines=4, elem_id="references")
                weights = gr.Textbox(label=f"reference weights in [-1, 1] (like the references, separated by "
                                           f"{REF_SEP}; empty = all 1)", lines=2, visible=page.weights,
                                     elem_id="weights")
                example_inputs = [predictions, references, weights] if page.weights else [predictions, references]
                examples = gr.Examples(
                    [[e.predictions, e.references, e.weights][:len(example_inputs)] for e in page.examples],
                    inputs=example_inputs, cache_examples=False, example_labels=[e.label for e in page.examples],
                    label="examples (click one to score it)", elem_id="examples")
                segment = gr.Number(label="segment to explain (alignment / n-grams)", value=1, precision=0,
                                    minimum=1, elem_id="segment")
                widgets = []
                with gr.Accordion("options (the metric's defaults)", open=False):
                    for o in page.options:
                        label = o.name
                        if o.kind == "radio":
                            widgets.append(gr.Radio(list(o.choices), value=o.default, label=label, info=o.info))
                        elif o.kind == "dropdown":
                            widgets.append(gr.Dropdown(list(o.choices), value=o.default, label=label, info=o.info))
                        elif o.kind == "checkbox":
                            widgets.append(gr.Checkbox(value=o.default, label=label, info=o.info))
                        elif o.kind == "number":
                            widgets.append(gr.Number(value=o.default, label=label, info=o.info))
                        else:
                            widgets.append(gr.Textbox(value=o.default, label=label, info=o.info))
                button = gr.Button("Score", variant="primary", elem_id="score-button")
            with gr.Column(scale=6):
                error = gr.Markdown(visible=False, elem_id="error")
                score = gr.HTML(elem_id="score")
                table = gr.Dataframe(label="per segment", elem_id="segments", interactive=False, wrap=True,
                                     visible=False)
                heatmap = gr.Image(label="alignment (transport plan)", type="pil", visible=False,
                                   elem_id="heatmap", interactive=False)
                ngrams = gr.Dataframe(label="matched n-grams and their weights", visible=False,
                                      elem_id="ngrams", interactive=False)
                caption = gr.Markdown(elem_id="caption")
        inputs = [predictions, references, weights, segment, *widgets]
        outputs = [error, score, table, heatmap, caption, ngrams]

        # One click on an example fills the boxes and scores them with the options as set on the page.
        examples.load_input_event.then(compute, inputs=inputs, outputs=outputs)
        button.click(compute, inputs=inputs, outputs=outputs)
        with gr.Accordion("metric card", open=True):
            gr.Markdown(article, elem_id="card")
    module()  # import evaluate, torch and the module now, at start, not on a visitor's first click
    demo.movers_css = css
    return demo, allowed


def launch(name: str, card: str | Path | None = None, **kwargs: Any) -> None:
    """Build and serve the page of module `name` (server name/port from GRADIO_SERVER_NAME/PORT)."""
    demo, allowed = build(name, card=card)
    demo.launch(allowed_paths=allowed, css=demo.movers_css, **kwargs)
