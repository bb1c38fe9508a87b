"""VisionZip for video: per frame, dominant tokens by vision-encoder attention plus contextual
tokens merged around uniform-stride targets.

Paper: "VisionZip: Longer is Better but Not Necessary in Vision Language Models" (Yang et al.,
CVPR 2025). The authors' code (dvlab-research/VisionZip @3151f6d, reference_methods.md section
5.1) handles images only (CLIP, CLS-row attention, CLS always kept, pre-projector states). For
video, HoliTom's adaptation (cokeshao/HoliTom @e9b2972, ``visionzip/llava_arch.py`` L29-183,
section 5.2) applies the same image algorithm to every frame of LLaVA-OV / LLaVA-Video (no CLS:
column-mean SigLIP attention; post-projector, 2-D pooled features, attention and keys); that is
the code behind the published LLaVA rows. Three variants (``variant=``):

* ``"paper"`` (default): HoliTom's per-frame algorithm in float32 with our fixes (exact total
  budget, deterministic ties, epsilon-normalised keys, position order), described below; bf16
  and float32 input give the same result.
* ``"official"``: HoliTom's adaptation bit for bit in the input dtype
  (:mod:`baselines.visionzip_official`): ``spatial_tokens`` per frame, the release's ``topk`` /
  ``argmax`` tie order, bare-norm key division, one-hot and counts in the input dtype, output
  order ``[dominant, contextual]`` per frame (``newline_position="grid"``: the original
  LLaVA-Video order with its dominant-token misplacement). Defaults: ``dominant_ratio = 54/64``;
  ``spatial_tokens = None`` -> ``round(r * P)`` (clamped to 1..P). HoliTom's scripts pass
  SPATIAL_TOKENS = 20/30/40/50 for r = 0.10/0.15/0.20/0.25 at P = 196 (a hand-set count,
  about 200 r; no rounding of r * P gives all four: ``round`` gives 20/29/39/49, ``ceil``
  20/30/40/49), so a reproduction of their rows passes ``spatial_tokens`` explicitly (50 at
  r = 0.25). ``vision_attention`` / ``vision_keys`` are cast to ``frames``' dtype first (the
  release's come out of the tower in the model dtype). Measured against the release loaded at
  run time on CPU (scratch ``compare.py``): fp32 300/300, bf16 300/300 cases bit-equal (keep
  slots and tokens; random, nearly static, tied, zero-key, tiny-attention inputs, both newline
  modes, T = 1..16, P = 1..196); the same code computing in float32 matches only 75/300 of the
  bf16 cases, so the bf16 arithmetic matters. Deviations: ``dominant_ratio = 1`` (zero contextual tokens)
  returns the dominant tokens where the release divides by zero; ``spatial_tokens > P`` is
  clamped to P (the release fails); ``vision_keys=None`` uses ``frames`` as the metric (the
  release always has keys); grid mode's per-row newline tokens are not expressible (the
  harness's LLaVA layout has one newline per video); the adapter's attention / keys are
  computed in float32 and pooled before the cast, the release pools them in bf16 (an input
  difference, outside this method).
* ``"vidcom2_qwen"``: the VidCom2 ``qwen``-branch re-implementation @a85d485 (section 5.3, "May
  version"; :mod:`baselines.visionzip_vidcom2_qwen`) behind the paper's Qwen3-VL rows: token L2
  norm as the attention proxy (``vision_attention`` / ``vision_keys`` are ignored), kNN-density
  anchors (k = 5), plain means, ``max(1, int(P r))`` tokens per frame, each at its own or its
  anchor's index, per frame in index order, in the input dtype. Defaults: ``dominant_ratio =
  0.6``, ``k_neighbors = 5``. Measured the same way: fp32 200/200, bf16 200/200 bit-equal (keep
  and tokens; float32 arithmetic on the bf16 cases: 158/200). Its index-0 padding (a duplicate
  keep index, not expressible) cannot occur for r <= 1 (see that module).

``temporal``, ``tau`` and ``merge`` belong to ``paper``; ``spatial_tokens`` and
``newline_position`` to ``official``; ``k_neighbors`` to ``vidcom2_qwen``: setting one for
another variant is a ValueError. ``official`` and ``vidcom2_qwen`` return tokens in ``frames``'
dtype and no frame weights.

``variant="paper"`` in detail.

Per frame ``t`` with budget ``b_t``:

* ``dominant = int(b_t * dominant_ratio)`` (HoliTom's ``int(SPATIAL_TOKENS * DOMINANT_RATIO)``,
  default ratio 54/64) tokens with the highest ``vision_attention`` are kept as they are;
* ``c = b_t - dominant`` contextual tokens: the remaining ``N_rem = P - dominant`` tokens (in
  index order) get targets at ``step = max(1, N_rem // c)``, the first ``c`` of
  ``arange(0, N_rem, step)``; every other remaining token goes to its most cosine-similar target
  on ``vision_keys``; contextual token = ``target + mean(assigned)`` -- a SUM, as the official
  code computes it (``merge="sum"``); a target with nothing assigned stays itself.
  ``merge="mean"`` averages the target with its assigned tokens instead (not official).

Every frame outputs exactly ``b_t`` tokens: since ``b_t <= P`` we have ``N_rem >= c``, and
``step <= N_rem / c`` makes ``arange(0, N_rem, step)`` at least ``c`` long, so there are always
``c`` distinct targets (no padding case). ``b_t = 1`` gives ``dominant = 0`` and one contextual
token (the frame's first token plus the mean of all others), as the official arithmetic does.

Budgets: ``B = floor(r * T * P)`` exactly (:func:`vcast.budget.paper_total_budget`), split over
frames by :func:`vcast.allocation.allocate_paper` with ``k_min = 1`` when ``B >= T`` (else 0,
so some frames keep nothing):

* ``temporal="uniform"`` (default): equal weights, i.e. ``floor(B / T)`` or one more (the
  extra tokens go to the earliest frames);
* ``temporal="curvature"``: V-CAST's curvature density (softmax of the curvature of the unit
  frame means at temperature ``tau``), the "+V-CAST budgeting" variant. For ``B >= T`` it gives
  V-CAST's own budgets; for ``B < T`` V-CAST raises B to T, this method does not.

Default hyper-parameters: ``dominant_ratio = 54/64`` at every retention ratio; the per-frame
budget is ``r * P``. HoliTom's scripts use SPATIAL_TOKENS = 20/30/40/50 of P = 196 for
r ~ 0.10/0.15/0.20/0.25 (42 dominant + 8 contextual at 50); here P = 196, r = 0.25 gives 49 per
frame = 41 dominant + 8 contextual.

Model inputs (supplied by the adapters in :mod:`vcast.models`): ``vision_attention`` [T, P],
the attention each token received in the vision encoder's feature layer, averaged over heads
and queries (SigLIP/Qwen have no CLS, so HoliTom's column mean replaces the CLS row), pooled to
the LLM token grid; ``vision_keys`` [T, P, d], that layer's keys averaged over heads, pooled the
same way (the official merge metric). If ``vision_keys`` is None, the tokens themselves
(``frames``, LLM space) are the merge metric.

Output: merging. Dominant tokens keep their own position; a contextual token takes its
target's position. Tokens are returned in float32 ([K, D]).

Deliberate deviations of ``paper`` from the official code (HoliTom's adaptation):

* exact total budget ``floor(r T P)`` apportioned over frames, instead of a fixed
  ``SPATIAL_TOKENS`` per frame;
* ties in the attention ranking go to the lower token index (the official ``topk`` leaves them
  to the kernel); argmax ties in the target assignment go to the earlier target;
* everything is computed in float32 (the official code runs in the model dtype);
* keys are L2-normalised with an epsilon (the official code divides by the bare norm, so a
  zero key gives NaN);
* no CLS token exists to keep (the image version always keeps CLS);
* outputs are ordered by position (HoliTom's LLaVA-OV layout is [dominant..., contextual...]);
* ``temporal="curvature"`` and ``merge="mean"`` are not in the official code.
"""

