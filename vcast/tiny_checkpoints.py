"""Tiny random-weight Hugging Face checkpoints of the real video-LLM classes, built offline.

``build_tiny_checkpoint(arch, size, out_dir, seed)`` writes a folder that loads with
``AutoModelForImageTextToText.from_pretrained`` and ``AutoProcessor.from_pretrained`` without any
hub access: the model of the arch's family (:func:`vcast.families.family_for_arch`; each family's
``tiny`` module holds its spec and builder) with seeded random weights, a byte-level BPE tokenizer
(:mod:`vcast.tiny_tokenizer`) plus the family's special tokens, the family's chat template, and the
image and video processor configs. ``ARCHS`` lists every family's archs.

Sizes:

* ``tiny``: a forward in well under a second on CPU; for unit tests.
* ``bench``: the LLM (hidden 512 x 4 layers) dominates prefill while the vision tower stays small;
  for CPU timing of token pruning. Its processors take videos the way the released checkpoints
  do, so a clip becomes as many tokens as with the real models: Qwen3-VL with the published
  video pixel budget (64 frames of 448 x 448 -> 32 temporal patches x 14 x 14 = 196 tokens each),
  LLaVA-OneVision with the real 384 px SigLIP input (27 x 27 patches, pooled to 14 x 14 = 196).
* ``demo`` (Qwen3-VL only): the shape of the demo model that ``vcast.demo_model`` trains on the
  synthetic benchmark (text 128 wide x 4 layers, vision 64 wide x 2 blocks); random here.

"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch

from vcast.atomic_files import folder_in_place
from vcast.families import all_archs, family_for_arch

logger = logging.getLogger(__name__)

ARCHS: tuple[str, ...] = all_archs()
SIZES: tuple[str, ...] = ("tiny", "bench", "demo")


def _tiny_module(arch: str, size: str) -> Any:
    module = family_for_arch(arch).load("tiny")
    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; expected one of {', '.join(SIZES)}")
    if size not in module.SIZES:
        raise ValueError(f"size {size!r} does not exist for {arch!r} (its sizes: {', '.join(module.SIZES)})")
    return module


def checkpoint_spec(arch: str, size: str) -> dict[str, Any]:
    """The hyper-parameters ``build_tiny_checkpoint`` uses for ``(arch, size)`` (a deep copy)."""
    return _tiny_module(arch, size).checkpoint_spec(arch, size)


def build(arch: str, size: str, seed: int, words: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """Construct the model (weights seeded by ``seed``, global RNG untouched) and processor, in memory.

    ``words`` (Qwen tokenizers): extra whole-word tokens for the tokenizer, each ASCII word as the
    byte-level pre-tokenizer cuts it (``" blue"``); the demo model's are its prompts' words
    (:mod:`vcast.demo_model.vocabulary`), as a real vocabulary has them.
    """
    module = _tiny_module(arch, size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model, processor = module.build(arch, size, tuple(words))
    model.eval()
    return model, processor


def build_tiny_checkpoint(
    arch: str,
    size: str,
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    *,
    overwrite: bool = False,
) -> Path:
    """Write a random-weight checkpoint of ``arch`` at ``size`` into ``out_dir`` and return it.

    ``arch``: one of :data:`ARCHS`; ``size``: ``tiny`` | ``bench`` (| ``demo`` for ``qwen3_vl``).
    The same ``seed`` gives bit-identical weights. The folder is built beside ``out_dir`` and
    renamed into place, so a failure never leaves a half-written checkpoint. An existing non-empty
    ``out_dir`` raises ``FileExistsError`` unless ``overwrite`` is true.
    """
    _tiny_module(arch, size)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    out = Path(out_dir).expanduser().resolve()
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass overwrite=True to replace it)")
    with folder_in_place(out) as tmp:
        model, processor = build(arch, size, seed)
        n_params = sum(p.numel() for p in model.parameters())
        logger.info("built %s/%s (seed %d): %.2f M parameters", arch, size, seed, n_params / 1e6)
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
    logger.info("wrote %s", out)
    return out
