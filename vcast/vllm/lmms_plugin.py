"""``vcast_vllm``: Qwen3-VL (dense and MoE) served by vLLM in-process, videos pruned by the plugin.

The model_args are ``vcast_qwen3_vl``'s: ``pretrained``, ``method`` (``vanilla`` or a name from
:data:`vcast.vllm.VLLM_METHODS`), ``ratio``, the method's parameters (``tau=0.7``, ...),
``max_num_frames``, ``min_pixels`` / ``max_pixels`` / ``total_pixels``, ``system_prompt``,
``batch_size`` (requests handed to vLLM per call; vLLM batches them itself), ``efficiency_dir``,
``missing_visuals``, ``record_kept``; plus vLLM's ``tensor_parallel_size``, ``dtype`` (``auto``: bfloat16 on GPU,
float32 on CPU; vLLM on CPU would otherwise run a float32 checkpoint in bf16), ``max_model_len``,
``gpu_memory_utilization``, ``kv_cache_memory_bytes`` (CPU: the KV cache size), ``enforce_eager``
(skip torch.compile: a tiny model on CPU starts in seconds instead of ~40 s), ``max_videos`` /
``max_images`` per prompt (1 / 4) and ``seed``.

Prompts and videos follow ``vcast_qwen3_vl`` (lmms-eval 0.7.3's Qwen3-VL wrapper): a system turn,
then the user turn with the videos before the text; frames read by decord with
``nframes = max_num_frames`` and resized the ``qwen_vl_utils`` way, then handed to vLLM as *one
video* with its metadata (``do_sample_frames=False``, ``do_resize=False``), so vLLM's Qwen3-VL
video path, and with it the pruning, runs. lmms-eval's own vLLM backends send frames as separate
images, which never reach the video pruning.

Per call, one :class:`vcast.eval.efficiency.CallRecord`: ``prefill_s`` is vLLM's first-token time
(scheduled to first token, vision encoding and selection included), ``decode_s`` first to last
token, ``selection_s`` the model's own ``vcast.select`` time, ``vision_s`` 0 (vLLM does not time
the encoder apart); token counts from the model (kept) and the grid (total).

Per video of every item, with ``efficiency_dir`` set and ``record_kept`` (default true), one
:class:`vcast.kept_records.KeptRecord` in ``<efficiency_dir>/../kept/rank0.jsonl``, as the Hugging
Face plugins write them: the grid is the video's ``video_grid_thw`` with the 2 x 2 merge, the kept
mask is the one the model applied, carried back from vLLM's model under each video's key
(:mod:`vcast.vllm.kept`); the stock model (``method=vanilla``) keeps every token.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, Optional

from lmms_eval import utils as lmms_utils
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import lmms
from PIL import Image
from tqdm import tqdm

from vcast.checkpoint_paths import check_local_checkpoint
from vcast.eval.efficiency import CallRecord, EfficiencyLog
from vcast.eval.missing_visuals import POLICIES as MISSING_POLICIES
from vcast.eval.missing_visuals import MissingVisualsLog
from vcast.eval.plugin import RequestsByArgs, plugin_repr, record_answers, stop_strings
from vcast.eval.plugin_args import check_frames
from vcast.eval.resume import Progress, calling_response_cache
from vcast.eval.video import UNREADABLE_VIDEO, is_video_path, qwen_resize, read_qwen_video
from vcast.families import family_of
from vcast.kept_records import append_records, merged_grid_geometry, rank_file
from vcast.validation import check_choice, check_int
from vcast.vllm.kept import NO_KEY, VIDEO_KEY, KeptVideo, records_from_stats, video_key

logger = logging.getLogger(__name__)

QWEN_PATCH_SIZE = 16
DEFAULT_MAX_NEW_TOKENS = 128


class VCastVLLM(lmms):
    """lmms-eval simple model (``generate_until`` only) running ``vllm.LLM`` with the vcast plugin."""

    is_simple = True

    def __init__(
        self,
        pretrained: str,
        method: str = "vanilla",
        ratio: Optional[float] = None,
        max_num_frames: int = 32,
        min_pixels: int = 256 * 28 * 28,
        max_pixels: int = 1605632,
        total_pixels: Optional[int] = None,
        system_prompt: Optional[str] = "You are a helpful assistant.",
        batch_size: int | str = 1,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        max_model_len: Optional[int] = None,
        gpu_memory_utilization: float = 0.9,
        kv_cache_memory_bytes: Optional[int] = None,
        enforce_eager: bool = False,
        max_videos: int = 1,
        max_images: int = 4,
        seed: int = 0,
        efficiency_dir: Optional[str] = None,
        missing_visuals: str = "skip",
        record_kept: bool = True,
        max_batch_size: Optional[int] = None,  # passed by lmms-eval's CLI; unused
        **method_params: Any,
    ) -> None:
        super().__init__()
        from transformers import AutoProcessor
        from vllm import LLM

        import vcast.vllm
        from vcast.registry import get_method

        check_int("max_num_frames", max_num_frames, 1)
        check_frames("vcast_vllm", max_num_frames)
        check_int("tensor_parallel_size", tensor_parallel_size, 1)
        if str(batch_size) == "auto" or int(batch_size) < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if min_pixels > max_pixels:
            raise ValueError(f"min_pixels ({min_pixels}) must not exceed max_pixels ({max_pixels})")
        check_choice("missing_visuals", missing_visuals, MISSING_POLICIES)
        get_method(method)
        if ratio is None:
            ratio = 1.0 if method == "vanilla" else 0.25
        self.method, self.ratio, self.max_num_frames = method, float(ratio), max_num_frames
        self.min_pixels, self.max_pixels, self.total_pixels = min_pixels, max_pixels, total_pixels
        self.system_prompt = system_prompt
        self.batch_size_per_gpu = int(batch_size)
        check_local_checkpoint(pretrained)  # a missing folder named, with its make target
        self.processor = AutoProcessor.from_pretrained(pretrained)

        engine = vcast.vllm.engine_kwargs(pretrained, method, self.ratio, dict(method_params))
        from vllm.platforms import current_platform

        cpu = current_platform.is_cpu()
        if dtype == "auto":
            dtype = "float32" if cpu else "bfloat16"
        # The engine core in this process: the plugin's counters are read through apply_model.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        options: dict[str, Any] = dict(
            model=pretrained, dtype=dtype, seed=seed, tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization, disable_log_stats=False,
            enforce_eager=str(enforce_eager).lower() in ("1", "true", "yes"),
            limit_mm_per_prompt={"video": check_int("max_videos", int(max_videos), 1),
                                 "image": check_int("max_images", int(max_images), 0)},
        )
        if max_model_len is not None:
            options["max_model_len"] = int(max_model_len)
        if kv_cache_memory_bytes is not None:
            options["kv_cache_memory_bytes"] = int(kv_cache_memory_bytes)
        self.llm = LLM(**options, **engine)
        self.pruned = method != "vanilla"
        self.video_token_id = self.processor.tokenizer.convert_tokens_to_ids("<|video_pad|>")
        self.efficiency = EfficiencyLog(efficiency_dir, 0)
        # Beside the efficiency folder, as the Hugging Face plugins write them (in a sweep: the cell's folder).
        self.kept_path: Optional[Path] = (rank_file(Path(efficiency_dir).parent, 0)
                                          if record_kept and efficiency_dir is not None else None)
        video_processor = self.processor.video_processor
        self._patch, self._merge = int(video_processor.patch_size), int(video_processor.merge_size)
        self._temporal_patch = int(video_processor.temporal_patch_size)
        from transformers import AutoConfig  # imported where the vLLM engine has already loaded it

        self._family = family_of(AutoConfig.from_pretrained(pretrained)).name
        self.missing_policy = missing_visuals
        self.missing = MissingVisualsLog(efficiency_dir, 0)
        self.efficiency_dir = None if efficiency_dir is None else Path(efficiency_dir)
        # Set by vcast.eval.run for a resumable run (as for the Hugging Face plugins).
        self.attempt: Optional[int] = None
        self.cache_identity: Optional[str] = None
        logger.info("vcast_vllm: %s (%s, tp=%d) method=%s ratio=%s params=%s", pretrained, dtype,
                    tensor_parallel_size, method, self.ratio, method_params)

    def __deepcopy__(self, memo: dict) -> "VCastVLLM":
        """The live engine itself: lmms-eval's tracker deep-copies the model it logs (the results'
        config), and a vLLM engine (queues, worker state) cannot be copied."""
        return self

    def __repr__(self) -> str:
        return plugin_repr(self)

    # lmms-eval's model interface ----------------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        return self.processor.tokenizer

    @property
    def batch_size(self) -> int:
        return self.batch_size_per_gpu

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    def loglikelihood(self, requests: list[Instance]) -> list[tuple[float, bool]]:
        raise NotImplementedError("vcast_vllm implements generate_until only")

    def generate_until_multi_round(self, requests: list[Instance]) -> list[str]:
        raise NotImplementedError("vcast_vllm implements generate_until only")

    # Requests -----------------------------------------------------------------------------------
    def _request(self, context: str, items: list[Any], task: str = "", doc_id: int = -1
                 ) -> tuple[dict[str, Any], int, list[KeptVideo]]:
        """One vLLM prompt (the chat-templated text and its videos / images), its unpruned video
        token count and its videos (for the kept-token records of item ``task`` / ``doc_id``);
        raises on an unreadable video. A pruned run's videos carry their key in their metadata."""
        from qwen_vl_utils import fetch_image

        videos, images, content, kept_videos = [], [], [], []
        video_tokens = 0
        for item in items:
            if is_video_path(item):
                decoded = read_qwen_video(item, self.max_num_frames)
                frames = qwen_resize(decoded.frames, self.min_pixels, self.max_pixels, self.total_pixels,
                                     QWEN_PATCH_SIZE)  # float [T, 3, H, W]
                metadata = {"total_num_frames": decoded.total_frames, "fps": decoded.fps,
                            "frames_indices": decoded.indices, "video_backend": "decord", "do_sample_frames": False}
                key = video_key(str(item), decoded.indices, tuple(frames.shape)) if self.pruned else NO_KEY
                if self.pruned:
                    metadata[VIDEO_KEY] = key
                videos.append((frames.permute(0, 2, 3, 1).numpy(), metadata))
                count, _, height, width = frames.shape  # multiples of 2 frames and of 32 pixels
                geometry = merged_grid_geometry(self._family, (count // self._temporal_patch, height // self._patch,
                                                               width // self._patch),
                                                self._patch, self._merge, self._temporal_patch)
                video_tokens += geometry.tokens
                kept_videos.append(KeptVideo(key=key, task=task, doc_id=int(doc_id), video=len(kept_videos),
                                             geometry=geometry, frame_indices=[int(i) for i in decoded.indices]))
                content.append({"type": "video"})
            elif isinstance(item, Image.Image):
                images.append(fetch_image({"image": item, "min_pixels": self.min_pixels, "max_pixels": self.max_pixels},
                                          image_patch_size=QWEN_PATCH_SIZE))
                content.append({"type": "image"})
            else:
                raise ValueError(f"vcast_vllm: unsupported visual {type(item).__name__} {item!r:.80} "
                                 "(expected a video path or a PIL image)")
        messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
        messages.append({"role": "user", "content": content + [{"type": "text", "text": context.replace("<image>", "")}]})
        text = self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        data: dict[str, Any] = {}
        if videos:
            data["video"] = videos
        if images:
            data["image"] = images
        prompt = {"prompt": text, "multi_modal_data": data, "mm_processor_kwargs": {"do_resize": False}}
        return prompt, video_tokens, kept_videos

    def generate_until(self, requests: list[Instance]) -> list[str]:
        """lmms-eval's order and batching (longest prompt first, grouped by gen_kwargs), greedy unless
        the task asks otherwise; answers cut at the task's ``until`` strings."""

        def by_length(args: tuple) -> tuple[int, str]:
            return -len(self.tokenizer.encode(args[0])), args[0]

        cache = calling_response_cache()  # each batch's answers go into it at once (vcast.eval.resume)
        behind = RequestsByArgs(requests)
        ordered = lmms_utils.Collator([request.args for request in requests], by_length, grouping=True)
        answers: list[str] = []
        done = Progress(self.efficiency_dir, 0, self.attempt, len(requests))
        progress = tqdm(total=len(requests), desc=f"vllm {self.method} r={self.ratio:g}")
        for chunk in ordered.get_batched(n=self.batch_size, batch_fn=None):
            contexts, all_gen_kwargs, doc_to_visual, doc_ids, tasks, splits = zip(*chunk)
            gen_kwargs = dict(all_gen_kwargs[0])
            until = self._until(gen_kwargs)
            prompts, readable, totals, videos = [], [], [], []
            for index, (context, to_visual, task, split, doc_id) in enumerate(
                    zip(contexts, doc_to_visual, tasks, splits, doc_ids)):
                try:
                    visuals = list(to_visual(self.task_dict[task][split][doc_id]) or [])
                    prompt, video_tokens, item_videos = self._request(context, visuals, task, doc_id)
                    prompts.append(prompt)
                    totals.append(video_tokens)
                    videos.extend(item_videos)
                    readable.append(index)
                except (FileNotFoundError, *UNREADABLE_VIDEO) as error:
                    if self.missing_policy == "fail":
                        raise
                    self.missing.add(task, doc_id, error)
            texts = [""] * len(chunk)
            if prompts:
                generated = self._generate(prompts, totals, gen_kwargs, [tasks[i] for i in readable],
                                           [doc_ids[i] for i in readable], videos)
                for index, text in zip(readable, generated):
                    texts[index] = text
            record_answers(self, texts, behind.take(chunk), gen_kwargs, until, answers, cache)
            done.add(len(chunk))
            progress.update(len(chunk))
        progress.close()
        return ordered.get_original(answers)

    def _until(self, gen_kwargs: dict[str, Any]) -> list[str]:
        return stop_strings(gen_kwargs, self.tokenizer.eos_token)

    def _sampling(self, gen_kwargs: dict[str, Any]) -> Any:
        from vllm import SamplingParams

        temperature = float(gen_kwargs.get("temperature") or 0.0)
        options: dict[str, Any] = {"max_tokens": int(gen_kwargs.get("max_new_tokens", DEFAULT_MAX_NEW_TOKENS)),
                                   "temperature": temperature}
        if temperature > 0 and gen_kwargs.get("top_p") is not None:
            options["top_p"] = float(gen_kwargs["top_p"])
        return SamplingParams(**options)

    def _generate(self, prompts: list[dict[str, Any]], totals: list[int], gen_kwargs: dict[str, Any],
                  tasks: list[str], doc_ids: list[int], videos: Optional[list[KeptVideo]] = None) -> list[str]:
        """Generate for one batch of prompts and record the call (and its videos' kept tokens)."""
        start = time.perf_counter()
        outputs = self.llm.generate(prompts, self._sampling(gen_kwargs), use_tqdm=False)
        wall = time.perf_counter() - start
        stats = self.llm.apply_model(lambda model: model.vcast_drain_stats())[0] if self.pruned else []
        videos = list(videos or [])
        # Only this call's videos: vLLM's profiling run (no key) leaves stats before the first call.
        keys = {video.key for video in videos}
        self._record(outputs, totals, tasks, doc_ids, wall, [s for s in stats if s.get("key", NO_KEY) in keys])
        self._record_kept(videos, stats)
        return [output.outputs[0].text for output in outputs]

    def _record_kept(self, videos: list[KeptVideo], stats: list[dict[str, Any]]) -> None:
        """Append one kept-token record per video of the call to ``kept_path`` (when recording)."""
        if self.kept_path is None or not videos:
            return
        records = records_from_stats(videos, stats if self.pruned else None, self.method, self._merge)
        append_records(self.kept_path, records)

    def _record(self, outputs: list[Any], totals: list[int], tasks: list[str], doc_ids: list[int],
                wall: float, stats: list[dict[str, Any]]) -> None:
        """One efficiency record for the call; ``stats``: the model's stats of the call's videos."""
        kept = [sum(1 for token in output.prompt_token_ids if token == self.video_token_id) for output in outputs]
        metrics = [output.metrics for output in outputs if output.metrics is not None]
        prefill = decode = 0.0
        if metrics:
            first = max(m.first_token_ts for m in metrics)
            prefill = first - min(m.scheduled_ts for m in metrics)
            decode = max(m.last_token_ts for m in metrics) - first
        self.efficiency.add(CallRecord(
            task=",".join(sorted(set(tasks))), doc_ids=list(doc_ids), tasks=list(tasks), items=len(doc_ids),
            vision_s=0.0, selection_s=sum(item["selection_s"] for item in stats), prefill_s=prefill,
            decode_s=decode, generate_s=wall,
            decode_steps=max((len(o.outputs[0].token_ids) for o in outputs), default=0) - 1,
            output_tokens=sum(len(o.outputs[0].token_ids) for o in outputs),
            peak_memory_mb=None, memory_source="none", timer="vllm_request_metrics",
            video_tokens_total=sum(totals), video_tokens_kept=sum(kept),
            prompt_tokens_before=[len(o.prompt_token_ids) + total - k for o, total, k in zip(outputs, totals, kept)],
            prompt_tokens_after=[len(o.prompt_token_ids) for o in outputs], attempt=self.attempt,
        ))
