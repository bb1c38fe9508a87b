"""Every name typed on a sweep's command line is checked before any job: a config, a key, a
variant, a profile, a method parameter or a model argument spelled wrong is refused with exit
code 2, in one line naming the word and the right spelling, never with Hydra's search path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vcast.sweep.__main__ import run
from vcast.sweep.names import misnamed, refusals

REPO = Path(__file__).resolve().parents[1]
CELL = ["model=tiny_qwen3vl", "task=vcast_synth", "method=vcast", "frames=16"]
SLURM = "hydra/launcher=slurm_h100"

TYPOS = [  # (what is typed after CELL, the word refused, what the line must say)
    (["ratoi=0.2"], "ratoi=0.2", "nothing reads 'ratoi'; did you mean ratio?"),
    (["limt=5"], "limt=5", "did you mean limit?"),
    (["frame=16"], "frame=16", "did you mean frames?"),
    (["ratios=0.25"], "ratios=0.25", "did you mean ratio?"),
    (["seeds=1"], "seeds=1", "did you mean seed?"),
    (["model.pretraind=x"], "model.pretraind=x", "did you mean model.pretrained?"),
    ([SLURM, "hydra.launcher.partiton=gpu"], "hydra.launcher.partiton=gpu", "did you mean hydra.launcher.partition?"),
    (["method=vcst"], "method=vcst", "no method config 'vcst'; did you mean vcast?"),
    (["method=vanilla,vcst", "-m"], "method=vanilla,vcst", "no method config 'vcst'; did you mean vcast?"),
    (["model=tiny_qwn3vl"], "model=tiny_qwn3vl", "no model config 'tiny_qwn3vl'; did you mean tiny_qwen3vl?"),
    (["task=vcast_synht"], "task=vcast_synht", "no task config 'vcast_synht'; did you mean vcast_synth?"),
    (["experiment=dem"], "experiment=dem", "no experiment config 'dem'; did you mean demo?"),
    (["+experiment=qwen3vl_8"], "+experiment=qwen3vl_8", "did you mean qwen3vl_8b?"),
    (["hydra/launcher=slurm_h10"], "hydra/launcher=slurm_h10", "did you mean slurm_h100?"),
    (["hydra/launcher=submitit_slrm"], "hydra/launcher=submitit_slrm", "did you mean submitit_slurm?"),  # the plugin's
    (["hydra/launcher=basc"], "hydra/launcher=basc", "did you mean basic?"),                             # Hydra's own
    (["hydra/launchr=local"], "hydra/launchr=local", "no config group 'hydra/launchr'; did you mean hydra/launcher?"),
    (["+variants.vcast=oficial"], "+variants.vcast=oficial",
     "method 'vcast' (config 'vcast') has no variant 'oficial'; did you mean official? (it has paper, official)"),
    (["+variants.vcst=official"], "+variants.vcst=official", "no method config 'vcst'; did you mean vcast?"),
    (["profile=clen"], "profile=clen", "no profile 'clen'; did you mean clean?"),
    (["+method.params.tua=0.6"], "+method.params.tua=0.6", "takes no parameter 'tua'; it takes tau"),
    (["+model.args.max_pixel=8192"], "+model.args.max_pixel=8192", "did you mean max_pixels?"),
]


@pytest.mark.parametrize("words, word, says", TYPOS, ids=[typo[1] for typo in TYPOS])
def test_each_kind_of_name_spelled_wrong_is_refused_with_its_spelling(
        words: list[str], word: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results"
    assert run([*CELL, *words, f"results_root={results}", "dry_run=true"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"refused: {word}: ") and says in lines[0], lines
    assert lines[1:] == ["no cell was started: 1 override(s) refused"]  # two lines in all, no job
    assert not results.exists()


def test_method_parameter_refusal_keeps_the_list_and_adds_the_spelling() -> None:
    (line,) = refusals([*CELL, "+method.params.tua=0.6"])
    assert "it takes tau, k_min" in line and line.endswith("; did you mean tau?")


def test_every_bad_name_gets_its_own_line_and_good_names_none() -> None:
    assert misnamed([*CELL, "experiment=demo", SLURM, "hydra/launcher=submitit_local", "hydra/launcher=basic",
                     "profile=clean", "+variants.vcast=official", "variants={vcast_official: paper}",
                     "+reproduce_params.vcast.tau=0.6", "experiment=null", "~experiment", "-m"]) == []
    lines = misnamed([*CELL, "method=vanilla,vcst,xyzzy", "variants={vcst: official}", "-m"])
    methods = len(list((REPO / "configs" / "method").glob("*.yaml")))
    ls = os.path.relpath(REPO / "configs" / "method")  # configs/method from the repository
    assert lines == ["method=vanilla,vcst,xyzzy: no method config 'vcst'; did you mean vcast?",
                     f"method=vanilla,vcst,xyzzy: no method config 'xyzzy'; ls {ls} lists the {methods} method configs",
                     "variants={vcst: official}: no method config 'vcst'; did you mean vcast?"]
    # a short group with nothing close is listed in full
    (launcher,) = misnamed([*CELL, "hydra/launcher=nothing"])
    assert launcher.endswith("hydra/launcher configs: basic, local, slurm_h100, submitit_local, submitit_slurm")


def test_a_malformed_word_is_left_to_hydra() -> None:
    """Not a name: Hydra's own error says what is wrong with it."""
    assert misnamed([*CELL, "limit=["]) == []
    assert refusals([*CELL, "limit=["]) == []


def test_the_misspelled_config_from_a_shell(tmp_path: Path) -> None:
    """It used to be Hydra's 47 lines: "Could not find 'method/vcst'", 38 names, the search path, exit 1."""
    command = [sys.executable, "-m", "vcast.sweep", "method=vcst", "model=tiny_qwen3vl", "task=vcast_synth",
               f"results_root={tmp_path}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["refused: method=vcst: no method config 'vcst'; did you mean vcast?",
                                        "no cell was started: 1 override(s) refused"]
    for hydra_says in ("search path", "Search path", "Traceback", "Could not find"):
        assert hydra_says not in done.stderr
    assert list(tmp_path.iterdir()) == []
