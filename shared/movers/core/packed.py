"""Packed (ragged) data as flat arrays: index ranges, padded gathers and the one copy to the device.

Per-text data of many texts lives in one array with offsets (text t is ``x[offsets[t]:offsets[t + 1]]``);
these helpers build the index arrays that gather it into padded batches, on the host, in a few array
operations for any number of texts.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["ranges", "sides_of", "padded_index", "to_device", "host_tensor"]


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])``, in one pass (int64)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts) + np.arange(total, dtype=np.int64)


def sides_of(counts: np.ndarray) -> np.ndarray:
    """The side of each of ``counts.sum()`` consecutive items, side s holding ``counts[s]`` of them (the text of
    each packed token, given the texts' lengths)."""
    return np.repeat(np.arange(len(counts), dtype=np.int64), counts)


def padded_index(starts: np.ndarray, counts: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``[P, width]`` indices ``starts[p] + j`` and the mask ``j < counts[p]`` (masked entries point at
    row 0: a valid row, never read as data)."""
    j = np.arange(width, dtype=np.int64)[None, :]
    mask = j < np.asarray(counts, dtype=np.int64)[:, None]
    index = np.where(mask, np.asarray(starts, dtype=np.int64)[:, None] + j, 0)
    return index, mask


def to_device(x: Tensor, device: torch.device) -> Tensor:
    """`x` on `device`, without an operation when it is there already."""
    return x if x.device == device else x.to(device, non_blocking=False)


def host_tensor(array: np.ndarray, device: torch.device) -> Tensor:
    """A host array as a tensor on `device`: a view on the CPU, one copy to an accelerator."""
    return to_device(torch.from_numpy(np.ascontiguousarray(array)), device)

