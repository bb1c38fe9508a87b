"""The demo tokenizer's extra tokens: the words of the prompts it reads and the replies it writes.

The tiny checkpoints' tokenizer is byte-level: a prompt of the synthetic benchmark is ~300 tokens
and an option's colour is 4-6 of them. A real vocabulary has these words as single tokens; so does
the demo model's, which makes its sequences about a third shorter (training time) and its reply
(``" blue"``) the same token as the option's.
"""

from __future__ import annotations

from vcast.demo_model.examples import SYSTEM_PROMPT, task_hooks
from vcast.eval.synthetic_benchmark import (
    APPEAR_QUESTION,
    COUNT_QUESTION,
    CUT_QUESTION,
    LETTERS,
    PALETTE,
)

SHAPES = ("square", "disc")
CHAT_WORDS = ("system", "user", "assistant")


def _texts() -> list[str]:
    texts = [SYSTEM_PROMPT, APPEAR_QUESTION, CUT_QUESTION, task_hooks().DEFAULT_POST_PROMPT, *CHAT_WORDS]
    texts += [COUNT_QUESTION.format(colour=colour, shape=shape) for colour in PALETTE for shape in SHAPES]
    texts += [f"{letter}. {name}" for letter in LETTERS for name in PALETTE]
    texts += [f"{letter}. {count}" for letter in LETTERS for count in range(1, 5)]
    return texts


def prompt_words() -> tuple[str, ...]:
    """The multi-byte pieces the byte-level pre-tokenizer cuts the prompts into, sorted (``" blue"``, ``"The"``)."""
    from tokenizers import pre_tokenizers

    from vcast.tiny_tokenizer import byte_to_unicode

    to_byte = {char: byte for byte, char in byte_to_unicode().items()}
    splitter = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    words = set()
    for text in _texts():
        for piece, _ in splitter.pre_tokenize_str(text):
            raw = bytes(to_byte[char] for char in piece).decode()
            if len(raw) > 1:
                words.add(raw)
    return tuple(sorted(words))

