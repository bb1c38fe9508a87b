"""PDrop (PyramidDrop): drop video tokens inside the LLM in stages, by the last instruction token's attention.

Paper: "PyramidDrop: Accelerating Your Large Vision-Language Models via Pyramid Visual Redundancy
Reduction" (Xing et al., CVPR 2025). Two variants (``variant=``): ``"paper"`` (default, this
docstring down to "Deviations") and ``"official"`` (described at the end).
Official code followed: Cooperx521/PyramidDrop@6444f30 (``llava/model/modeling_llama_pdrop.py``
L1220-1446), as described in inllm_methods.md section 4 (and 2, 9.2). The language model is split
into stages at ``layer_list``; before layer ``layer_list[i]`` the video tokens are ranked by the
head-mean softmax attention that the **last prompt token** pays them, computed with the **next**
layer's weights (``layer_list[i]``'s input norm, ``q_proj``/``k_proj``, rotary embedding, causal
mask, fp32 softmax over every key) on that layer's input (``LLMStage(score_layer=layer)``), and the
top ``int(N0 * lam ** (i + 1))`` stay, ``N0`` the video tokens that entered the LLM (the official
``int(N * ratio_list[i])``: every stage count is a share of the ENTRY count, floored). Positions are
re-numbered ``0..S'-1`` after every stage (``positions="compact"``); decoding continues each layer's
own compacted count. Qwen3-VL keeps its original MRoPE coordinates (its three axes cannot be
re-numbered; the engine, :mod:`vcast.models.layer_drops`, does this by itself). No pre-LLM step,
no model inputs, no randomness.

Retention ratio ``r``: the **layer-averaged retention** ``rho`` (inllm_methods.md section 2.3 (b)).
With stage boundaries ``b_0 = 0 < l_1 < ... < l_n < b_{n+1} = L`` and stage shares
``1, lam, lam^2, ..., lam^n``::

    rho(lam) = sum_{i=0..n} (b_{i+1} - b_i) * lam^i / L

(PDrop's official ``[8, 16, 24]`` on 32 layers with ``lam = 0.5`` gives 46.9%). ``rho`` increases
strictly from ``l_1 / L`` (``lam = 0``) to 1 (``lam = 1``); the planner solves ``rho(lam) = r`` by
bisection (:func:`solve_lambda`) and raises a ValueError naming ``r``, ``layer_list`` and ``L`` when
``r <= l_1 / L`` (e.g. 25% with the first drop at layer 8 of 28: the first 8 layers alone see
28.6%). ``lam=`` overrides the solve (``r`` is then ignored; the engine still reports ``rho``).
The counts are floored, so the achieved ``rho`` is at most ``r`` (a token or so per stage).

Defaults: ``layer_list`` = ``[2, 8, 16]`` on a 28-layer LLM (LLaVA-OneVision / LLaVA-Video's Qwen2-7B;
inllm_methods.md sections 4.4 and 9.2: the official ``[8, 16, 24]`` cannot reach 25% on 28 layers),
giving ``lam = 0.429`` at ``r = 0.25`` (counts 42.9% / 18.4% / 7.9% of N0). Other depths move each
layer with :func:`vcast.models.llm_plan.layer_scaled` (``round(l * L / 28)`` within ``[1, L - 1]``),
then drop duplicates: 36 layers (Qwen3-VL-8B) ``[3, 10, 21]``, ``lam = 0.420`` at 25%; 32 layers
``[2, 9, 18]``, ``lam = 0.439``; the tiny test models get ``[1]`` (2 layers: ``rho = (1 + lam) / 2``, so ``r`` must
exceed 0.5) and ``[1, 2]`` (3 layers: ``r`` must exceed 1/3), so a tiny model at ``r = 0.25``
needs ``lam=`` (no ``layer_list`` helps there: layer 0 always sees every token).
An explicit ``layer_list`` is used as given (integers, strictly increasing, in ``[1, L - 1]``).

Deviations from the official code:
- grouped-query attention is handled (``repeat_kv``-style; the official score matmul assumes
  ``H == H_kv`` and fails on Qwen2-7B, inllm_methods.md section 4.4);
- every batch row and every video of a row is ranked (the official code assumes one contiguous
  image per row, right padding only); several videos of a row are ranked together;
- a stage keeps at least one video token (``int(N0 * lam^i)`` can be 0 for tiny inputs: the
  official code would then keep none); the floor has a 1e-9 tolerance so that a ``lam`` solved
  by bisection (e.g. 0.49999999999) gives the same counts as the exact value;
- no silent truncation of the sequence to ``tokenizer_model_max_length`` (official L1418-1423);
- ties go to the lower index (``torch.topk`` order in the official code).

``variant="official"``: Cooperx521/PyramidDrop@6444f30 ``pdrop_rank_drop`` (L1292-1446) bit for
bit in its arithmetic, the same stages and positions as above, and:
- counts: stage ``i`` keeps ``int(N0 * ratio_list[i])`` (the release's ``int()`` of the entry
  count times the listed share: no tolerance, no minimum, so a stage may keep 0);
  ``ratio_list`` defaults to ``[lam, lam^2, ..., lam^n]`` (``lam`` given or solved as above;
  the release's scripts pass ``layer_list=[8, 16, 24]``, ``[0.5, 0.25, 0.125]`` on 32 layers,
  i.e. ``lam=0.5``); an explicit ``ratio_list`` (one share per stage) replaces ``lam``;
- scores in the model's dtype, as the release computes them (``LLMPlan.score_dtype = "model"``,
  ``score_scale = "divide"``): ``q k^T / sqrt(head_dim)`` in the model's dtype, float32 softmax
  rounded to it, the head mean and the mean over the one query row in it, ``topk(count)`` (its
  tie order). Measured against the release's ``pdrop_rank_drop`` loaded at run time (ast-extracted,
  ``self`` stubbed) on the same layer inputs, random Qwen2 layers with equal heads (the release
  has no GQA), 120 cases per dtype (stages 0-2, lam 0.3-0.7, tiny and near-static spans; scratch
  ``fastv/compare.py``): kept sets fp32 120/120, bf16 120/120 exact; ``paper`` on the same cases
  90/120 and 82/120. The score row is a one-row product in the release too, so the recomputation
  is the same GEMM shape (no kernel effect on CPU). The RoPE tables are the
  model's own (the release's transformers 4.37 computes ``cos``/``sin`` its own way; a
  model-version effect, not the method's). GQA, batches, several videos, no truncation: as in the
  deviations above. ``scores`` has no eager form here (next layer's weights, like ``paper``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from itertools import pairwise

from baselines.common.dpc_knn import top_indices
from baselines.common.llm_scores import last_token_scores
from vcast.models.llm_plan import (
    LLMInfo,
    LLMPlan,
    LLMStage,
    StageChoice,
    StageInputs,
    layer_averaged_retention,
    layer_scaled,
)
from vcast.registry import register_llm_method
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

logger = logging.getLogger(__name__)

REFERENCE_LAYERS = 28  # the depth the default layer list is given for (Qwen2-7B)
REFERENCE_LAYER_LIST = (2, 8, 16)  # inllm_methods.md section 9.2 (official: [8, 16, 24] on 32 layers)
FLOOR_TOLERANCE = 1e-9
VARIANTS = (PAPER, OFFICIAL)


def default_layer_list(num_layers: int) -> list[int]:
    """``[2, 8, 16]`` moved to ``num_layers`` layers (duplicates dropped, strictly increasing)."""
    layers = sorted({layer_scaled(layer, REFERENCE_LAYERS, num_layers) for layer in REFERENCE_LAYER_LIST})
    return layers


def check_layer_list(layer_list: object, num_layers: int) -> list[int]:
    """``layer_list`` as a list of strictly increasing integers in ``[1, L - 1]`` (ValueError naming it)."""
    if isinstance(layer_list, (str, bytes)) or not isinstance(layer_list, Sequence) or len(layer_list) == 0:
        raise ValueError(f"layer_list must be a non-empty list of layer indices, got {layer_list!r}")
    layers = [check_int("layer_list", layer, 1, num_layers - 1) for layer in layer_list]
    if any(b <= a for a, b in pairwise(layers)):
        raise ValueError(f"layer_list must increase strictly, got {layers}")
    return layers


def layer_average(lam: float, layer_list: Sequence[int], num_layers: int) -> float:
    """``rho(lam) = sum_i (b_{i+1} - b_i) lam^i / L`` with ``b = [0, *layer_list, L]``."""
    return layer_averaged_retention(1.0, list(layer_list), [lam**i for i in range(1, len(layer_list) + 1)], num_layers)


def solve_lambda(ratio: float, layer_list: Sequence[int], num_layers: int) -> float:
    """The ``lam`` in ``(0, 1]`` with ``rho(lam) == ratio`` (bisection on the increasing polynomial).

    Raises:
        ValueError: ``ratio <= layer_list[0] / L`` (the layers before the first drop alone
            already see that share), naming the values.
    """
    floor = layer_list[0] / num_layers
    if ratio <= floor:
        raise ValueError(
            f"PDrop cannot reach a layer-averaged retention of {ratio} with layer_list {list(layer_list)} on "
            f"{num_layers} layers: the first {layer_list[0]} layers alone already see {layer_list[0]}/{num_layers} = "
            f"{floor:.3f} of the video tokens (move the first drop earlier, ask for a ratio above {floor:.3f}, or give lam)")
    if ratio >= 1.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if layer_average(middle, layer_list, num_layers) < ratio:
            low = middle
        else:
            high = middle
    return high


def stage_count(entry_tokens: int, lam: float, stage: int) -> int:
    """Video tokens kept after stage ``stage`` (0-based): ``int(N0 * lam^(stage+1))``, at least 1."""
    return max(1, math.floor(entry_tokens * lam ** (stage + 1) + FLOOR_TOLERANCE))


def pdrop_choose(inputs: StageInputs, lam: float) -> StageChoice:
    """Keep the ``int(N0 * lam^(i+1))`` video tokens with the highest last-token attention."""
    count = min(inputs.visual.numel(), stage_count(inputs.entry_tokens, lam, inputs.stage))
    if inputs.attention is None:  # no prompt row to score with: keep the earliest tokens (ties to the lower index)
        return StageChoice(keep=top_indices(inputs.visual.new_zeros(inputs.visual.numel()).float(), count))
    return StageChoice(keep=top_indices(last_token_scores(inputs), count))


def official_count(entry_tokens: int, share: float) -> int:
    """The release's ``int(N0 * ratio)`` (truncation, may be 0)."""
    return int(entry_tokens * share)


