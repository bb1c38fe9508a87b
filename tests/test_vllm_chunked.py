"""Pruned videos under chunked prefill and prefix caching: vLLM with the vcast plugin equals Hugging
Face + ``vcast.models.attach`` token for token (CPU, float32).

Runs in the vLLM environment (``make test-vllm``); skipped elsewhere. One engine per method (V-CAST
and the plugin's EVS) with vLLM's defaults for both features (on) and a 16-token prefill budget, so
every prompt is prefilled in 16-token steps. Each request is sent alone, so its steps start at
multiples of 16 (the model records where: ``vcast_steps``):

* one video after 0 to 15 padding tokens: across the 16 prompts a step starts at every slot of the
  video (every frame boundary, mid-frame, inside the timestamps), which the test checks from the
  recorded steps;
* two videos in one prompt;
* a shared prefix: one video with a question, then the same video with another question (the cached
  prefix covers the whole video, so only the text after it is prefilled), then the first request again;
* 16 requests in flight at once (one ``generate`` call: the engine schedules them together, each step
  giving part of its 16 tokens to the others' decodes, so steps start off the multiples of 16): twelve
  videos, four of them asked again with the other question (a cached prefix under load), and four
  with a ratio of their own (``mm_processor_kwargs={"vcast_ratio": 0.5}``).

Each answer equals HF's greedy answer for the same prompt with the method attached, and under load each
equals the same request served alone too; under load, each video's kept-token record from the engine's
stats equals the one the Hugging Face plugins make for it. The pure position arithmetic is checked for
every chunk size and cached prefix in tests/test_vllm_settings.py.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed in this environment: make setup-vllm, then "
                                           "make test-vllm runs this test with .venv-vllm's python")

import torch  # noqa: E402

from tests.model_inputs import QWEN_VIDEO_SIZE, clip  # noqa: E402
from tests.support.vllm_case import (  # noqa: E402
    FRAMES,
    NEW_TOKENS,
    RATIO,
    SIDE,
    chat_text,
    hf_generate,
    hf_video_inputs,
    vllm_metadata,
)
from vcast.kept_records import call_records, merged_grid_geometry  # noqa: E402
from vcast.vllm.kept import VIDEO_KEY, KeptVideo, records_from_stats  # noqa: E402
from vcast.vllm.settings import RATIO_KWARG  # noqa: E402

from vllm.platforms import current_platform  # noqa: E402

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not current_platform.is_cpu(), reason="defined on vLLM's CPU build (float32 on "
                                 "both sides); this vLLM is a GPU build")]

CHUNK = 16  # vLLM's prefill token budget per step
BLOCK = 32  # the KV block (the prefix cache's unit): the smallest vLLM's CPU attention takes
PAD = "x"  # one token per copy (the tiny tokenizer has no merge for it), checked below
# Two questions that share a long start, so the first one's cached blocks run past the video.
QUESTIONS = ("Look at the video closely, then say what moves.",
             "Look at the video closely, then say which color it is.")
IN_FLIGHT, VIDEOS_IN_FLIGHT = 16, 12  # requests sent together; the last four ask the first four's videos again
OWN_RATIO = 0.5  # requests 4-7's own retention ratio (the engine's is RATIO)


@pytest.fixture(scope="module")
def hf(vllm_checkpoint):
    import transformers

    processor = transformers.AutoProcessor.from_pretrained(vllm_checkpoint)
    model = transformers.Qwen3VLForConditionalGeneration.from_pretrained(vllm_checkpoint, dtype=torch.float32).eval()
    return processor, model


def _text(processor, question: str, videos: int = 1, pad: int = 0) -> str:
    return PAD * pad + chat_text(processor, question, videos)


def _hf_answer(hf, method: str, text: str, seeds: list[int]) -> list[int]:
    """HF's greedy tokens for ``text`` with one clip per seed, ``method`` attached."""
    processor, model = hf
    return hf_generate(model, hf_video_inputs(processor, text, seeds), method)


