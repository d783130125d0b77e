"""Optimal-transport solvers shared by the metrics: one result type, numpy or torch in, same type out.

* :func:`emd` (``exact``): exact OT, network simplex (POT's C++ solver, float64); MoverScore, SMS;
  :func:`partial_emd`: the lighter side moved whole into the heavier one (unequal masses).
* :func:`unbalanced_sinkhorn_batch` (``unbalanced``): entropic OT with two KL-relaxed marginals, log
  domain, batched ``[B, n, m]``; Lazy-EMD. :func:`iterates_on_host`: whether it iterates in numpy (a CPU) or in
  torch (one launch per operation: fewer, larger batches).
* :func:`tempered_sides` (``tempered``): tempered Sinkhorn and relaxed soft alignments; TWMD/TRWMD.
* :func:`buckets`, :func:`shape_classes` (``ragged``): ragged problems grouped into padded batches of bounded
  memory (size buckets; size classes, whose padding does not depend on the company); :func:`grouped`: those
  batches held at once.
* :class:`Transport` (``common``): the result every solver returns (cost, plan, masses).
* ``pot``: POT's network simplex and array backends, loaded without POT's package import.

The solvers follow POT's backend convention (``ot.backend.get_backend``): numpy arrays in give numpy
arrays out, torch tensors give torch tensors on the same device. Every POT argument that can change a
result is passed explicitly (POT's defaults have changed across releases). Metric rules (renormalising
masses, what an empty side scores) belong to the metrics, not here: the solvers take the problem as given.
"""
from __future__ import annotations

from .common import Transport
from .exact import emd, network_simplex, partial_emd, simplex
from .ragged import buckets, grouped, padded_size, shape_classes
from .tempered import smoothed_max_sides, tempered_plans, tempered_sides, tempered_values
from .unbalanced import OVERRELAXATION, iterates_on_host, unbalanced_sinkhorn_batch

__all__ = ["Transport", "emd", "network_simplex", "simplex", "partial_emd", "unbalanced_sinkhorn_batch",
           "tempered_plans", "tempered_sides", "tempered_values", "smoothed_max_sides", "buckets",
           "grouped", "shape_classes", "padded_size", "iterates_on_host", "OVERRELAXATION"]
