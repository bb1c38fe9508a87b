"""Check a demo model folder against its ``SHA256SUMS`` before the demo runs it.

    python -m vcast.demo_model.verify checkpoints/demo_qwen3_vl

Exit status 1, naming every changed, missing or unlisted file, when it differs (a partial
checkout, a Git LFS pointer instead of the weights, a local edit); retrain with ``make demo-model``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Optional, Sequence

from vcast.demo_model.checksums import checksum_problems

logger = logging.getLogger(__name__)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    problems = checksum_problems(args.folder)
    if problems:
        for problem in problems:
            logger.error("%s: %s", args.folder, problem)
        logger.error("%s does not match its SHA256SUMS; restore it (git checkout -- %s) or retrain it (make demo-model)",
                     args.folder, args.folder)
        return 1
    info = json.loads((args.folder / "training.json").read_text())
    logger.info("%s: checksums match (trained in %.0f s, validation %s)", args.folder, info["train_seconds"],
                info["validation"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
