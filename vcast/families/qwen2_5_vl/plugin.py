"""``vcast_qwen2_5_vl``: Qwen2.5-VL or Qwen2-VL (the checkpoint's ``model_type`` picks the class) with a
pruning method attached, through lmms-eval (prompting and video reading: :mod:`vcast.eval.qwen_plugin`,
which reads as lmms-eval 0.7.3's ``models/simple/qwen2_5_vl.py`` and ``qwen2_vl.py`` do through
``qwen_vl_utils``). Qwen2.5-VL's absolute time per video (``second_per_grid_ts``) is its processor's,
from the frames' sampled rate in their metadata; Qwen2-VL's processor (``Qwen2VLProcessor``) gives
none, its temporal positions being the temporal patches' indices. A Qwen2-VL model config names the
stock wrapper's prompt key (``prompt_key: qwen2_vl``)."""

from __future__ import annotations

from vcast.eval.qwen_plugin import VCastQwenVL
from vcast.families.qwen2_5_vl import FAMILY


class VCastQwen25VL(VCastQwenVL):
    family = FAMILY
