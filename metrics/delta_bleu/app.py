"""Hub Space demo: score predictions against (weighted) references and show the signature.

evaluate's `launch_gradio_widget` needs gradio 3.x (it uses the removed `gr.inputs`), so the shared
movers app is used instead; it reads this folder's README.md (the metric card) as the article.
Reference weights go in the options box, e.g. {"reference_weights": [[0.9, -0.4]]}.
"""
from movers.app import launch

launch("delta_bleu")
