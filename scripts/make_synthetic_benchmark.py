#!/usr/bin/env python
"""Write the offline ``vcast_synth`` video benchmark (mp4 clips + multiple-choice jsonl).

    python scripts/make_synthetic_benchmark.py                      # into the lmms-eval task's data/
    python scripts/make_synthetic_benchmark.py --out /tmp/synth --seed 1 --items-per-category 20
    python scripts/make_synthetic_benchmark.py --heldout            # the demo's 300 held-out items

Re-running with the same settings is a no-op; other settings into an existing folder need
``--overwrite``. See ``vcast.eval.synthetic_benchmark``.
"""

from __future__ import annotations

import argparse
import logging
import sys

from vcast.eval.synthetic_benchmark import (
    DEFAULT_DATA_DIR,
    HELDOUT_DATA_DIR,
    HELDOUT_ITEMS_PER_CATEGORY,
    HELDOUT_SEED,
    write_benchmark,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_DATA_DIR), help=f"output folder (default {DEFAULT_DATA_DIR})")
    parser.add_argument("--seed", type=int, default=0, help="generation seed (default 0)")
    parser.add_argument("--items-per-category", type=int, default=4,
                        help="questions per category: appear, cut, count (default 4)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out folder")
    parser.add_argument("--heldout", action="store_true",
                        help=f"the held-out set of task vcast_synth_heldout: --out {HELDOUT_DATA_DIR} --seed "
                             f"{HELDOUT_SEED} --items-per-category {HELDOUT_ITEMS_PER_CATEGORY}")
    args = parser.parse_args(argv)
    if args.heldout:
        given = [flag for flag, value, default in (("--out", args.out, str(DEFAULT_DATA_DIR)), ("--seed", args.seed, 0),
                                                   ("--items-per-category", args.items_per_category, 4))
                 if value != default]
        if given:
            parser.error(f"--heldout fixes the folder, seed and size; drop {', '.join(given)}")
        args.out, args.seed, args.items_per_category = str(HELDOUT_DATA_DIR), HELDOUT_SEED, HELDOUT_ITEMS_PER_CATEGORY
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        jsonl = write_benchmark(args.out, seed=args.seed, items_per_category=args.items_per_category,
                                overwrite=args.overwrite)
    except ValueError as err:
        parser.error(str(err))
    with open(jsonl) as f:
        count = sum(1 for line in f if line.strip())
    print(f"vcast_synth: {count} items in {jsonl.parent} ({jsonl.name}, videos/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
