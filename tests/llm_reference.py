"""A naive, cache-free reference for in-LLM token dropping (test helper).

Given the language model's inputs of an untouched prefill and which video columns each drop
kept, it recomputes every logit of a greedy continuation from scratch: one row at a time, pad
columns removed, the decoder layers called one by one with an explicit float causal mask, the
sequence sliced by plain indexing at each drop layer, DeepStack features added by hand, new
tokens appended (never dropped). Nothing here shares code with the hooks it checks.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch


@contextmanager
def language_model_inputs(model: Any) -> Iterator[dict[str, Any]]:
    """Within the block, the dict fills with the keyword inputs of the language model's first call
    (the prefill), as the model made them; a hook registered before ``attach``'s runs first."""
    captured: dict[str, Any] = {}

    def grab(module: Any, args: tuple, kwargs: dict) -> None:
        if not captured:
            captured.update(kwargs)

    hook = model.model.language_model.register_forward_pre_hook(grab, with_kwargs=True)
    try:
        yield captured
    finally:
        hook.remove()


def capture_language_model_inputs(model: Any, inputs: Any) -> dict[str, Any]:
    """The keyword inputs of the language model at the prefill of an untouched ``generate``."""
    with language_model_inputs(model) as captured, torch.no_grad():
        model.generate(**inputs, max_new_tokens=1, do_sample=False)
    return captured


def video_columns(model: Any, input_ids: torch.Tensor) -> torch.Tensor:
    """BoolTensor ``[B, S]``: the droppable video tokens (LLaVA's trailing newline excluded)."""
    config = model.config
    token = getattr(config, "video_token_id", None)
    if token is None:
        token = config.video_token_index
    mask = input_ids == token
    if hasattr(model.model, "image_newline"):  # LLaVA-OneVision: the last token of each run is the newline
        ends = mask & ~torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], 1)
        mask = mask & ~ends
    return mask


def naive_logits(model: Any, captured: dict[str, Any], droppable: torch.Tensor,
                 stages: list[tuple[int, list[torch.Tensor]]], new_tokens: torch.Tensor, compact: bool = False) -> torch.Tensor:
    """float32 ``[n + 1, B, V]`` logits after the prompt and after each of ``new_tokens [B, n]``.

    ``stages``: ``(K, kept columns per row)``, columns of the language model's input sequence.
    ``compact``: the layers after a drop number the kept tokens 0, 1, ... (LLaVA only).
    """
    language_model = model.model.language_model
    embeds = captured["inputs_embeds"]
    batch, width = embeds.shape[:2]
    mask = captured.get("attention_mask")
    valid = torch.ones(batch, width, dtype=torch.bool) if mask is None else mask.bool()
    positions = captured["position_ids"]
    qwen = positions is not None and positions.dim() == 3
    deepstack = captured.get("deepstack_visual_embeds")
    visual = captured.get("visual_pos_masks")
    deepstack_offset = 0
    out = []
    for row in range(batch):
        columns = valid[row].nonzero().squeeze(1)
        steps = new_tokens.shape[1]
        x = torch.cat([embeds[row, columns], language_model.embed_tokens(new_tokens[row])], 0)
        if qwen:
            pos = positions[1:, row, columns]  # [3, S]
            nxt = pos.max() + 1 + torch.arange(steps)
            pos = torch.cat([pos, nxt.expand(3, steps)], 1)
        else:
            pos = positions[row, columns] if positions is not None else torch.arange(columns.numel())
            pos = torch.cat([pos, pos[-1] + 1 + torch.arange(steps)])
        ds_rows = torch.full((x.shape[0],), -1, dtype=torch.long)
        if deepstack is not None:
            row_visual = visual[row]
            ranks = deepstack_offset + row_visual.long().cumsum(0) - 1
            ds_rows[: columns.numel()] = torch.where(row_visual[columns], ranks[columns], -1)
            deepstack_offset += int(row_visual.sum())
        origin = torch.cat([columns, torch.full((steps,), -1)])  # input column of each token, -1 new
        drops = {layer: kept[row] for layer, kept in stages}
        for index, layer in enumerate(language_model.layers):
            if index in drops:
                gone = droppable[row, origin.clamp(min=0)] & (origin >= 0) & ~torch.isin(origin, drops[index])
                stay = ~gone
                x, origin, ds_rows = x[stay], origin[stay], ds_rows[stay]
                pos = pos[..., stay]
                if compact:
                    pos = torch.arange(x.shape[0])
            length = x.shape[0]
            causal = torch.full((length, length), torch.finfo(x.dtype).min).triu(1)[None, None]
            rotary_ids = pos[:, None, :] if qwen else pos[None]
            cos, sin = language_model.rotary_emb(x[None], rotary_ids)
            x = layer(x[None], attention_mask=causal, position_embeddings=(cos, sin), position_ids=None,
                      past_key_values=None, use_cache=False)[0]
            if deepstack is not None and index < len(deepstack):
                present = ds_rows >= 0
                x = x.clone()
                x[present] = x[present] + deepstack[index][ds_rows[present]].to(x.dtype)
        hidden = language_model.norm(x[-(steps + 1):])
        out.append(model.lm_head(hidden).float())
    return torch.stack(out, 1)
