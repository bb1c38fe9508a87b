"""The papers that more than one registered method cites (the vision-side and in-LLM halves of one
method), written once for their ``MethodFacts``. A paper cited by one method stays in its own
``method.py``."""

from __future__ import annotations

FLASHVID = ('"FlashVID: Efficient Video Large Language Models via Training-free Tree-based Spatiotemporal '
            'Token Merging" (Fan et al., ICLR 2026)')
FRAMEFUSION = ('"FrameFusion: Combining Similarity and Importance for Video Token Reduction on Large Visual '
               'Language Models" (Fu et al., ICCV 2025)')
HOLITOM = '"HoliTom: Holistic Token Merging for Fast Video Large Language Models" (Shao et al., NeurIPS 2025)'
PRUNEVID = '"PruneVid: Visual Token Pruning for Efficient Video Large Language Models" (Huang et al., ACL 2025 Findings)'
