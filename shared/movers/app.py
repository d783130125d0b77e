"""A small Gradio demo shared by every module's ``app.py`` (Hub Spaces).

Gradio is imported only here, on launch; it is not a dependency of movers.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["build", "launch"]


def build(name: str):
    """Build a Gradio interface for module `name`: one prediction per line, references per line
    (several references for one line separated by ``|||``), options as JSON."""
    import gradio as gr

    from .registry import load, module_dir

    module = load(name)
    card = (Path(module_dir(name)) / "README.md").read_text(encoding="utf-8")
    article = card.split("---", 2)[-1] if card.startswith("---") else card

    def compute(predictions: str, references: str, options: str) -> str:
        preds = [p for p in predictions.splitlines() if p.strip()]
        refs = [[r.strip() for r in line.split("|||")] for line in references.splitlines() if line.strip()]
        kwargs = json.loads(options) if options.strip() else {}
        try:
            result = module.compute(predictions=preds, references=refs, **kwargs)
        except (ValueError, TypeError) as err:
            return f"Error: {err}"
        return json.dumps(result, indent=2, ensure_ascii=False)

    return gr.Interface(
        fn=compute,
        inputs=[gr.Textbox(label="predictions (one per line)", lines=4),
                gr.Textbox(label="references (one line per prediction; several separated by |||)", lines=4),
                gr.Textbox(label="options (JSON, e.g. {\"idf\": false})", value="{}")],
        outputs=gr.Textbox(label="result"),
        title=name,
        article=article,
    )


def launch(name: str) -> None:
    build(name).launch()
