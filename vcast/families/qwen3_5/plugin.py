"""``vcast_qwen3_5``: Qwen3.5 (dense and MoE) with a pruning method attached, through lmms-eval
(prompting and video reading: :mod:`vcast.eval.qwen_plugin`; Qwen3.5 takes videos through the
Qwen3-VL processor)."""

from __future__ import annotations

from vcast.eval.qwen_plugin import VCastQwenVL
from vcast.families.qwen3_5 import FAMILY


class VCastQwen35(VCastQwenVL):
    family = FAMILY