def _video_range(token_ids: list[int], config) -> tuple[int, int]:
    """The first video's slots in vLLM's prompt: after the template's outer vision start, up to its
    outer vision end (the video's own frames open with a timestamp, not a vision start)."""
    start = token_ids.index(config.vision_start_token_id) + 1
    end = start
    depth = 1
    while depth:  # the outer vision end closes the run of per-frame vision start/end pairs
        token = token_ids[end]
        depth += (token == config.vision_start_token_id) - (token == config.vision_end_token_id)
        end += 1
    return start, end - 1


def _request(text: str, seeds: list[int], ratio: float = RATIO) -> dict:
    """vLLM's prompt dict: ``text`` with one clip per seed (keyed by it), at ``ratio`` (the request's own
    where it is not the engine's)."""
    videos = [(clip(FRAMES, SIDE, seed=seed), vllm_metadata(**{VIDEO_KEY: seed})) for seed in seeds]
    own = {"mm_processor_kwargs": {RATIO_KWARG: ratio}} if ratio != RATIO else {}
    return {"prompt": text, "multi_modal_data": {"video": videos}, **own}


def _serve(llm, sampling, text: str, seeds: list[int], ratio: float = RATIO):
    """One request alone (one clip per seed, keyed by it; ``ratio`` its own where it is not the engine's):
    its greedy tokens, its output, and the prefill steps that reached its media (``vcast_steps``)."""
    llm.apply_model(lambda model: model.vcast_steps.clear())
    [output] = llm.generate(_request(text, seeds, ratio), sampling, use_tqdm=False)
    steps = llm.apply_model(lambda model: list(model.vcast_steps))[0]
    return list(output.outputs[0].token_ids), output, steps


@pytest.mark.parametrize("method", ["vcast", "evs"])
def test_chunked_prefill_and_prefix_caching_give_the_answers_of_one_prefill(vllm_checkpoint, hf, method: str) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the model in this process, for apply_model
    import transformers
    from vllm import LLM, SamplingParams

    import vcast.vllm

    processor, _ = hf
    config = transformers.AutoConfig.from_pretrained(vllm_checkpoint)
    pad_ids = processor.tokenizer(PAD * 3, add_special_tokens=False)["input_ids"]
    assert len(pad_ids) == 3 and len(set(pad_ids)) == 1, f"{PAD!r} is not one token per copy: {pad_ids}"
    kwargs = vcast.vllm.engine_kwargs(str(vllm_checkpoint), method, RATIO)
    assert "enable_chunked_prefill" not in kwargs and "enable_prefix_caching" not in kwargs
    llm = LLM(model=str(vllm_checkpoint), dtype="float32", seed=0, max_model_len=1024, enforce_eager=True,
              gpu_memory_utilization=0.1, kv_cache_memory_bytes=64 * 2**20, block_size=BLOCK,
              max_num_batched_tokens=CHUNK, limit_mm_per_prompt={"video": 2, "image": 0},
              mm_processor_kwargs={"size": QWEN_VIDEO_SIZE}, **kwargs)
    try:
        scheduler = llm.llm_engine.vllm_config.scheduler_config
        cache = llm.llm_engine.vllm_config.cache_config
        assert scheduler.enable_chunked_prefill and cache.enable_prefix_caching  # vLLM's defaults, kept
        llm.apply_model(lambda model: setattr(model, "vcast_record", True))
        sampling = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS)
        # One video, its start moved by 0-15 tokens: a step starts at every slot of it.
        starts: set[int] = set()
        length = None
        for pad in range(CHUNK):
            text = _text(processor, QUESTIONS[0], pad=pad)
            answer, output, steps = _serve(llm, sampling, text, [0])
            assert answer == _hf_answer(hf, method, text, [0]), f"{method}, {pad} padding tokens"
            begin, end = _video_range(list(output.prompt_token_ids), config)
            length = end - begin
            assert all(step["computed"] % CHUNK == 0 for step in steps), steps
            starts |= {first for step in steps for first, _ in step["slots"][:1] if first > 0}
        assert starts >= set(range(1, length)), f"no step started at slots {sorted(set(range(1, length)) - starts)}"

        # Two videos in one prompt.
        text = _text(processor, QUESTIONS[0], videos=2, pad=5)
        answer, _, steps = _serve(llm, sampling, text, [1, 2])
        assert answer == _hf_answer(hf, method, text, [1, 2]), f"{method}, two videos"
        assert any(first > 0 for step in steps for first, _ in step["slots"]), steps  # a video was split

        # A shared prefix: the second question reuses the first request's cached video.
        first, second = (_text(processor, question) for question in QUESTIONS)
        answer, _, _ = _serve(llm, sampling, first, [3])
        assert answer == _hf_answer(hf, method, first, [3])
        answer, output, steps = _serve(llm, sampling, second, [3])
        _, end = _video_range(list(output.prompt_token_ids), config)
        assert output.num_cached_tokens > end, f"the cached prefix ({output.num_cached_tokens}) stops before {end}"
        assert steps == [], "the video was cached, yet a step reached it"
        assert answer == _hf_answer(hf, method, second, [3]), f"{method}, after a cached video"
        answer, output, _ = _serve(llm, sampling, first, [3])
        assert output.num_cached_tokens > end and answer == _hf_answer(hf, method, first, [3])

        _sixteen_in_flight(llm, sampling, hf, method)
    finally:
        del llm
        gc.collect()


