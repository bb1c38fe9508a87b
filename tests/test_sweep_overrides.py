"""No key of a sweep's command line is silently ignored: each is read by a cell or refused before
any job, naming the key and the right spelling (model, method, task and launcher keys), the same
name elsewhere or the closest by edit distance. Config names: tests/test_sweep_names.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vcast.sweep.__main__ import run

REPO = Path(__file__).resolve().parents[1]
CELL = ["model=tiny_qwen3vl", "task=vcast_synth", "method=vcast", "frames=16"]


def unread_overrides(words: list[str]) -> list[str]:
    from vcast.sweep.overrides import unread_overrides as unread

    return unread(words)


def _refused(*words: str) -> list[str]:
    return unread_overrides([*CELL, *words])


@pytest.mark.parametrize("word", ["pretrained=checkpoints/mine", "+pretrained=checkpoints/mine"])
def test_a_model_key_at_the_top_is_refused_with_its_spelling(word: str) -> None:
    (problem,) = _refused(word)
    assert problem.startswith(f"{word}: nothing reads 'pretrained'") and "did you mean model.pretrained?" in problem


def test_model_keys_are_read_or_refused() -> None:
    assert _refused("model.pretrained=checkpoints/mine", "model.args.max_pixels=8192", "+model.args.dtype=float32") == []
    (unknown,) = _refused("+model.foo=1")
    assert "nothing reads 'model.foo'" in unknown
    (arg,) = _refused("+model.args.frames_per_second=2")
    assert "model.args.frames_per_second is read by nothing: vcast_qwen3_vl takes" in arg and "max_pixels" in arg
    (owned,) = _refused("+model.args.max_num_frames=8")
    assert "is set by the sweep: use frames instead" in owned
    (misplaced,) = _refused("max_pixels=8192")
    assert "did you mean model.args.max_pixels?" in misplaced
    # misspelled: the closest keys, next to the key first, then anywhere a cell reads one
    (near,) = _refused("model.pretraind=checkpoints/mine")
    assert near.endswith("nothing reads 'model.pretraind'; did you mean model.pretrained?")
    (parent,) = _refused("modle.pretrained=checkpoints/mine")
    assert parent.endswith("did you mean model.pretrained?")
    (both,) = _refused("max_pixel=8192")
    assert both.endswith("did you mean model.args.max_pixels?")
    (arg_near,) = _refused("+model.args.max_pixel=8192")
    assert "vcast_qwen3_vl takes" in arg_near and arg_near.endswith("; did you mean max_pixels?")
    # LLaVA-OneVision reads no pixel bounds: the same key is refused for that model
    (llava,) = unread_overrides(["model=tiny_llava_ov", "task=vcast_synth", "method=vcast", "+model.args.max_pixels=1"])
    assert "vcast_llava_ov takes" in llava


def test_method_keys_are_read_or_refused_for_every_method_of_the_grid() -> None:
    assert _refused("+method.params.tau=0.6") == []
    (unknown,) = _refused("+method.params.bogus=1")
    assert "method 'vcast' (config 'vcast') takes no parameter 'bogus'; it takes tau" in unknown
    (top,) = _refused("tau=0.6")
    assert "did you mean +method.params.tau?" in top
    (typo,) = _refused("+method.params.tua=0.6")
    assert "takes no parameter 'tua'; it takes tau" in typo and typo.endswith("did you mean tau?")
    (top_typo,) = _refused("tua=0.6")
    assert top_typo.endswith("did you mean +method.params.tau?")
    # the demo grid: vanilla and most baselines take no tau, and the one line names them
    (grid,) = unread_overrides(["experiment=demo", "+method.params.tau=0.6", "-m"])
    assert "method 'vanilla' (config 'vanilla') takes no parameter 'tau'" in grid
    assert "also for method" in grid and "fastv" in grid and "vcast," not in grid


def test_task_keys_are_read_or_refused() -> None:
    assert _refused("task.tasks=[vcast_synth]") == []
    (unknown,) = _refused("+task.split=test")
    assert "nothing reads 'task.split'" in unknown


def test_launcher_keys_are_read_or_refused() -> None:
    (basic,) = _refused("hydra.launcher.partition=gpu")
    assert "the launcher BasicLauncher has no 'partition'" in basic and "hydra/launcher=slurm_h100" in basic
    (top,) = _refused("+partition=gpu")
    assert "did you mean hydra/launcher=slurm_h100 hydra.launcher.partition?" in top
    slurm = ["hydra/launcher=slurm_h100"]
    assert _refused(*slurm, "hydra.launcher.partition=gpu", "+hydra.launcher.additional_parameters.constraint=h100") == []
    assert _refused("+hydra.callbacks.mine._target_=my.Callback") == []  # Hydra instantiates a user's callback
    (unknown,) = _refused(*slurm, "+hydra.launcher.gpus=2")
    assert "the launcher SlurmLauncher has no 'gpus'" in unknown
    (typo,) = _refused(*slurm, "hydra.launcher.partiton=gpu")
    assert typo.endswith("nothing reads 'hydra.launcher.partiton'; did you mean hydra.launcher.partition?")
    (basic_typo,) = _refused("hydra.launcher.partiton=gpu")
    assert basic_typo.endswith("did you mean partition, a field of hydra/launcher=slurm_h100? add that override")
    (top_typo,) = _refused("partiton=gpu")
    assert top_typo.endswith("did you mean hydra/launcher=slurm_h100 hydra.launcher.partition?")


def test_the_sweep_refuses_an_unread_key_before_any_job(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`+pretrained=` used to run the default checkpoint and exit 0."""
    results = tmp_path / "results"
    assert run([*CELL, "+pretrained=checkpoints/mine", f"results_root={results}"]) == 2
    err = capsys.readouterr().err
    assert "refused: +pretrained=checkpoints/mine: nothing reads 'pretrained'; did you mean model.pretrained?" in err
    assert "no cell was started" in err and not results.exists()
    assert run([*CELL, "pretrained=checkpoints/mine", "dry_run=true"]) == 2  # the dry run too


def test_the_command_line_refusal_from_a_shell(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "vcast.sweep", *CELL, "+pretrained=x", f"results_root={tmp_path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr
    assert "did you mean model.pretrained?" in done.stderr and "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("word, spelled", [("ratoi=0.2", "ratio"), ("limt=5", "limit"), ("frame=16", "frames"),
                                           ("ratios=0.25", "ratio"), ("seeds=1", "seed"), ("methd=vcast", "method")])
def test_a_misspelled_key_gets_the_closest_keys(word: str, spelled: str) -> None:
    key = word.split("=")[0]
    assert _refused(word) == [f"{word}: nothing reads {key!r}; did you mean {spelled}?"]


def test_config_names_are_ours_and_a_malformed_word_is_hydras() -> None:
    """An unknown config is refused with its spelling by vcast.sweep.names (not Hydra's search-path
    dump): the key check leaves it alone. A malformed word: Hydra's own error names it."""
    from vcast.sweep.names import misnamed

    assert unread_overrides(["model=no_such_model", "limit=2"]) == []
    (line,) = misnamed(["model=no_such_model", "limit=2"])
    assert line.startswith("model=no_such_model: no model config 'no_such_model'")
    assert unread_overrides([*CELL, "limit=["]) == []
