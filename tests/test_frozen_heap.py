"""vcast.frozen_heap: garbage is finalized before the heap is frozen, and what is alive is frozen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# A cycle with a finalizer that writes a file, dropped before the freeze: the collection that comes
# first must run the finalizer (nothing it would write is lost); what is alive then is frozen.
PROGRAM = """
import gc, sys
from vcast.frozen_heap import freeze_heap

class Node:
    def __init__(self, path):
        self.path, self.me = path, self
    def __del__(self):
        open(self.path, "w").write("finalized")

Node(sys.argv[1])
before = gc.get_freeze_count()
freeze_heap()
print(before, gc.get_freeze_count() > 0)
"""


def test_garbage_is_finalized_first_and_the_rest_is_frozen(tmp_path: Path) -> None:
    dropped = tmp_path / "dropped"
    result = subprocess.run([sys.executable, "-c", PROGRAM, str(dropped)], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[1])
    before, frozen = result.stdout.split()
    assert (before, frozen) == ("0", "True"), result.stdout
    assert dropped.read_text() == "finalized"  # collected before the freeze, its finalizer ran
