"""FrameFusion as an in-LLM method (baselines/framefusion/): the budget formula, the layer-0
merge's reconstruction, the similarity merges on hand-built stage inputs, saturation, pruning,
no-ops after finishing, per-video state, parameter errors and the plans."""

from __future__ import annotations

import copy
import logging
import math

import pytest
import torch

import vcast
from baselines.framefusion.paper import entry_state, framefusion_choose, merge_runs, present_similarity
from baselines.framefusion.state import STATE_KEY, VideoState
from baselines.framefusion_merge.release import pruning_ratio
from vcast.families import get_family
from vcast.models.llm_plan import LLMInfo, StageChoice, StageInputs
from vcast.registry import get_method, is_llm_method, method_params

DIM = 256
PREFIX, SUFFIX = 3, 2  # text columns before and after the video


def _plan(ratio: float, layers: int, family: str = "llava_onevision", **params):
    return get_method("framefusion")(ratio, LLMInfo.of(get_family(family), layers), **params)


def _inputs(hidden_video: torch.Tensor, frames, patches, *, videos=None, attention_video=None, layer: int = 1,
            num_layers: int = 28, state: dict | None = None, seed: int = 0) -> StageInputs:
    """One row: PREFIX text tokens, the video tokens (in the given order), SUFFIX text tokens.

    ``attention_video`` [n]: the last token's attention to the video tokens (the same for every
    head; the text columns get a small share), or None for no attention."""
    generator = torch.Generator().manual_seed(seed + 1000)
    count = hidden_video.shape[0]
    text = torch.randn(PREFIX + SUFFIX, hidden_video.shape[1], generator=generator).to(hidden_video.dtype)
    hidden = torch.cat([text[:PREFIX], hidden_video, text[PREFIX:]])
    width = hidden.shape[0]
    visual = torch.arange(PREFIX, PREFIX + count)
    attention = None
    if attention_video is not None:
        row = torch.full((width,), 0.001)
        row[visual] = torch.as_tensor(attention_video, dtype=torch.float32)
        attention = (row / row.sum()).expand(2, 1, width).clone()  # [H=2, R=1, S]
    frames = torch.as_tensor(frames, dtype=torch.long)
    return StageInputs(
        stage=layer - 1, layer=layer, num_layers=num_layers, hidden=hidden, visual=visual, frames=frames,
        patches=torch.as_tensor(patches, dtype=torch.long),
        videos=torch.zeros(count, dtype=torch.long) if videos is None else torch.as_tensor(videos),
        rows=torch.tensor([width - 1]), attention=attention, entry_tokens=count, embeddings=hidden,
        entry_visual=visual, state={} if state is None else state,
    )


def _next(inputs: StageInputs, choice: StageChoice, *, layer: int, attention_video=None) -> StageInputs:
    """What the engine hands the next stage: merged tokens written, dropped tokens removed."""
    keep = torch.sort(choice.keep).values
    video = inputs.hidden[inputs.visual].clone()
    if choice.tokens is not None:
        video[choice.keep] = choice.tokens.to(video.dtype)
    return _inputs(video[keep], inputs.frames[keep], inputs.patches[keep], videos=inputs.videos[keep],
                   attention_video=attention_video, layer=layer, num_layers=inputs.num_layers, state=inputs.state)


def _chain(cosines: list[float], generator: torch.Generator) -> torch.Tensor:
    """[len+1, DIM] unit vectors whose cosine to the previous one is exactly ``cosines[t-1]``."""
    rows = [torch.nn.functional.normalize(torch.randn(DIM, generator=generator, dtype=torch.float64), dim=0)]
    for value in cosines:
        w = torch.randn(DIM, generator=generator, dtype=torch.float64)
        w = torch.nn.functional.normalize(w - (w @ rows[-1]) * rows[-1], dim=0)
        rows.append(value * rows[-1] + math.sqrt(1 - value * value) * w)
    return torch.stack(rows).float()


