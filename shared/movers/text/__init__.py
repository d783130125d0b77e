"""The text layer: from texts to vectors and weights.

Encoders (contextual token vectors, sliding windows, layer mixes), static word vectors, token filters,
sentence splitting and word tokenisation, IDF tables, centring modes and tables, and the guards that
refuse texts before a model runs. Imports only :mod:`movers.core`.
"""
