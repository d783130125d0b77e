"""The text layer: from texts to vectors and weights. Imports only :mod:`movers.core`.

* ``embedding``: encoders (contextual token vectors, long-text readings, layer mixes) and the texts they share;
  ``embedding_cache``: vectors kept across calls (in memory or in a folder);
* ``static_vectors``: GloVe word vectors; ``sentences``: sentence splitting and word tokenisation;
* ``filters``: subword, punctuation and stop-word filters; ``idf``: IDF tables; ``centering``: centring modes and
  fitted tables; ``guards``: the checks that refuse a text before a model runs.
"""
