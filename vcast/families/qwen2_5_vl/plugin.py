"""``vcast_qwen2_5_vl``: Qwen2.5-VL with a pruning method attached, through lmms-eval (prompting and
video reading: :mod:`vcast.eval.qwen_plugin`, which reads as lmms-eval 0.7.3's
``models/simple/qwen2_5_vl.py`` does through ``qwen_vl_utils``). Each video's absolute time
(``second_per_grid_ts``) is the processor's, from the frames' sampled rate in their metadata."""

from __future__ import annotations

from vcast.eval.qwen_plugin import VCastQwenVL
from vcast.families.qwen2_5_vl import FAMILY


class VCastQwen25VL(VCastQwenVL):
    family = FAMILY
