"""Refuse an eager-score prefill that cannot fit, before it runs.

``scores="eager"`` (the official way, for comparison) needs the model loaded with
``attn_implementation="eager"``, whose attention materialises every decoder layer's full
``[B, H, S, S]`` weights: about 27 GB at 64 frames and 106 GB at 128 frames on LLaVA-OV-7B.
Left alone, that is an out-of-memory error in the middle of a run. :func:`check_eager_memory`
estimates the peak from the shapes when the prefill starts and raises a ValueError naming the
estimate and the device's free memory when it is larger.

The estimate is what transformers' ``eager_attention_forward`` (Qwen2 / Qwen3-VL text, 5.x)
holds at its peak in one layer of a ``[B, S]`` prefill with ``H`` query heads: the logits in
the model's dtype, their float32 softmax and its cast back to the model's dtype (the cast is
the same tensor for float32), i.e. 8 bytes per score for float32, bfloat16 and float16; plus the
model's additive ``[B, 1, S, S]`` eager mask, built once per forward. Layers run one after the
other and free their weights, so one layer's peak is what must fit. Not counted: the weights,
activations and KV cache, which the default path needs as well. On a hybrid model only the
softmax-attention layers materialise weights (its linear-attention layers have none); the peak of
one such layer is the same estimate.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import torch

logger = logging.getLogger(__name__)

GIB = 2**30


def eager_attention_bytes(batch: int, heads: int, length: int, dtype: torch.dtype) -> int:
    """Peak bytes the eager attention materialises in one decoder layer of a ``[B, S]`` prefill.

    ``B * H * S^2`` scores, each held as logits in ``dtype``, a float32 softmax and (unless
    ``dtype`` is float32) its cast back to ``dtype``; plus the ``[B, 1, S, S]`` mask in ``dtype``.
    """
    item = torch.empty((), dtype=dtype).element_size()
    per_score = item + 4 + (0 if dtype == torch.float32 else item)
    return batch * length * length * (heads * per_score + item)


def available_system_memory() -> int:
    """Bytes of system memory available to a new allocation: ``MemAvailable`` of
    ``/proc/meminfo`` (free plus reclaimable cache), else free pages from ``os.sysconf``."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the value is in kB
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def free_memory_bytes(device: torch.device) -> int | None:
    """Bytes free for new tensors on ``device``, or None where it cannot be read.

    CUDA: the driver's free memory (``torch.cuda.mem_get_info``) plus what PyTorch's caching
    allocator holds unused. CPU: :func:`available_system_memory`. Other devices: None.
    """
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    if device.type == "cpu":
        return available_system_memory()
    return None


def check_eager_memory(batch: int, heads: int, length: int, dtype: torch.dtype, device: torch.device,
                       free_memory: Callable[[torch.device], int | None] = free_memory_bytes) -> int:
    """Raise a ValueError when an eager-score prefill's attention cannot fit on ``device``.

    Args:
        batch, heads, length: ``B``, the query heads ``H`` and the prompt width ``S``.
        dtype: the model's (hidden states') dtype.
        device: where the language model runs.
        free_memory: ``device -> free bytes`` (None: unknown, no check); :func:`free_memory_bytes`.
    Returns:
        the estimate in bytes (:func:`eager_attention_bytes`).
    Raises:
        ValueError: naming the estimate and the free memory, when the estimate is larger.
    """
    needed = eager_attention_bytes(batch, heads, length, dtype)
    free = free_memory(device)
    if free is None:
        logger.debug("eager scores: about %.2f GiB of attention per layer; free memory on %s unknown",
                     needed / GIB, device)
        return needed
    if needed > free:
        raise ValueError(
            f"scores='eager': the eager attention of this prefill (batch {batch}, {length} tokens, {heads} heads, "
            f"{str(dtype).removeprefix('torch.')}) materialises about {needed / GIB:.2f} GiB per layer "
            f"({needed} bytes), more than the {free / GIB:.2f} GiB ({free} bytes) free on {device}; "
            "use scores='rows' (the default: the same choices without the full weights), fewer frames or "
            "a smaller batch")
    logger.debug("eager scores: about %.2f GiB of attention per layer, %.2f GiB free on %s",
                 needed / GIB, free / GIB, device)
    return needed
