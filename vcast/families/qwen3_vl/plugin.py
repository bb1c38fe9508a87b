"""``vcast_qwen3_vl``: Qwen3-VL (dense and MoE) with a pruning method attached, through lmms-eval
(prompting and video reading: :mod:`vcast.eval.qwen_plugin`, after lmms-eval 0.7.3's
``models/simple/qwen3_vl.py``)."""

from __future__ import annotations

from vcast.eval.qwen_plugin import VCastQwenVL
from vcast.families.qwen3_vl import FAMILY


class VCastQwen3VL(VCastQwenVL):
    family = FAMILY