from __future__ import annotations

import logging
from typing import Optional

import torch

from baselines.common.model_inputs import vision_attention_input, vision_keys_input
from baselines.common.selection_output import selection_from_positions
from baselines.visionzip_official import official_compress
from baselines.visionzip_vidcom2_qwen import vidcom2_qwen_compress
from vcast.allocation import allocate_paper
from vcast.budget import paper_total_budget
from vcast.frame_stats import frame_stats
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.temporal import temporal_weights
from vcast.validation import check_choice, check_int, check_positive, check_range
from vcast.variants import OFFICIAL, PAPER, VIDCOM2_QWEN, check_variant

logger = logging.getLogger(__name__)

TEMPORAL_CHOICES = ("uniform", "curvature")
MERGE_CHOICES = ("sum", "mean")
DOMINANT_RATIO = 54 / 64  # HoliTom's DOMINANT_RATIO (VisionZip README: 54 dominant, 10 contextual)
VIDCOM2_QWEN_DOMINANT_RATIO = 0.6  # VidCom2 qwen: visionzip_dominant_ratio
NEWLINE_CHOICES = ("one_token", "grid")
VARIANTS = (PAPER, OFFICIAL, VIDCOM2_QWEN)
KEY_EPS = 1e-12


def _compress_group(tokens: torch.Tensor, attention: torch.Tensor, keys: torch.Tensor,
                    budget: int, dominant_ratio: float, merge: str) -> tuple[torch.Tensor, torch.Tensor]:
    """VisionZip on G frames that share one budget ``b``.

    Args:
        tokens: [G, P, D] float32 LLM-space tokens.
        attention: [G, P] float32 attention received by each token.
        keys: [G, P, d] float32 merge metric.
        budget: ``b`` (1 <= b <= P).
    Returns:
        (local positions [G, b] LongTensor, output tokens [G, b, D] float32): dominant first,
        then contextual.
    """
    groups, tokens_per_frame, dim = tokens.shape
    dominant = int(budget * dominant_ratio)
    contextual = budget - dominant
    # Stable descending sort: equal attention -> lower index first.
    order = torch.sort(attention, dim=1, descending=True, stable=True).indices
    dominant_idx = order[:, :dominant]  # [G, dominant]
    if contextual == 0:
        return dominant_idx, torch.gather(tokens, 1, dominant_idx[..., None].expand(-1, -1, dim))

    is_dominant = torch.zeros(groups, tokens_per_frame, dtype=torch.bool, device=tokens.device)
    is_dominant.scatter_(1, dominant_idx, True)
    remaining = tokens_per_frame - dominant
    # Stable sort of the 0/1 mask lists the non-dominant tokens first, in index order.
    rest_idx = torch.sort(is_dominant.to(torch.int8), dim=1, stable=True).indices[:, :remaining]

    step = max(1, remaining // contextual)
    target_local = torch.arange(0, remaining, step, device=tokens.device)[:contextual]
    is_target = torch.zeros(remaining, dtype=torch.bool, device=tokens.device)
    is_target[target_local] = True
    target_idx = rest_idx[:, target_local]  # [G, c]
    other_idx = rest_idx[:, ~is_target]  # [G, N_rem - c]

    def take(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, idx[..., None].expand(-1, -1, x.shape[-1]))

    unit_keys = torch.nn.functional.normalize(keys, dim=-1, eps=KEY_EPS)
    similarity = torch.bmm(take(unit_keys, other_idx), take(unit_keys, target_idx).transpose(1, 2))  # [G, N_o, c]
    labels = torch.argmax(similarity, dim=2)  # first maximum: ties to the earlier target
    # One-hot bmm (as the official code does) rather than scatter_add: deterministic on CUDA.
    assign = torch.nn.functional.one_hot(labels, contextual).to(tokens.dtype)  # [G, N_o, c]
    sums = torch.bmm(assign.transpose(1, 2), take(tokens, other_idx))  # [G, c, D]
    counts = assign.sum(dim=1)[..., None]  # [G, c, 1]
    targets = take(tokens, target_idx)
    if merge == "sum":
        merged = targets + sums / counts.clamp_min(1)  # official: target + mean(assigned)
    else:
        merged = (targets + sums) / (counts + 1)
    positions = torch.cat([dominant_idx, target_idx], dim=1)
    return positions, torch.cat([take(tokens, dominant_idx), merged], dim=1)


@register_method("visionzip", inputs=("vision_attention", "vision_keys"), variants=VARIANTS,
                 variant_inputs={VIDCOM2_QWEN: ()})  # the port ranks by token norms
def visionzip_select(
    frames: torch.Tensor,
    ratio: float,
    *,
    variant: str = PAPER,
    dominant_ratio: Optional[float] = None,
    temporal: str = "uniform",
    tau: float = 0.7,
    merge: str = "sum",
    spatial_tokens: Optional[int] = None,
    newline_position: str = "one_token",
    k_neighbors: int = 5,
    vision_attention: Optional[torch.Tensor] = None,
    vision_keys: Optional[torch.Tensor] = None,
) -> Selection:
    """VisionZip per frame (module docstring) on ``frames`` [T, P, D].

    Args:
        frames: [T, P, D] LLM-space video tokens, any float dtype.
        ratio: retention ratio r in (0, 1].
        variant: ``paper`` (ours, float32) | ``official`` (HoliTom's adaptation, input dtype) |
            ``vidcom2_qwen`` (VidCom2's Qwen port, input dtype).
        dominant_ratio: share of each frame's budget kept as dominant tokens, in [0, 1]; None:
            54/64 (``paper``, ``official``) or 0.6 (``vidcom2_qwen``).
        temporal: ``uniform`` (equal per-frame budgets) | ``curvature`` (V-CAST's allocation);
            ``paper`` only.
        tau: softmax temperature of ``temporal="curvature"`` (> 0).
        merge: ``sum`` (official: target + mean of assigned) | ``mean`` (average of both);
            ``paper`` only.
        spatial_tokens: ``official`` only: SPATIAL_TOKENS per frame (1..P); None: ``round(r * P)``.
        newline_position: ``official`` only: ``one_token`` | ``grid`` (the output order).
        k_neighbors: ``vidcom2_qwen`` only: k of the kNN density (>= 1).
        vision_attention: [T, P] attention received per token (required by ``paper`` and
            ``official``; ignored by ``vidcom2_qwen``).
        vision_keys: [T, P, d] keys of the feature layer; None: ``frames`` are the merge metric
            (ignored by ``vidcom2_qwen``).
    Returns:
        Selection with ``keep`` [K], ``budgets`` [T] and ``tokens`` [K, D]: float32 and
        ``K = floor(r T P)`` for ``paper``; ``frames``' dtype and ``K = T * s`` (``official``) or
        ``T * max(1, int(P r))`` (``vidcom2_qwen``) otherwise.
    """
    variant = check_variant("visionzip", variant, VARIANTS)
    num_frames, tokens_per_frame, _ = frames.shape
    if dominant_ratio is None:
        dominant_ratio = VIDCOM2_QWEN_DOMINANT_RATIO if variant == VIDCOM2_QWEN else DOMINANT_RATIO
    dominant_ratio = check_range("dominant_ratio", dominant_ratio, 0.0, 1.0)
    check_choice("temporal", temporal, TEMPORAL_CHOICES)
    tau = check_positive("tau", tau)
    check_choice("merge", merge, MERGE_CHOICES)
    check_choice("newline_position", newline_position, NEWLINE_CHOICES)
    k_neighbors = check_int("k_neighbors", k_neighbors, 1)
    if spatial_tokens is not None:
        spatial_tokens = min(check_int("spatial_tokens", spatial_tokens, 1), tokens_per_frame)  # release: fails
    _check_variant_params(variant, temporal, merge, spatial_tokens, newline_position, k_neighbors)
    if variant == VIDCOM2_QWEN:
        return _vidcom2_qwen_selection(frames, ratio, dominant_ratio, k_neighbors)
    device = frames.device
    attention = vision_attention_input("visionzip", vision_attention, num_frames, tokens_per_frame, device)
    if vision_keys is not None:
        vision_keys = vision_keys_input(vision_keys, num_frames, tokens_per_frame, device)
    if variant == OFFICIAL:
        if spatial_tokens is None:
            spatial_tokens = min(tokens_per_frame, max(1, round(ratio * tokens_per_frame)))
        return _official_selection(frames, attention, vision_keys, spatial_tokens, dominant_ratio, newline_position)
    total = paper_total_budget(ratio, num_frames, tokens_per_frame, 0)
    k_min = 1 if total >= num_frames else 0
    if temporal == "curvature":
        density = temporal_weights("curvature", frames, frame_stats(frames).means, tau, seed=0)
    else:
        density = torch.full((num_frames,), 1.0 / num_frames, device=device)
    budgets = allocate_paper(density, total, tokens_per_frame, k_min)

    keys_source = frames if vision_keys is None else vision_keys
    positions, outputs = [], []
    budget_list = budgets.tolist()
    # Frames with equal budgets are compressed together (uniform budgets take 1-2 groups, each a
    # run of consecutive frames, which is sliced rather than copied).
    for budget in sorted(set(budget_list) - {0}):
        members = [t for t, b in enumerate(budget_list) if b == budget]
        if members[-1] - members[0] + 1 == len(members):
            pick = slice(members[0], members[-1] + 1)
            group_frames, group_attention, group_keys = frames[pick], attention[pick], keys_source[pick]
        else:
            index = torch.tensor(members, device=device)
            group_frames, group_attention, group_keys = (
                frames.index_select(0, index), attention.index_select(0, index), keys_source.index_select(0, index))
        local, merged = _compress_group(group_frames.float(), group_attention, group_keys.float(),
                                        int(budget), float(dominant_ratio), merge)
        group = torch.tensor(members, device=device)
        positions.append((local + group[:, None] * tokens_per_frame).reshape(-1))
        outputs.append(merged.reshape(-1, merged.shape[-1]))
    logger.debug("visionzip: T=%d P=%d r=%.4g -> B=%d (%s budgets, dominant_ratio=%.4g, merge=%s)",
                 num_frames, tokens_per_frame, ratio, total, temporal, dominant_ratio, merge)
    if not positions:  # B = 0 (r * T * P < 1): nothing is kept
        positions = [torch.zeros(0, dtype=torch.long, device=device)]
        outputs = [torch.zeros(0, frames.shape[-1], dtype=torch.float32, device=device)]
    return selection_from_positions(torch.cat(positions), num_frames, tokens_per_frame,
                                    tokens=torch.cat(outputs), frame_weights=density)


def _check_variant_params(variant: str, temporal: str, merge: str, spatial_tokens: Optional[int],
                          newline_position: str, k_neighbors: int) -> None:
    """Refuse a parameter the chosen variant does not have (rather than ignore it)."""
    own = {"temporal": (temporal != "uniform", (PAPER,)), "merge": (merge != "sum", (PAPER,)),
           "spatial_tokens": (spatial_tokens is not None, (OFFICIAL,)),
           "newline_position": (newline_position != "one_token", (OFFICIAL,)),
           "k_neighbors": (k_neighbors != 5, (VIDCOM2_QWEN,))}
    for name, (changed, variants) in own.items():
        if changed and variant not in variants:
            raise ValueError(f"visionzip: {name} applies to variant {variants[0]!r} only, not {variant!r}")


def _official_selection(frames: torch.Tensor, attention: torch.Tensor, keys: Optional[torch.Tensor],
                        spatial_tokens: int, dominant_ratio: float, newline_position: str) -> Selection:
    """``variant="official"``: every frame keeps ``spatial_tokens``, computed in ``frames``' dtype."""
    num_frames, tokens_per_frame, _ = frames.shape
    dtype = frames.dtype  # the release's attention and metric come out of the tower in the model dtype
    slots, tokens = official_compress(frames, attention.to(dtype), (frames if keys is None else keys).to(dtype),
                                      spatial_tokens, dominant_ratio, newline_position)
    offsets = torch.arange(num_frames, device=frames.device)[:, None] * tokens_per_frame
    logger.debug("visionzip official: T=%d P=%d s=%d dominant_ratio=%.4g %s %s", num_frames, tokens_per_frame,
                 spatial_tokens, dominant_ratio, newline_position, dtype)
    return Selection(keep=(slots + offsets).reshape(-1), tokens_per_frame=tokens_per_frame,
                     budgets=torch.full((num_frames,), slots.shape[1], dtype=torch.long, device=frames.device),
                     tokens=tokens.reshape(-1, tokens.shape[-1]))


def _vidcom2_qwen_selection(frames: torch.Tensor, ratio: float, dominant_ratio: float, k_neighbors: int) -> Selection:
    """``variant="vidcom2_qwen"``: ``max(1, int(P r))`` tokens per frame, in ``frames``' dtype."""
    num_frames, tokens_per_frame, _ = frames.shape
    local, tokens = vidcom2_qwen_compress(frames, ratio, dominant_ratio, k_neighbors)
    offsets = torch.arange(num_frames, device=frames.device)[:, None] * tokens_per_frame
    logger.debug("visionzip vidcom2_qwen: T=%d P=%d r=%.4g keep=%d dominant_ratio=%.4g k=%d %s", num_frames,
                 tokens_per_frame, ratio, local.shape[1], dominant_ratio, k_neighbors, frames.dtype)
    return Selection(keep=(local + offsets).reshape(-1), tokens_per_frame=tokens_per_frame,
                     budgets=torch.full((num_frames,), local.shape[1], dtype=torch.long, device=frames.device),
                     tokens=tokens.reshape(-1, tokens.shape[-1]))