def official_choose(inputs: StageInputs, shares: Sequence[float]) -> StageChoice:
    """The release's stage: ``topk(int(N0 * shares[i]))`` of the head-mean, row-mean attention (in its dtype)."""
    count = min(inputs.visual.numel(), official_count(inputs.entry_tokens, shares[inputs.stage]))
    if inputs.attention is None:
        return StageChoice(keep=top_indices(inputs.visual.new_zeros(inputs.visual.numel()).float(), count))
    per_key = inputs.attention.mean(0)  # [R, S]: mean over heads, in the attention's dtype
    scores = per_key.index_select(1, inputs.visual).mean(0)  # [N]: mean over the query row(s)
    return StageChoice(keep=scores.topk(count).indices)


def check_ratio_list(ratio_list: object, stages: int) -> list[float]:
    """``ratio_list`` as one share in ``[0, 1]`` per stage (ValueError naming it)."""
    if isinstance(ratio_list, (str, bytes)) or not isinstance(ratio_list, Sequence) or len(ratio_list) != stages:
        raise ValueError(f"ratio_list must give one share per stage ({stages}), got {ratio_list!r}")
    return [check_range("ratio_list", share, 0.0, 1.0) for share in ratio_list]


@register_llm_method("pdrop", variants=VARIANTS)
def pdrop_plan(ratio: float, llm: LLMInfo, *, layer_list: Sequence[int] | None = None,
               lam: float | None = None, ratio_list: Sequence[float] | None = None,
               variant: str = PAPER) -> LLMPlan:
    """Drops before each layer of ``layer_list``, shares ``lam^i`` of the entry count; see the module docstring."""
    variant = check_variant("pdrop", variant, VARIANTS)
    layers = default_layer_list(llm.num_layers) if layer_list is None else check_layer_list(layer_list, llm.num_layers)
    if ratio_list is not None:
        if variant != OFFICIAL:
            raise ValueError("ratio_list belongs to variant='official' (variant='paper' uses lam)")
        if lam is not None:
            raise ValueError("give lam or ratio_list, not both")
        shares = check_ratio_list(ratio_list, len(layers))
        logger.debug("PDrop (official) on %d layers: layer_list %s, ratio_list %s, layer-averaged retention %.4f",
                     llm.num_layers, layers, shares, layer_averaged_retention(1.0, layers, shares, llm.num_layers))
        return _official_plan(layers, shares)
    if lam is None:
        lam = solve_lambda(ratio, layers, llm.num_layers)
    else:
        lam = check_range("lam", lam, 0.0, 1.0)
        if lam == 0.0:
            raise ValueError("lam must be in (0, 1], got 0")
    logger.debug("PDrop on %d layers: layer_list %s, lam %.6f, layer-averaged retention %.4f", llm.num_layers,
                 layers, lam, layer_average(lam, layers, llm.num_layers))
    if variant == OFFICIAL:
        return _official_plan(layers, [lam ** (i + 1) for i in range(len(layers))])
    stages = tuple(
        LLMStage(layer=layer, queries="last", score_layer=layer, choose=lambda inputs, lam=lam: pdrop_choose(inputs, lam))
        for layer in layers
    )
    return LLMPlan(stages=stages, positions="compact")


def _official_plan(layers: Sequence[int], shares: Sequence[float]) -> LLMPlan:
    """The release's stages: next layer's weights, scores in the model's dtype divided by ``sqrt(head_dim)``."""
    shares = tuple(shares)
    stages = tuple(
        LLMStage(layer=layer, queries="last", score_layer=layer,
                 choose=lambda inputs, shares=shares: official_choose(inputs, shares))
        for layer in layers
    )
    return LLMPlan(stages=stages, positions="compact", score_dtype="model", score_scale="divide")
