"""HoliTom ``variant="official"`` (and the engine of ``variant="vidcom2_qwen"``): the released
outer-LLM merge, in the input dtype.

Follows cokeshao/HoliTom @e9b2972, ``holitom/llava_arch.py`` L29-411 (``cluster_dpc_knn``,
``select_static_windows``, ``merge_tokens_by_clustering``, ``merge_tokens_by_attention_density``,
``merge_tokens_by_density``, ``holitom``, ``get_static_dynamic_features`` and the video branch of
``prepare_inputs_labels_for_multimodal``), the code behind the LLaVA-OneVision / LLaVA-Video
HoliTom rows. The VidCom2 ``qwen`` port (xuyang-liu16/VidCom2 @a85d485,
``token_compressor/holitom/``) runs the same steps with three changes, selected by
:class:`ReleaseOptions` (see :mod:`baselines.holitom.vidcom2_qwen`).

On ``frames`` [T, P, D] in their own dtype (bf16 in, bf16 arithmetic out, as the release runs the
merge in the model dtype):

1. ``phi`` [T-1, P] = ``F.cosine_similarity`` of ``F.normalize``-d tokens of adjacent frames, in
   the input dtype (the Qwen port: in float32), compared ``phi > tau`` as the release does;
2. the static-window DP (:func:`baselines.holitom.static_windows.select_static_windows`: its
   integer benefits are the release's float32 values, which are exact integers below 2**24);
3. ``r' = min(r / ((N - reduced) / N), 1)``;
4. per window ``[s, e]``: static positions = ``phi > tau`` on every transition; the static set is
   ``frames[s:e+1, static].mean(0)`` (input dtype); the dynamic tokens stay per frame;
5. dynamic, per frame (batched over the window's frames as the release): budget ``ceil(n_d r')``,
   ``dominant = round(ceil(n_d r') (1 - D))`` by ``attention.topk(dominant, dim=1)`` (the release's
   call and tie order), output in index order; ``ceil(n_d r') - dominant`` contextual DPC-kNN
   clusters of the others (none with the default ``D = 0``);
6. static: ``round(n_s r')`` DPC-kNN clusters;
7. DPC-kNN as released: ``cdist`` of the float32 tokens / sqrt(D), density ``exp(-mean(k nearest
   d^2))`` with ``k = min(K, clusters)`` (self included), **plus ``rand * 1e-6``** drawn from
   ``generator`` with the release's shapes in the release's order (per window: the dynamic frames'
   ``[w, n]`` draw, if any, then the static ``[1, n_s]`` draw), delta = distance to the nearest
   denser token (the densest: the largest distance of the set), centres = ``topk`` of
   ``delta * density``, sorted by index; each other token joins the centre of smallest distance
   (``argmin``, first minimum); merged token ``beta * centre + (1 - beta) * members.mean(0)`` in the
   input dtype (a centre without members stays itself);
8. output order per window: ``[static clusters..., frame s: dominant..., contextual..., frame
   s+1: ...]``, cast to the input dtype.

Randomness: with ``generator = torch.Generator().manual_seed(seed)`` the noise equals the release's
``torch.rand`` right after ``torch.manual_seed(seed)`` on CPU (the global RNG is never touched). On
GPU the release draws from the CUDA generator, which no CPU generator reproduces; the noise only
breaks density ties (1e-6 against densities in (0, 1]), and not always: near density 1 (e.g.
``k = 1``, every density ``exp(0)``) ``1 + 1e-6 u`` in float32 has only a few levels, so two
tokens can still tie, neither is denser, and both get the largest delta (reproduced, tested).

Quirks of the input dtype, reproduced: with bf16 tokens ``phi > tau`` compares in bf16, i.e.
against ``bf16(0.8) = 0.80078125``; static means, ``beta * centre + (1 - beta) * mean`` (each
product and the sum rounded) and the outputs are bf16. On GPU the ``cdist`` / reductions of the
release run other kernels; the CPU comparison below is the bit-exact one.

Compared with the release by loading its functions at run time on CPU (a comparison outside
the project). Measured agreement with the release: docs/fidelity.md, section "HoliTom".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from baselines.common.selection_output import selection_from_positions
from baselines.holitom.static_windows import select_static_windows
from vcast.selection import Selection


@dataclass(frozen=True)
class ReleaseOptions:
    """What differs between the HoliTom release and the VidCom2 ``qwen`` port.

    Attributes:
        phi_float32: compute ``phi`` on ``frames.float()`` (the port) instead of the input dtype.
        clamp_ratio: clamp ``r`` to [0, 1] and skip the rescale when nothing would remain (the port).
    """

    phi_float32: bool = False
    clamp_ratio: bool = False


@dataclass(frozen=True)
class WindowOutput:
    """The outputs of one static window, in the release's order.

    Attributes:
        start, end: the window's frames ``[start, end]``.
        static: [c, D] merged static tokens (centre index order), input dtype.
        dynamic: per frame of the window, [d_f, D] (dominant in index order, then contextual).
    """

    start: int
    end: int
    static: torch.Tensor
    dynamic: list[torch.Tensor]


def _noise(shape: torch.Size, generator: torch.Generator, device: torch.device) -> torch.Tensor:
    """``torch.rand(shape)`` float32 from the CPU ``generator`` (same stream as the CPU global RNG)."""
    return torch.rand(shape, generator=generator, dtype=torch.float32).to(device)


def dpc_centres(x: torch.Tensor, count: int, k: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The release's DPC-kNN on a batch ``x`` [B, n, D] (any float dtype).

    Returns:
        (centres [B, count] LongTensor, ascending per row; distances [B, n, n] float32).
    """
    dim = x.shape[-1]
    dist = torch.cdist(x.float(), x.float()) / (dim ** 0.5)
    nearest = torch.topk(dist, k, dim=-1, largest=False).values
    density = (-(nearest ** 2).mean(dim=-1)).exp()
    density = density + _noise(density.shape, generator, density.device) * 1e-6
    denser = (density[:, None, :] > density[:, :, None]).type(x.dtype)  # in x's dtype, as released
    farthest = dist.flatten(1).max(dim=-1).values[:, None, None]
    delta = (dist * denser + farthest * (1 - denser)).min(dim=-1).values
    centres = (delta * density).topk(count, dim=-1).indices
    return torch.sort(centres, dim=-1)[0], dist


