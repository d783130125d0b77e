"""The text layer: from texts to vectors and weights. Imports only :mod:`movers.core`.

* ``embedding``: encoders (contextual token vectors, long-text readings, layer mixes) and the texts they share;
  ``models``: where models are read (a `model` resolved, the Hub and its cache asked, tokenizer and weights loaded);
  ``families``: how each family of model is read (encoder-only, encoder-decoder, decoder-only);
  ``token_batch``: what an encoder returns, every token of many texts packed in one tensor on its device;
  ``tokens``: token ids without strings (vocabulary tables, packed ids, one tokenisation per call);
  ``embedding_cache``: vectors kept across calls (in memory or in a folder);
* ``static_vectors``: GloVe word vectors; ``sentences``: sentence splitting and word tokenisation;
  ``languages``: what the language of the texts chooses (`lang`: default encoder, sentence, word, punctuation and
  stop-word rules, ΔBLEU's tokenizer);
* ``filters``: subword, punctuation and stop-word filters; ``idf``: IDF tables; ``centering``: centring modes and
  fitted tables; ``guards``: the checks that refuse a text before a model runs.
"""
