"""Hub Space demo: score a prediction against references and show the signature.

evaluate's `launch_gradio_widget` needs gradio 3.x (it uses the removed `gr.inputs`), so the shared
movers app is used instead; it reads this folder's README.md (the metric card) as the article.
"""
from movers.app import launch

launch("twmd")
