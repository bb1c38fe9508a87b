#!/usr/bin/env python
"""Write a random-weight checkpoint of a real video-LLM class (model, tokenizer, processor), offline.

    python scripts/make_tiny_checkpoint.py --arch qwen3_vl --size tiny --out /tmp/qwen3_vl_tiny
    python scripts/make_tiny_checkpoint.py --arch llava_onevision --size bench --out ckpt/llava_bench --seed 1

The folder loads with ``AutoModelForImageTextToText.from_pretrained`` and
``AutoProcessor.from_pretrained`` (no hub access needed). See ``vcast.tiny_checkpoints``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from vcast.tiny_checkpoints import ARCHS, SIZES, build_tiny_checkpoint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", required=True, choices=ARCHS)
    parser.add_argument("--size", required=True, choices=SIZES)
    parser.add_argument("--out", required=True, help="output folder (must not exist or be empty)")
    parser.add_argument("--seed", type=int, default=0, help="weight seed (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        out = build_tiny_checkpoint(args.arch, args.size, args.out, seed=args.seed, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as err:
        parser.error(str(err))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
