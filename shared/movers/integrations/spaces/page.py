"""The Gradio demo behind every module's Hub Space (`metrics/<slug>/app.py`, `movers space build`).

One page per metric: clickable examples (including the papers' own), the options as widgets with the
metric's defaults, the corpus score with its signature right next to it, a per-segment table, the
alignment heat map of one pair (the plan the call itself scored, ``return_plans=True``) for every
optimal-transport metric, and, for ΔBLEU, the matched n-grams with their weights. Bad input is shown as a
message that names the field, never as a bare error badge. The metric card (the Space's README.md) is shown
below, with its images served from the Space folder.

Gradio is imported only here, on launch; it is not a dependency of movers.
"""
from __future__ import annotations

import html
import io
import re
import typing
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import metrics as registry
from ...core.options import OptionField, Widget, choices_of, scalar_kind
from ...core.spec import Example
from ...pipeline.call import make_options

__all__ = ["build", "launch", "parse_inputs", "page", "MetricPage", "Option", "InputError"]

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

    `choices` are shown as they are; `values` maps a shown value to the keyword argument (e.g. the label
    "(preset)" to None). The default is the metric's own default, shown as the widget shows it.
    """

    name: str
    kind: str
    default: Any
    info: str = ""
    choices: Sequence[Any] = ()
    values: Mapping[Any, Any] = field(default_factory=dict)
    integer: bool = False
    fallback: Any = None  # a text box left empty

    def value(self, raw: Any) -> Any:
        if isinstance(raw, Hashable) and raw in self.values:
            return self.values[raw]
        if self.kind == "number":
            if raw is None or raw == "":
                return None
            return int(raw) if self.integer and float(raw).is_integer() else raw
        if self.kind == "text":
            return (raw or "").strip() or self.fallback
        return raw


@dataclass(frozen=True)
class MetricPage:
    slug: str
    options: list[Option]
    examples: list[Example]
    explain: bool = True                    # an OT metric: show the alignment heat map
    lower_is_better: bool = False
    segment_extras: tuple[str, ...] = ()    # per-segment lists in the result shown as table columns
    weights: bool = False                   # a reference-weights field (ΔBLEU)


def _widget(f: OptionField) -> Option | None:
    """The widget of one option, derived from its declaration (type, default, choices) unless it declares one."""
    info = f.info
    if info.runtime or info.widget is False or not info.cli:
        return None
    short = info.short
    if isinstance(info.widget, Widget):
        shown = {v: k for k, v in info.widget.values.items()}
        default = shown.get(f.default, f.default)
        return Option(f.name, info.widget.kind, default, short, info.widget.choices, dict(info.widget.values))
    kind = scalar_kind(f.hint)
    choices = choices_of(f.hint)
    members = set(typing.get_args(f.hint)) or {f.hint}
    if kind == "bool" or (bool in members and isinstance(f.default, bool)):
        return Option(f.name, "checkbox", f.default, short)
    if choices:
        if f.default is None:  # None = "the preset's"
            return Option(f.name, "dropdown", "(preset)", short, ("(preset)", *choices), {"(preset)": None})
        return Option(f.name, "radio" if len(choices) <= 4 else "dropdown", f.default, short, choices)
    if kind in ("int", "float") or int in members or float in members:
        return Option(f.name, "number", f.default, short, integer=kind == "int" or info.integer or int in members)
    if kind == "str":
        return Option(f.name, "text", "" if f.default is None else f.default, short, fallback=f.default)
    return None


def page(slug: str) -> MetricPage:
    """The page of a registered metric: widgets, examples and outputs from its spec."""
    spec = registry.get(slug)
    options = [w for w in (_widget(f) for f in spec.options) if w is not None]
    extras = tuple(o.name for o in spec.outputs if o.per_segment and o.table and o.type == "list of float")
    return MetricPage(spec.slug, options, list(spec.space_examples), explain=spec.has_plan,
                      lower_is_better=not spec.higher_is_better, segment_extras=extras,
                      weights=bool(spec.extra_inputs))


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
    for i, (line, seg_refs) in enumerate(zip(weight_lines, refs, strict=False), 1):
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


# ----------------------------------------------------------------------------------------- heat map

def _heatmap(exp: Any):
    """One pair's :class:`~movers.core.explanation.Explanation` (as the call scored it) as a PIL image and a
    caption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from ...core.explanation import plot_explanation

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
    caption = (f"Transport plan (rows: prediction, columns: reference; cost {exp.cost_label}), as scored in "
               f"this call: {exp.score:.4f}{distance}.")
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

    from ..hub.loading import load, module_dir

    spec = registry.get(name)
    page_ = page(name)
    card_path = Path(card) if card is not None else Path(module_dir(name)) / "README.md"
    meta, article, allowed = _card(card_path)
    title = f"{meta.get('title', name)} {meta.get('emoji', '')}".strip()
    module_cache: dict[str, Any] = {}

    def module():
        if "m" not in module_cache:
            module_cache["m"] = load(name)
        return module_cache["m"]

    def compute(predictions: str, references: str, weights: str, segment: float | None, *raw_options):
        options = {o.name: o.value(v) for o, v in zip(page_.options, raw_options, strict=False)}
        options = {k: v for k, v in options.items() if v is not None}
        # On bad input: the message, and no stale or placeholder result beside it.
        hidden = gr.update(value=None, visible=False)
        empty = (gr.update(value="", visible=False), "", hidden, hidden, "", hidden)
        try:
            preds, refs, w = parse_inputs(predictions, references, weights if page_.weights else None)
            kwargs = dict(options)
            if w is not None:
                kwargs["reference_weights"] = w
            if page_.explain:  # the plans of the call itself: one segment shows one number on the page
                kwargs["return_plans"] = True
            result = module().compute(predictions=preds, references=refs, **kwargs)
        except InputError as err:
            return (gr.update(value=f"⚠️ **{err.field}** — {err.message}", visible=True),) + empty[1:]
        except (ValueError, TypeError) as err:
            msg = str(err)
            return (gr.update(value=f"⚠️ **{_field_of(msg)}** — {msg}", visible=True),) + empty[1:]
        except Exception as err:  # e.g. a model id that cannot be loaded: still a readable message
            return (gr.update(value=f"⚠️ **could not score** — {type(err).__name__}: {err}", visible=True),) \
                + empty[1:]

        direction = "lower is better" if page_.lower_is_better else "higher is better"
        score = (f"<div id='score-value'><span class='movers-score'>{result['score']:.4f}</span> "
                 f"<span class='movers-note'>{html.escape(str(meta.get('title', name)))}, corpus score "
                 f"({direction})</span></div><div class='movers-sig-label'>signature</div>"
                 f"<code id='signature-value'>{html.escape(result['signature'])}</code>")
        # Numbers first: long texts would otherwise push them out of view.
        extras = [k for k in page_.segment_extras if isinstance(result.get(k), list)]
        headers = ["#", "score", *extras, "prediction", "reference(s)"]
        rows = [[i + 1, _fmt(result["scores"][i]), *[_fmt(result[k][i]) for k in extras], p, f" {REF_SEP} ".join(r)]
                for i, (p, r) in enumerate(zip(preds, refs, strict=False))]
        table = {"headers": headers, "data": rows}

        k = min(max(int(segment or 1), 1), len(preds)) - 1
        image, caption, ngrams = None, "", None
        if page_.explain:
            explained = (result.get("alignments") or [None] * len(preds))[k]
            where = f"Segment {k + 1}, reference 1 of {len(refs[k])}"
            if not explained or explained[0] is None:  # an empty prediction: scored as the worst value, no plan
                caption = f"{where}: no transport plan (an empty prediction gets the worst value)."
            else:
                try:
                    image, caption = _heatmap(explained[0])
                    combined = "" if len(refs[k]) == 1 else (f" The segment's score, {_fmt(result['scores'][k]):.4f}, "
                                                             f"combines its {len(refs[k])} references.")
                    caption = f"{where}. {caption}{combined}"
                except Exception as err:  # the score stands; say why the picture is missing
                    caption = f"⚠️ No alignment view for segment {k + 1}: {type(err).__name__}: {err}"
        else:
            seg_w = w[k] if w is not None else None
            o = spec.resolve(make_options(spec, options))
            found = spec.details(o, preds[k], refs[k], seg_w) or {"headers": [], "data": [], "caption": ""}
            ngrams = {"headers": found["headers"], "data": [[_fmt(x) for x in row] for row in found["data"]]}
            caption = f"Segment {k + 1}: {found['caption']}"
        return (gr.update(value="", visible=False), score, gr.update(value=table, visible=True),
                gr.update(value=image, visible=page_.explain), caption,
                gr.update(value=ngrams, visible=not page_.explain))

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
                                           f"{REF_SEP}; empty = all 1)", lines=2, visible=page_.weights,
                                     elem_id="weights")
                example_inputs = [predictions, references, weights] if page_.weights else [predictions, references]
                examples = gr.Examples(
                    [[e.predictions, e.references, e.weights][:len(example_inputs)] for e in page_.examples],
                    inputs=example_inputs, cache_examples=False, example_labels=[e.label for e in page_.examples],
                    label="examples (click one to score it)", elem_id="examples")
                segment = gr.Number(label="segment to explain (alignment / n-grams)", value=1, precision=0,
                                    minimum=1, elem_id="segment")
                widgets = []
                with gr.Accordion("options (the metric's defaults)", open=False):
                    for o in page_.options:
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