# The planted layout (T=4, P=5, N=20): the layer-0 merge removed 2 tokens (patch 3 of frame 1,
# patch 4 of frame 3), so 18 enter, frame 3 is present (T is found) and a_0 = 2/20 = 0.1, which is
# not below ratio_lower_bound 0.1: merging goes on.
PRESENT = [(t, i) for t in range(4) for i in range(5) if (t, i) not in ((1, 3), (3, 4))]
# Cosine of each present token to the same patch's previous PRESENT frame (0.0 = unrelated):
# patch 0 static (one run f1..f3 -> f0); patch 1 two runs (f1 -> f0, f3 -> f2); patch 3 skips its
# merged frame 1 (f2 -> f0); patch 2 and 4 never similar.
COSINES = {0: [0.99, 0.95, 0.97], 1: [0.7, 0.2, 0.98], 2: [0.3, 0.1, 0.5], 3: [0.8, 0.0], 4: [0.59, 0.1]}


def _planted(cosines=COSINES, seed: int = 0) -> tuple[torch.Tensor, list[int], list[int]]:
    generator = torch.Generator().manual_seed(seed)
    chains = {patch: _chain(values, generator) for patch, values in cosines.items()}
    seen = {patch: 0 for patch in cosines}
    rows, frames, patches = [], [], []
    for t, i in PRESENT:
        rows.append(chains[i][seen[i]])
        seen[i] += 1
        frames.append(t)
        patches.append(i)
    return torch.stack(rows), frames, patches


def _index(t: int, i: int) -> int:
    return PRESENT.index((t, i))


# Budget formula ------------------------------------------------------------------------------------
def test_pruning_ratio_hand_computed():
    # Empty list: keep share L cost / L = cost.
    assert pruning_ratio([], 0.3, 28) == pytest.approx(0.7)
    # Merges of 40%, 10%, 5%: s = 0.6, 0.54, 0.513, used = 1.653; L cost = 8.4, remain 6.747;
    # keep = 6.747 / (25 * 0.513) = 0.5260819 -> p = 0.4739181.
    assert pruning_ratio([0.4, 0.1, 0.05], 0.3, 28) == pytest.approx(1 - 6.747 / 12.825, abs=1e-12)
    # The real depth: 36 layers -> remain 10.8 - 1.653 = 9.147, keep = 9.147 / (33 * 0.513).
    assert pruning_ratio([0.4, 0.1, 0.05], 0.3, 36) == pytest.approx(1 - 9.147 / 16.929, abs=1e-12)
    # Keep share above 1 -> no pruning: s = 0.5, remain 25.2 - 0.5, 24.7 / 13.5 > 1.
    assert pruning_ratio([0.5], 0.9, 28) == 0.0


def test_pruning_ratio_cost_too_small():
    with pytest.raises(ValueError, match="cost is too small"):
        pruning_ratio([0.0], 0.02, 28)  # L cost = 0.56 < used = 1
    with pytest.raises(ValueError, match="cost is too small"):
        pruning_ratio([0.1], 0.25, 2)  # 0.5 < 0.9
    assert pruning_ratio([0.5], 0.25, 2) == pytest.approx(1.0)  # remain exactly 0 -> keep nothing


# The layer-0 merge's reconstruction ----------------------------------------------------------------------
def test_entry_state_branches():
    frames = torch.tensor([t for t, _ in PRESENT])
    state = entry_state(frames, 0.3, 0.1)  # cap floor(0.7 * 20) = 14 > 2 removed
    assert state.sparsity_list == [0.1] and state.original_tokens == 20
    assert not state.finish_merging and not state.finish_pruning
    assert entry_state(frames, 0.3, 0.11).finish_merging  # 0.1 < 0.11: saturated at layer 0
    # Capped: 6 of 20 remain at cost 0.3 (14 removed = the cap): both flags.
    capped = entry_state(torch.tensor([0, 0, 0, 0, 0, 3]), 0.3, 0.1)
    assert capped.original_tokens == 20 and capped.finish_merging and capped.finish_pruning
    assert capped.sparsity_list == []


