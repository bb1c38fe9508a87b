"""HoliTom ``variant="vidcom2_qwen"``: the VidCom2 ``qwen``-branch port for Qwen3-VL, positions included.

Follows xuyang-liu16/VidCom2 branch ``qwen`` @a85d485, ``token_compressor/holitom/core.py``
(``compress_features``) and ``token_compressor/holitom/holitom.py`` (``holitom_compression``;
the May version), the code behind the paper's Qwen3-VL HoliTom rows. It is the release's merge
(:mod:`baselines.holitom.official`) on the post-merger tokens of
one video ([T temporal patches, P, D]) with these changes:

* **attention = the tokens' L2 norm** ``frames.norm(dim=-1)`` (input dtype): ``vision_attention``
  is ignored (it may be None);
* ``phi`` is computed on ``frames.float()``; ``r`` is clamped to [0, 1];
* the defaults are the port's environment defaults: ``tau = 0.8`` at every ratio
  (``HOLITOM_T``), ``beta = 0.6``, ``D = 0``, ``K = 7``, ``max_window = 1024``;
* **positions**: the K merged tokens, in the release's order (per window the static clusters,
  then each frame's dominant and contextual tokens), are written to the slots
  ``torch.linspace(0, T*P - 1, K, dtype=torch.long)``, i.e. evenly spaced pseudo-positions over the
  whole video. Here that is ``Selection.keep`` = those slots and ``Selection.tokens`` = the tokens
  in that order (``tokens[k]`` is written at ``keep[k]``), so each output token takes the MRoPE
  (t, h, w), timestamp block and deepstack vectors of its slot, not of its source: the port's
  position drift, reproduced on purpose. ``K <= T*P`` makes the slots distinct.
  With ``K = 0`` the port fails (it indexes an empty tensor); here the selection is empty.
"""

from __future__ import annotations

import torch

from baselines.common.selection_output import selection_from_positions
from baselines.holitom.official import (
    ReleaseOptions,
    flat_tokens,
    new_generator,
    release_merge,
)
from vcast.selection import Selection

VIDCOM2_QWEN_TAU = 0.8
PORT = ReleaseOptions(phi_float32=True, clamp_ratio=True)


def vidcom2_qwen_select(frames: torch.Tensor, ratio: float, *, tau: float, beta: float, dominant_fraction: float,
                        dpc_k: int, max_window: int, seed: int) -> Selection:
    """The port's ``compress_features`` on one video ``frames`` [T, P, D] (module docstring).

    Returns:
        Selection with ``keep`` [K] = the linspace slots and ``tokens`` [K, D] in ``frames``' dtype.
    """
    num_frames, tokens_per_frame, _ = frames.shape
    attention = frames.norm(dim=-1)  # [T, P]: the port's attention proxy
    outputs, _ = release_merge(frames, attention, ratio, tau=tau, beta=beta, dominant_fraction=dominant_fraction,
                               dpc_k=dpc_k, max_window=max_window, generator=new_generator(seed), options=PORT)
    tokens = flat_tokens(outputs)
    total = num_frames * tokens_per_frame
    slots = torch.linspace(0, total - 1, tokens.shape[0], dtype=torch.long, device=frames.device)
    return selection_from_positions(slots, num_frames, tokens_per_frame, tokens=tokens)