def merge_into_centres(x: torch.Tensor, centres: torch.Tensor, dist: torch.Tensor, beta: float) -> torch.Tensor:
    """``x`` [B, n, D], ``centres`` [B, c] ascending, ``dist`` [B, n, n] -> merged [B, c, D] in x's dtype.

    Each non-centre token (index order) joins ``argmin`` of its distances to the centres; a centre
    with members becomes ``beta * centre + (1 - beta) * members.mean(0)``.
    """
    batch, count = centres.shape
    rows = []
    for b in range(batch):  # loop over frames of a window (1 for a static set)
        is_centre = torch.zeros(x.shape[1], dtype=torch.bool, device=x.device)
        is_centre[centres[b]] = True
        others = torch.nonzero(~is_centre).squeeze(1)
        labels = dist[b].index_select(0, others).index_select(1, centres[b]).argmin(dim=-1)
        members = x[b].index_select(0, others)
        merged = []
        for i in range(count):  # loop over clusters: the mean of each in x's dtype, as released
            mask = labels == i
            centre = x[b][centres[b][i]]
            merged.append(beta * centre + (1 - beta) * members[mask].mean(dim=0) if bool(mask.any()) else centre)
        rows.append(torch.stack(merged) if merged else x.new_zeros(0, x.shape[-1]))
    return torch.stack(rows)