def _sixteen_in_flight(llm, sampling, hf, method: str) -> None:
    """:data:`IN_FLIGHT` requests in one ``generate`` call: each answer equals the same request served
    alone and HF's; each video's kept-token record from the engine's stats equals HF's."""
    processor, model = hf
    requests, texts, seeds, ratios = [], [], [], []
    for i in range(IN_FLIGHT):
        video = i % VIDEOS_IN_FLIGHT  # request 12 + k: video k again, the same padding, the other question
        seed, text = 20 + video, _text(processor, QUESTIONS[i // VIDEOS_IN_FLIGHT], pad=video)
        ratio = OWN_RATIO if 4 <= i < 8 else RATIO
        texts.append(text)
        seeds.append(seed)
        ratios.append(ratio)
        requests.append(_request(text, [seed], ratio))
    llm.apply_model(lambda model: (model.vcast_steps.clear(), model.vcast_drain_stats()))
    outputs = llm.generate(requests, sampling, use_tqdm=False)
    steps = llm.apply_model(lambda model: list(model.vcast_steps))[0]
    stats = llm.apply_model(lambda model: model.vcast_drain_stats())[0]
    # Served together: other requests' decodes took part of some step's budget (alone, every step
    # that reaches a video starts at a multiple of 16, as checked above).
    assert any(step["computed"] % CHUNK for step in steps), f"{method}: no step shared its budget"
    assert any(output.num_cached_tokens for output in outputs[VIDEOS_IN_FLIGHT:]), "no prefix reused under load"
    together = [list(output.outputs[0].token_ids) for output in outputs]
    for i, (text, seed, ratio) in enumerate(zip(texts, seeds, ratios)):
        alone, _, _ = _serve(llm, sampling, text, [seed], ratio)
        assert together[i] == alone, f"{method}, request {i} of {IN_FLIGHT} in flight: {together[i]} alone {alone}"
    prompts = [len(output.prompt_token_ids) for output in outputs]
    assert prompts[4] > prompts[VIDEOS_IN_FLIGHT - 1], "a request's own ratio did not change its prompt"
    # The kept-token records of the 12 videos, from the stats of the run under load, against HF's.
    merge = model.config.vision_config.spatial_merge_size
    for video in range(VIDEOS_IN_FLIGHT):
        seed = seeds[video]
        inputs = hf_video_inputs(processor, texts[video], [seed])
        tokens, hf_stats = hf_generate(model, inputs, method, with_stats=True, ratio=ratios[video])
        assert together[video] == tokens, f"{method}, request {video} under load against HF"
        grid = inputs["video_grid_thw"][0].tolist()
        geometry = merged_grid_geometry("qwen3_vl", grid, model.config.vision_config.patch_size, merge,
                                        model.config.vision_config.temporal_patch_size)
        (ours,) = records_from_stats([KeptVideo(seed, "clip", video, 0, geometry, list(range(FRAMES)))], stats, method)
        (theirs,) = call_records(hf_stats, method, [geometry], [list(range(FRAMES))], ["clip"], [video])
        assert ours.geometry == theirs.geometry and ours.budgets == theirs.budgets, f"{method}, video {video}"
        assert np.array_equal(ours.kept, theirs.kept), f"{method}, video {video}: the kept mask under load differs"