@pytest.mark.parametrize("ratio,static", [(0.3, 10), (0.3, 3), (0.5, 40), (0.25, 0), (0.2, 45)])
def test_entry_state_matches_framefusion_merge(ratio, static):
    # Run the real pre-LLM merge, then reconstruct its outcome from the frames it kept.
    generator = torch.Generator().manual_seed(static)
    x = torch.randn(6, 10, 64, generator=generator).view(60, 64)
    for index in sorted((torch.randperm(50, generator=generator)[:static] + 10).tolist()):
        x[index] = x[index - 10]  # a copy of the same patch one frame earlier: cosine 1
    x = x.view(6, 10, 64)
    candidates = int((torch.nn.functional.cosine_similarity(x[1:], x[:-1], dim=-1) >= 0.6).sum())
    assert candidates == static
    sel = vcast.select(x, ratio, method="framefusion_merge", threshold=0.6)
    state = entry_state(sel.keep // 10, ratio, 0.1)
    cap = math.floor((1 - ratio) * 60 + 1e-9)
    assert state.original_tokens == 60
    if candidates >= cap:
        assert state.finish_merging and state.finish_pruning and sel.keep.numel() == 60 - cap
    else:
        assert state.sparsity_list == [pytest.approx(candidates / 60)]
        assert state.finish_merging == (candidates / 60 < 0.1) and not state.finish_pruning


def test_entry_state_limit_when_whole_last_frames_were_merged():
    # The documented limit of the reconstruction: the layer-0 merge took frames 4 and 5 entirely
    # (6 x 10 tokens, 48 merged, the capped branch at cost 0.2), so only frames 0..3 are seen,
    # N is taken as 40, not 60, and 28 of 40 removed reads as the merge-all branch (a_0 = 0.7).
    frames = torch.tensor([0] * 10 + [1, 3])  # 12 = 60 - 48 left, the last seen frame is 3
    state = entry_state(frames, 0.2, 0.1)
    assert state.original_tokens == 40 and state.sparsity_list == [pytest.approx(28 / 40)]


# The similarity merge -----------------------------------------------------------------------------------
def test_present_similarity_uses_previous_present_frame():
    hidden, frames, patches = _planted()
    sims = present_similarity(hidden, torch.tensor(frames), torch.tensor(patches))
    for i, values in COSINES.items():
        present = [t for t, j in PRESENT if j == i]
        assert sims[_index(present[0], i)] == float("-inf")
        for t, value in zip(present[1:], values):
            assert sims[_index(t, i)].item() == pytest.approx(value, abs=1e-5)


def test_planted_runs_merge_into_earliest_frame_as_unweighted_mean():
    hidden, frames, patches = _planted()
    inputs = _inputs(hidden, frames, patches)
    choice = framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    # Candidates (cos >= 0.6): p0 f1,f2,f3; p1 f1, f3; p3 f2 -> 6 of 18, a = 1/3; the cap is
    # floor(u 18) with u = 1 - (8.4 - 0.9) / (27 * 0.9) = 0.691 -> 12 > 6: merge all.
    merged = {(1, 0), (2, 0), (3, 0), (1, 1), (3, 1), (2, 3)}
    assert choice.keep.tolist() == [k for k, fi in enumerate(PRESENT) if fi not in merged]
    assert choice.tokens.shape == (12, DIM) and choice.tokens.dtype == torch.float32
    row = {k: r for r, k in enumerate(choice.keep.tolist())}
    means = {
        (0, 0): hidden[[_index(t, 0) for t in range(4)]].mean(0),
        (0, 1): hidden[[_index(0, 1), _index(1, 1)]].mean(0),
        (2, 1): hidden[[_index(2, 1), _index(3, 1)]].mean(0),
        (0, 3): hidden[[_index(0, 3), _index(2, 3)]].mean(0),
    }
    for (t, i), mean in means.items():
        assert torch.allclose(choice.tokens[row[_index(t, i)]], mean, atol=1e-6)
    for k in set(row) - {_index(t, i) for t, i in means}:
        assert torch.equal(choice.tokens[row[k]], hidden[k])  # untouched tokens keep their state
    state = inputs.state[STATE_KEY][0]
    assert state.sparsity_list == [0.1, pytest.approx(6 / 18)]
    assert not state.finish_merging and not state.finish_pruning


def test_merge_matches_framefusion_merge_on_a_full_grid():
    # Same rule as the pre-LLM merge: a full T x P grid, every candidate merged.
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(5, 7, 32, generator=generator)
    x[2:4, :3] = x[1, :3] + 0.05 * torch.randn(2, 3, 32, generator=generator)  # static runs
    frames = torch.arange(5).repeat_interleave(7)
    patches = torch.arange(7).repeat(5)
    sims = present_similarity(x.view(35, 32), frames, patches)
    candidate = sims >= 0.6
    assert int(candidate.sum()) == 6
    sel = vcast.select(x, 0.5, method="framefusion_merge", threshold=0.6)  # cap 17 > 6: all merge
    kept, grown, means = merge_runs(x.view(35, 32), frames, patches, candidate)
    assert torch.equal(kept, sel.keep)
    tokens = x.view(35, 32).clone()
    tokens[grown] = means
    assert torch.allclose(tokens[kept], sel.tokens, atol=1e-6)


def test_capped_merge_takes_the_most_similar_and_finishes():
    hidden, frames, patches = _planted()
    inputs = _inputs(hidden, frames, patches)
    # cost 0.8: entry cap floor(0.2 * 20) = 4 > 2, a_0 = 0.1; then u = 1 - (22.4 - 0.9) / 24.3
    # = 0.1152 -> cap floor(2.074) = 2 <= 6 candidates: the two most similar (0.99: p0 f1 and
    # 0.98: p1 f3) merge, both flags set, nothing appended.
    assert math.floor(pruning_ratio([0.1], 0.8, 28) * 18) == 2
    choice = framefusion_choose(inputs, cost=0.8, threshold=0.6, ratio_lower_bound=0.1)
    dropped = sorted(set(range(18)) - set(choice.keep.tolist()))
    assert dropped == sorted([_index(1, 0), _index(3, 1)])
    row = {k: r for r, k in enumerate(choice.keep.tolist())}
    assert torch.allclose(choice.tokens[row[_index(0, 0)]], hidden[[_index(0, 0), _index(1, 0)]].mean(0), atol=1e-6)
    assert torch.allclose(choice.tokens[row[_index(2, 1)]], hidden[[_index(2, 1), _index(3, 1)]].mean(0), atol=1e-6)
    state = inputs.state[STATE_KEY][0]
    assert state.finish_merging and state.finish_pruning and state.sparsity_list == [0.1]


def test_capped_merge_ties_go_to_the_lower_index():
    # Patches 0, 1, 2 carry the same vectors: three exactly tied candidates (frame 1, cosine 0.95)
    # for a cap of 2 (cost 0.8, as above): the two lower indices, patches 0 and 1, merge.
    cosines = {0: [0.95, 0.1, 0.1], 1: [0.1, 0.1, 0.1], 2: [0.1, 0.1, 0.1], 3: [0.1, 0.1], 4: [0.1, 0.1]}
    hidden, frames, patches = _planted(cosines)
    for t in range(4):
        hidden[_index(t, 1)] = hidden[_index(t, 2)] = hidden[_index(t, 0)]
    sims = present_similarity(hidden, torch.tensor(frames), torch.tensor(patches))
    assert sims[_index(1, 0)] == sims[_index(1, 1)] == sims[_index(1, 2)]
    choice = framefusion_choose(_inputs(hidden, frames, patches), cost=0.8, threshold=0.6, ratio_lower_bound=0.1)
    assert sorted(set(range(18)) - set(choice.keep.tolist())) == [_index(1, 0), _index(1, 1)]


@pytest.mark.parametrize("cost,capped", [(0.3, False), (0.6156, True)])
def test_boundary_step_of_exactly_the_lower_bound_and_the_cap(cost, capped):
    # A full 4 x 5 grid after one earlier step of 0.3; 2 tokens copy their predecessor: a = 2/20 =
    # 0.1, not below ratio_lower_bound 0.1. cost 0.3: u = 1 - (8.4 - 0.7) / (27 * 0.7) = 0.593,
    # cap 11 > 2: merged, appended, merging goes on. cost 0.6156: u = 1 - (17.2368 - 0.7) / 18.9
    # = 0.125, cap floor(2.5) = 2 = |cand|: the capped branch (integer test), both flags, no entry.
    assert math.floor(pruning_ratio([0.3], cost, 28) * 20) == (2 if capped else 11)
    hidden = torch.randn(20, DIM, generator=torch.Generator().manual_seed(11))
    hidden[7], hidden[16] = hidden[2], hidden[11]  # (1, 2) <- (0, 2); (3, 1) <- (2, 1)
    state = {STATE_KEY: {0: VideoState([0.3], False, False, 29)}}
    inputs = _inputs(hidden, torch.arange(20) // 5, torch.arange(20) % 5, state=state)
    choice = framefusion_choose(inputs, cost=cost, threshold=0.6, ratio_lower_bound=0.1)
    assert sorted(set(range(20)) - set(choice.keep.tolist())) == [7, 16]
    video = state[STATE_KEY][0]
    if capped:
        assert video.sparsity_list == [0.3] and video.finish_merging and video.finish_pruning
    else:
        assert video.sparsity_list == [0.3, 0.1] and not video.finish_merging and not video.finish_pruning


# Saturation, pruning, no-ops --------------------------------------------------------------------------------
def test_saturation_then_prune_then_no_ops():
    hidden, frames, patches = _planted()
    first = _inputs(hidden, frames, patches, layer=1)
    choice1 = framefusion_choose(first, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)  # 18 -> 12
    # Layer 2: the merged tokens are unrelated to their neighbours: 0 candidates, a = 0 < 0.1:
    # merging is finished (nothing changes).
    second = _next(first, choice1, layer=2)
    choice2 = framefusion_choose(second, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert choice2.keep.tolist() == list(range(12)) and choice2.tokens is None
    state = first.state[STATE_KEY][0]
    assert state.sparsity_list == [0.1, pytest.approx(1 / 3), 0.0]
    assert state.finish_merging and not state.finish_pruning
    # Layer 3: prune. s = 0.9, 0.6, 0.6 -> used 2.1, remain 8.4 - 2.1 = 6.3,
    # keep share 6.3 / (25 * 0.6) = 0.42 -> round(12 * 0.42) = round(5.04) = 5 tokens:
    # the five with planted high attention.
    assert 1 - pruning_ratio(state.sparsity_list, 0.3, 28) == pytest.approx(0.42)
    attention = torch.full((12,), 0.01)
    planted = [0, 3, 7, 10, 11]
    attention[planted] = torch.tensor([0.5, 0.2, 0.3, 0.4, 0.25])
    third = _next(second, choice2, layer=3, attention_video=attention)
    choice3 = framefusion_choose(third, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert sorted(choice3.keep.tolist()) == planted and choice3.tokens is None
    assert state.finish_pruning
    # Layer 4 and later: no-ops, the state stays as it is.
    fourth = _next(third, choice3, layer=4, attention_video=torch.arange(5.0))
    before = copy.deepcopy(fourth.state)
    choice4 = framefusion_choose(fourth, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert choice4.keep.tolist() == list(range(5)) and choice4.tokens is None
    assert fourth.state == before


def test_small_merge_step_finishes_merging_but_still_merges():
    # Only p0 f1 similar: 1 of 18 candidates, a = 0.056 < 0.1: merged, then merging stops.
    cosines = {0: [0.99, 0.1, 0.1], 1: [0.1, 0.1, 0.1], 2: [0.1, 0.1, 0.1], 3: [0.1, 0.1], 4: [0.1, 0.1]}
    hidden, frames, patches = _planted(cosines)
    inputs = _inputs(hidden, frames, patches)
    choice = framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert choice.keep.numel() == 17 and _index(1, 0) not in choice.keep.tolist()
    state = inputs.state[STATE_KEY][0]
    assert state.sparsity_list == [0.1, pytest.approx(1 / 18)]
    assert state.finish_merging and not state.finish_pruning


@pytest.mark.parametrize("num_layers,expected", [(28, 53), (36, 54)])
def test_prune_count_uses_the_real_depth_and_keeps_top_attention(num_layers, expected):
    # p from [0.4, 0.1, 0.05] at cost 0.3: keep share 0.5260819 (28 layers) / 0.5403155 (36):
    # round(100 * share) = 53 / 54 of 100 tokens, the highest-attention ones.
    generator = torch.Generator().manual_seed(5)
    count = 100
    attention = torch.rand(count, generator=generator)
    state = {STATE_KEY: {0: VideoState([0.4, 0.1, 0.05], True, False, 200)}}
    inputs = _inputs(torch.randn(count, 16, generator=generator), torch.arange(count) // 10, torch.arange(count) % 10,
                     attention_video=attention, num_layers=num_layers, state=state)
    choice = framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert choice.keep.numel() == expected
    assert sorted(choice.keep.tolist()) == sorted(torch.argsort(attention, descending=True)[:expected].tolist())
    assert state[STATE_KEY][0].finish_pruning


def test_prune_ties_go_to_the_lower_index():
    state = {STATE_KEY: {0: VideoState([0.4, 0.1, 0.05], True, False, 40)}}
    inputs = _inputs(torch.randn(20, 16), torch.arange(20) // 5, torch.arange(20) % 5,
                     attention_video=torch.ones(20), state=state)
    choice = framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert sorted(choice.keep.tolist()) == list(range(11))  # round(20 * 0.526) = 11, the first 11


def test_prune_without_attention_raises():
    state = {STATE_KEY: {0: VideoState([0.4], True, False, 40)}}
    inputs = _inputs(torch.randn(20, 16), torch.arange(20) // 5, torch.arange(20) % 5, state=state)
    with pytest.raises(ValueError, match="attention"):
        framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)


def test_exhausted_budget_drops_the_video_and_warns(caplog):
    # 2 layers, cost 0.25: L cost = 0.5 < s_1 = 0.9 already used by layer 0.
    hidden, frames, patches = _planted()
    inputs = _inputs(hidden, frames, patches, num_layers=2)
    with caplog.at_level(logging.WARNING, logger="baselines.framefusion"):
        choice = framefusion_choose(inputs, cost=0.25, threshold=0.6, ratio_lower_bound=0.1)
    assert choice.keep.numel() == 0 and "exhausted" in caplog.text
    state = inputs.state[STATE_KEY][0]
    assert state.finish_merging and state.finish_pruning


def test_capped_entry_is_a_no_op_from_the_first_stage():
    # Only 6 of the 20 remain (cost 0.3 cap = 14 removed): everything is finished already.
    inputs = _inputs(torch.ones(6, 8), [0, 0, 0, 0, 0, 3], [0, 1, 2, 3, 4, 0])
    choice = framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert choice.keep.tolist() == list(range(6)) and choice.tokens is None


def test_videos_have_their_own_state():
    # Video 0: the planted 18 tokens (merging); video 1: a capped entry (6 of 20 left: no-op).
    hidden, frames, patches = _planted()
    other = torch.randn(6, DIM, generator=torch.Generator().manual_seed(9))
    inputs = _inputs(torch.cat([hidden, other]), frames + [0, 0, 0, 0, 0, 3], patches + [0, 1, 2, 3, 4, 0],
                     videos=[0] * 18 + [1] * 6)
    choice = framefusion_choose(inputs, cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert choice.keep.numel() == 12 + 6
    assert set(range(18, 24)) <= set(choice.keep.tolist())
    row = {k: r for r, k in enumerate(choice.keep.tolist())}
    for k in range(18, 24):
        assert torch.equal(choice.tokens[row[k]], other[k - 18])
    states = inputs.state[STATE_KEY]
    assert states[0].sparsity_list == [0.1, pytest.approx(1 / 3)] and not states[0].finish_merging
    assert states[1].finish_merging and states[1].finish_pruning


def test_bf16_hidden_matches_float32_upcast():
    hidden, frames, patches = _planted()
    low = hidden.to(torch.bfloat16)
    a = framefusion_choose(_inputs(low, frames, patches), cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    b = framefusion_choose(_inputs(low.float(), frames, patches), cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert torch.equal(a.keep, b.keep) and a.keep.numel() == 12
    assert torch.allclose(a.tokens, b.tokens, atol=1e-6)


def test_deterministic():
    hidden, frames, patches = _planted()
    a = framefusion_choose(_inputs(hidden, frames, patches), cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    b = framefusion_choose(_inputs(hidden, frames, patches), cost=0.3, threshold=0.6, ratio_lower_bound=0.1)
    assert torch.equal(a.keep, b.keep) and torch.equal(a.tokens, b.tokens)


# Plans and parameters --------------------------------------------------------------------------------------
@pytest.mark.parametrize("family,layers,threshold", [("llava_onevision", 28, 0.6), ("qwen3_vl", 36, 0.5),
                                                     ("llava_onevision", 2, 0.6), ("qwen3_vl", 3, 0.5)])
def test_plans(family, layers, threshold):
    llm = LLMInfo.of(get_family(family), layers)
    plan = _plan(0.25, layers, family)
    plan.check(llm)
    assert [s.layer for s in plan.stages] == list(range(1, layers))
    assert all(s.queries == "last" and s.score_layer == s.layer - 1 and s.rotary and s.causal for s in plan.stages)
    assert plan.positions == "original" and plan.scores == "rows"
    assert plan.pre_method == "framefusion_merge" and plan.pre_ratio == 0.25
    assert plan.pre_params == {"threshold": threshold}
    override = _plan(0.25, layers, family, cost=0.3, similarity_lower_bound=0.7, scores="eager")
    override.check(llm)
    assert override.pre_ratio == 0.3 and override.pre_params == {"threshold": 0.7} and override.scores == "eager"
    assert override.stages[0].choose.keywords == {"cost": 0.3, "threshold": 0.7, "ratio_lower_bound": 0.1}


def test_registration():
    assert is_llm_method("framefusion")
    assert method_params("framefusion") == {"cost": None, "similarity_lower_bound": None, "ratio_lower_bound": 0.1,
                                            "num_layers": None, "scores": "rows", "variant": "paper"}
    with pytest.raises(ValueError, match="attach"):
        vcast.select(torch.randn(2, 4, 8), 0.5, method="framefusion")


@pytest.mark.parametrize("params,name", [
    ({"cost": 0.0}, "cost"), ({"cost": 1.5}, "cost"), ({"cost": float("nan")}, "cost"), ({"cost": "x"}, "cost"),
    ({"similarity_lower_bound": 1.5}, "similarity_lower_bound"), ({"ratio_lower_bound": -0.1}, "ratio_lower_bound"),
    ({"ratio_lower_bound": 2}, "ratio_lower_bound"), ({"scores": "full"}, "scores"),
])
def test_parameter_errors(params, name):
    with pytest.raises(ValueError, match=name):
        _plan(0.25, 28, **params)


# variant="official": thu-nics/FrameFusion@fbec1d2 in the model's dtype ---------------------------------------
from baselines.framefusion.official import official_choose, official_entry_state, prune_choice, prune_count  # noqa: E402
from vcast.registry import method_variants  # noqa: E402


def test_official_entry_state_reads_the_release_branch():
    # P = 4 (frame 0), last present frame 1 -> N = 8. cost 0.25: u = 0.75, int(6) = 6.
    frames = torch.tensor([0, 0, 0, 0, 1])  # removed 3 < 6: uncapped, a = 3/8
    assert official_entry_state(frames, 0.25, 0.1, 28) == VideoState([0.375], False, False, 8)
    # cost 0.6: u = 1 - 16.8 / 28 = 0.4, int(3.2) = 3 removed: the capped branch, both flags
    assert official_entry_state(frames, 0.6, 0.1, 28) == VideoState([], True, True, 8)
    # nothing removed: a = 0 < 0.1 stops merging (prune at the next stage)
    assert official_entry_state(torch.tensor([0, 0, 1, 1]), 0.25, 0.1, 28) == VideoState([0.0], True, False, 4)
    # Trailing frames merged away: the counts alone see N = 8 (a = 3/8); with the video's original
    # T * P = 16 (StageInputs.video_sizes) 11 were removed, 11 < int(0.75 * 16) = 12 and
    # 11 / 16 < 0.75: uncapped, a = 11/16, as the release recorded it.
    assert official_entry_state(frames, 0.25, 0.1, 28, original=16) == VideoState([0.6875], False, False, 16)


def test_official_merge_stage_in_bf16():
    # One patch over 3 frames, [1, 0], [2^-8, 0], [2^-8, 0] (cosines 1). Entry list [0.2]:
    # u = 1 - (7 - 0.8) / (27 * 0.8) = 0.71296... > a = 2/3: all merge into frame 0, added in bf16
    # (1 + 2^-8 rounds to 1, twice) then / 3 -> 0.333984375; a is appended, merging goes on.
    hidden = torch.tensor([[1.0, 0.0], [2.0**-8, 0.0], [2.0**-8, 0.0]], dtype=torch.bfloat16)
    inputs = _inputs(hidden, [0, 1, 2], [0, 0, 0])
    inputs.state[STATE_KEY] = {0: VideoState([0.2], False, False, 3)}
    choice = official_choose(inputs, cost=0.25, threshold=0.6, ratio_lower_bound=0.1, budget_layers=28)
    assert choice.keep.tolist() == [0]
    assert choice.tokens.dtype == torch.bfloat16 and choice.tokens.float().tolist() == [[0.333984375, 0.0]]
    assert inputs.state[STATE_KEY][0] == VideoState([0.2, 2 / 3], False, False, 3)
    # the same in float32: the exact mean 43/128
    inputs = _inputs(hidden.float(), [0, 1, 2], [0, 0, 0])
    inputs.state[STATE_KEY] = {0: VideoState([0.2], False, False, 3)}
    choice = official_choose(inputs, cost=0.25, threshold=0.6, ratio_lower_bound=0.1, budget_layers=28)
    assert choice.tokens.tolist() == [[43 / 128, 0.0]]


def test_official_merge_stage_capped_and_finished():
    # cost 0.5 with an entry list [0.6]: u = 1 - (14 - 0.4) / (27 * 0.4) < 0 -> keep share > 1 -> u = 0:
    # a >= 0 always: capped with int(0 * n) = 0 merges, both flags set, nothing changes.
    hidden = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    inputs = _inputs(hidden, [0, 1, 2], [0, 0, 0])
    inputs.state[STATE_KEY] = {0: VideoState([0.6], False, False, 3)}
    choice = official_choose(inputs, cost=0.5, threshold=0.6, ratio_lower_bound=0.1, budget_layers=28)
    assert choice.keep.tolist() == [0, 1, 2]
    assert inputs.state[STATE_KEY][0].finish_merging and inputs.state[STATE_KEY][0].finish_pruning


def test_official_prune_count_rounds_half_to_even():
    assert prune_count(10, 0.25) == 8  # 7.5 -> 8
    assert prune_count(6, 0.25) == 4  # 4.5 -> 4
    assert prune_count(2, 0.75) == 0  # 0.5 -> 0
    assert prune_count(7, 0) == 7


def test_official_prune_stage_head_mean():
    # two heads; head means over video columns 1..4: 0.25, 0.15, 0.35, 0.05 -> keep the top 2
    row = torch.tensor([[0.1, 0.2, 0.1, 0.4, 0.0, 0.2], [0.1, 0.3, 0.2, 0.3, 0.1, 0.0]])
    attention = row[:, None, :]  # [H=2, R=1, S=6]
    assert prune_choice(attention, torch.tensor([1, 2, 3, 4]), 0.5).tolist() == [0, 2]
    # as a stage: merging finished, list [0.05] -> p = 1 - (7 - 0.95) / (27 * 0.95), round(4 (1 - p)) = 1
    hidden = torch.randn(4, 8)
    inputs = _inputs(hidden, [0, 0, 1, 1], [0, 1, 0, 1], attention_video=[0.1, 0.4, 0.2, 0.3])
    inputs.state[STATE_KEY] = {0: VideoState([0.05], True, False, 4)}
    choice = official_choose(inputs, cost=0.25, threshold=0.6, ratio_lower_bound=0.1, budget_layers=28)
    assert choice.keep.tolist() == [1] and inputs.state[STATE_KEY][0].finish_pruning


def test_official_plan_and_variants():
    assert method_variants("framefusion") == ("paper", "official")
    llm = LLMInfo.of(get_family("llava_onevision"), 28)
    plan = _plan(0.25, 28, variant="official")
    plan.check(llm)
    assert plan.score_dtype == "model" and plan.score_scale == "multiply" and plan.scores == "rows"
    assert plan.pre_params == {"threshold": 0.6, "num_layers": 28, "variant": "official"}
    assert plan.stages[0].choose.func is official_choose
    assert plan.stages[0].choose.keywords["budget_layers"] == 28
    qwen = _plan(0.25, 36, "qwen3_vl", variant="official", num_layers=36)
    assert qwen.pre_params["num_layers"] == 36 and qwen.pre_params["threshold"] == 0.5
    paper = _plan(0.25, 28)
    assert paper.score_dtype == "float32" and paper.pre_params == {"threshold": 0.6}
    with pytest.raises(ValueError, match="vidcom2_qwen"):
        _plan(0.25, 28, variant="vidcom2_qwen")
    with pytest.raises(ValueError, match="num_layers"):
        _plan(0.25, 28, num_layers=0)


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_official_runs_in_the_tiny_models(arch, tiny_dirs):
    # attach + generate with variant="official" (bf16 model, pre-LLM merge and stages in bf16): runs,
    # is deterministic, and the paper variant of the same model also runs.
    import os

    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from tests.model_inputs import batch, clip

    processor = AutoProcessor.from_pretrained(tiny_dirs[arch])
    inputs = batch(arch, processor, ["What moves in this clip?"], [clip()])
    model = AutoModelForImageTextToText.from_pretrained(tiny_dirs[arch], attn_implementation="sdpa",
                                                        dtype=torch.bfloat16).eval()
    outs = []
    for variant in ("official", "official", "paper"):
        with vcast.models.attach(model, "framefusion", 0.25, variant=variant) as handle, torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=2, min_new_tokens=2, do_sample=False)
            assert handle.stats.num_layers == len(model.model.language_model.layers)
        outs.append(out)
    assert torch.equal(outs[0], outs[1])