def _dynamic(tokens: torch.Tensor, attention: torch.Tensor, rescaled: float, dominant_fraction: float, beta: float,
             dpc_k: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One window's dynamic tokens ``tokens`` [w, n, D], ``attention`` [w, n] -> per frame [d, D]."""
    frames, count, dim = tokens.shape
    budget = math.ceil(count * rescaled)
    dominant = round(budget * (1 - dominant_fraction))
    contextual = budget - dominant
    rest = torch.ones(frames, count, dtype=torch.bool, device=tokens.device)
    if dominant > 0:
        rest.scatter_(1, attention.topk(dominant, dim=1).indices, False)
    kept = tokens[~rest].view(frames, dominant, dim)  # index order, like the release's masked_select
    if contextual <= 0:
        return list(kept.unbind(0))
    others = tokens[rest].view(frames, count - dominant, dim)
    centres, dist = dpc_centres(others, contextual, min(dpc_k, contextual), generator)
    merged = merge_into_centres(others, centres, dist, beta)
    return list(torch.cat([kept, merged], dim=1).unbind(0))


def _static(tokens: torch.Tensor, rescaled: float, beta: float, dpc_k: int,
            generator: torch.Generator) -> torch.Tensor:
    """A window's averaged static set ``tokens`` [n_s, D] -> ``round(n_s r')`` merged tokens [c, D]."""
    count = round(tokens.shape[0] * rescaled)
    if count <= 0:
        return tokens[:0]
    centres, dist = dpc_centres(tokens[None], count, min(dpc_k, count), generator)
    return merge_into_centres(tokens[None], centres, dist, beta)[0]


def release_phi(frames: torch.Tensor, phi_float32: bool) -> torch.Tensor:
    """[T, P, D] -> [T-1, P] adjacent same-position cosine of the normalised tokens."""
    x = frames.float() if phi_float32 else frames
    unit = F.normalize(x, p=2, dim=-1)
    return F.cosine_similarity(unit[:-1], unit[1:], dim=-1)


def release_merge(frames: torch.Tensor, attention: torch.Tensor, ratio: float, *, tau: float, beta: float,
                  dominant_fraction: float, dpc_k: int, max_window: int, generator: torch.Generator,
                  options: ReleaseOptions = ReleaseOptions()) -> tuple[list[WindowOutput], float]:
    """HoliTom's outer-LLM merge of ``frames`` [T, P, D] (module docstring), in ``frames``' dtype.

    Args:
        attention: [T, P] score per token for the dominant top-k (its own dtype).
        generator: CPU generator of the DPC-kNN noise.
    Returns:
        (one :class:`WindowOutput` per window in video order, ``r'``).
    """
    num_frames, tokens_per_frame, _ = frames.shape
    if options.clamp_ratio:
        ratio = float(max(0.0, min(1.0, ratio)))
    phi = release_phi(frames, options.phi_float32)
    above = phi > tau  # the release's comparison (a bf16 phi against tau)
    windows, reduced = select_static_windows(above.cpu(), max_window)
    total = num_frames * tokens_per_frame
    if options.clamp_ratio and total <= reduced:
        rescaled = ratio
    else:
        rescaled = min(ratio / ((total - reduced) / total), 1)
    outputs = []
    for start, end in windows:  # loop over windows, as the release
        if start == end:
            static_mask = torch.zeros(tokens_per_frame, dtype=torch.bool, device=frames.device)
        else:
            static_mask = torch.all(above[start:end], dim=0)
        dynamic = _dynamic(frames[start:end + 1, ~static_mask], attention[start:end + 1, ~static_mask], rescaled,
                           dominant_fraction, beta, dpc_k, generator)
        if start == end or not bool(static_mask.any()):
            static = frames.new_zeros(0, frames.shape[-1])
        else:
            static = _static(frames[start:end + 1, static_mask].mean(dim=0), rescaled, beta, dpc_k, generator)
        outputs.append(WindowOutput(start, end, static.to(frames.dtype), [d.to(frames.dtype) for d in dynamic]))
    return outputs, float(rescaled)


def official_slots(outputs: list[WindowOutput], tokens_per_frame: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots that carry the release's order: per window, the static tokens then frame ``s``'s dynamic
    tokens take the first slots of frame ``s``; each later frame's dynamic tokens the first slots of
    that frame (``c + d_s <= P`` since ``c <= n_s`` and ``d_s <= n_d``).

    Returns:
        (keep [K] ascending LongTensor, tokens [K, D] in the release's order).
    """
    slots: list[torch.Tensor] = []
    tokens: list[torch.Tensor] = []
    for window in outputs:
        for offset, dynamic in enumerate(window.dynamic):
            frame = window.start + offset
            rows = torch.cat([window.static, dynamic]) if offset == 0 else dynamic
            slots.append(frame * tokens_per_frame + torch.arange(rows.shape[0], device=rows.device))
            tokens.append(rows)
    return torch.cat(slots), torch.cat(tokens)


def flat_tokens(outputs: list[WindowOutput]) -> torch.Tensor:
    """The release's output sequence [K, D]: per window, static then each frame's dynamic tokens."""
    return torch.cat([torch.cat([w.static, *w.dynamic]) for w in outputs])


def new_generator(seed: int) -> torch.Generator:
    """CPU generator seeded like ``torch.manual_seed(seed)``."""
    return torch.Generator().manual_seed(int(seed))


def official_select(frames: torch.Tensor, ratio: float, attention: torch.Tensor, *, tau: float, beta: float,
                    dominant_fraction: float, dpc_k: int, max_window: int, seed: int) -> Selection:
    """The release on one video ``frames`` [T, P, D]; ``attention`` [T, P] is cast to ``frames``' dtype
    (the release's SigLIP attention is in the model dtype).

    Returns:
        Selection with ``keep`` [K] = :func:`official_slots` and ``tokens`` [K, D] in ``frames``' dtype.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    outputs, _ = release_merge(frames, attention.to(frames.dtype), ratio, tau=tau, beta=beta,
                               dominant_fraction=dominant_fraction, dpc_k=dpc_k, max_window=max_window,
                               generator=new_generator(seed))
    keep, tokens = official_slots(outputs, tokens_per_frame)
    return selection_from_positions(keep, num_frames, tokens_per_frame, tokens=tokens)
