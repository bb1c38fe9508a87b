"""What a plugin records of each ``generate`` call: one efficiency record (times, tokens, memory,
theoretical prefill FLOPs) and, when recording, one kept-token record per video.

The plugin (:class:`vcast.eval.plugin.VCastLMM`) generates and hands the pruning handle's stats of
the call here; nothing in this module touches the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from vcast.eval.efficiency import CallRecord, EfficiencyLog
from vcast.eval.input_budget import reference_video_tokens
from vcast.eval.prepared_inputs import PreparedInputs
from vcast.kept_records import Geometry, append_records, call_records
from vcast.models.flops import TERA, PrefillFlops, call_prefill_flops, vision_units
from vcast.models.stats import CallStats, SegmentStats


def prefill_flops(config: Any, stats: CallStats, tensors: Any) -> PrefillFlops:
    """The call's theoretical prefill FLOPs (:mod:`vcast.models.flops`): the vision path over the
    videos and images the processor's ``tensors`` hold, the language model per item over the
    lengths its layers saw (a prompt without videos: its unpadded length)."""
    layers = int(config.get_text_config().num_hidden_layers)
    lengths = stats.layer_lengths(layers)
    if not lengths:
        mask = tensors.get("attention_mask")
        rows = (mask.sum(1).tolist() if mask is not None
                else [tensors["input_ids"].shape[1]] * tensors["input_ids"].shape[0])
        lengths = [[int(n)] * layers for n in rows]
    return call_prefill_flops(config, vision_units(config, tensors), lengths)


class CallRecorder:
    """The efficiency log of one rank and, when ``kept_path`` is set, its kept-token file.

    ``geometries(tensors, videos)``: the plugin's token grid of each video segment of a call.
    """

    def __init__(self, efficiency: EfficiencyLog, kept_path: Optional[Path], method: str,
                 geometries: Callable[[Any, list[SegmentStats]], list[Geometry]]) -> None:
        self.efficiency = efficiency
        self.kept_path = kept_path
        self.method = method
        self.geometries = geometries

    def record(self, stats: Optional[CallStats], inputs: PreparedInputs, config: Any, tasks: Sequence[str],
               doc_ids: list[int], wall: float, output_tokens: int, attempt: Optional[int],
               prepare_s: Optional[float] = None, wait_s: Optional[float] = None) -> None:
        """Both records of one call; ``tasks[i]`` is the task of ``doc_ids[i]`` (a task group's
        batch mixes tasks, and doc ids repeat across them)."""
        if stats is None:
            raise RuntimeError("the pruning handle recorded no call: were the hooks removed?")
        self._efficiency(stats, inputs.input_budget, prefill_flops(config, stats, inputs.tensors), tasks, doc_ids,
                         wall, output_tokens, attempt, prepare_s, wait_s)
        self._kept(stats, inputs, list(tasks), doc_ids)

    def _efficiency(self, stats: CallStats, input_budget: Optional[list[dict[str, Any]]], flops: PrefillFlops,
                    tasks: Sequence[str], doc_ids: list[int], wall: float, output_tokens: int,
                    attempt: Optional[int], prepare_s: Optional[float], wait_s: Optional[float]) -> None:
        """Under an input method, ``input_budget`` (per video, see :mod:`vcast.eval.input_budget`)
        makes the total the unpruned model's video tokens, so kept / total is the share it spent."""
        total = stats.total_video_tokens
        if input_budget:  # an input method's batch with videos
            total = reference_video_tokens(input_budget, stats.segments)
        peak = stats.peak_memory_bytes
        self.efficiency.add(CallRecord(
            task=",".join(sorted(set(tasks))), doc_ids=doc_ids, tasks=list(tasks), items=len(doc_ids),
            vision_s=stats.vision_s, selection_s=stats.selection_s, prefill_s=stats.prefill_s, decode_s=stats.decode_s,
            generate_s=wall, prepare_s=prepare_s, wait_s=wait_s,
            decode_steps=stats.decode_steps, output_tokens=output_tokens,
            peak_memory_mb=None if peak is None else peak / 2**20, memory_source=stats.memory_source,
            timer=stats.timer, video_tokens_total=total,
            video_tokens_kept=stats.kept_video_tokens, prompt_tokens_before=list(stats.tokens_before),
            prompt_tokens_after=list(stats.tokens_after), video_tokens_final=stats.final_video_tokens,
            layer_retention=stats.kept_video_tokens / total if input_budget else stats.layer_retention,
            input_budget=input_budget or None, attempt=attempt,
            vision_tflops=flops.vision / TERA, llm_tflops=flops.llm / TERA,
        ))

    def _kept(self, stats: CallStats, inputs: PreparedInputs, tasks: list[str], doc_ids: list[int]) -> None:
        """One kept-token record per video of the call, appended to ``kept_path`` (when recording)."""
        if self.kept_path is None:
            return
        videos = [segment for segment in stats.segments if segment.kind == "video"]
        if not videos:
            return
        records = call_records(stats, self.method, self.geometries(inputs.tensors, videos), inputs.frame_indices,
                               tasks, doc_ids)
        append_records(self.kept_path, records)
