"""The tokenizer of the tiny checkpoints: a byte-level BPE (every byte is a token, so any text
round-trips) plus a family's special tokens, built offline with the ``tokenizers`` library.

Each family's tiny-checkpoint builder (``vcast/families/<name>/tiny.py``) calls
:func:`build_tokenizer` with its special tokens and chat template.
"""

from __future__ import annotations

import math
from typing import Any

# The Qwen2 tokenizer's special tokens, in its order (<|endoftext|> first, then the chat and vision
# tokens): the same 14 in every Qwen vision-language family's tokenizer. Here their ids are 256 +
# index, after the 256 byte tokens.
QWEN_SPECIALS: tuple[str, ...] = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>",
)


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable unicode map (what the ByteLevel pre-tokenizer emits)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def build_tokenizer(specials: tuple[str, ...], chat_template: str, eos: str, pad: str,
                     words: tuple[str, ...] = ()) -> Any:
    """A byte-level BPE plus ``specials`` from id 256 on.

    Token id == byte value for single bytes; each of ``words`` (ASCII, as the ByteLevel
    pre-tokenizer sees it, e.g. " seconds") becomes one token through a chain of merges, with
    ids after the specials, so frequent template text is as short as in the real tokenizer.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_map = byte_to_unicode()
    vocab = {byte_map[b]: b for b in range(256)}
    for i, tok in enumerate(specials):
        vocab[tok] = 256 + i
    merges: list[tuple[str, str]] = []
    for word in words:
        symbols = [byte_map[b] for b in word.encode()]
        prefix = symbols[0]
        for symbol in symbols[1:]:
            merges.append((prefix, symbol))
            prefix += symbol
            vocab.setdefault(prefix, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=not merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    # Registered as special tokens so they are never split; their ids are already in the vocab.
    backend.add_special_tokens(list(specials))
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=eos,
        pad_token=pad,
        unk_token=None,
        bos_token=None,
        model_max_length=131072,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = chat_template
    for i, tok in enumerate(specials):
        got = tokenizer.convert_tokens_to_ids(tok)
        if got != 256 + i:  # pragma: no cover - guards against a tokenizers behaviour change
            raise RuntimeError(f"special token {tok!r} got id {got}, expected {256 + i}")
    return tokenizer


def padded_vocab(n_tokens: int, multiple: int = 64) -> int:
    """Round the embedding rows up, as the real checkpoints do (151936 rows for ~151.7k tokens)."""
    return int(math.ceil(n_tokens / multiple) * multiple)
