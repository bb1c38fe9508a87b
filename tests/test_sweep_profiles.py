"""Profiles: a paper-table experiment runs each method in the variant behind its published row;
``profile=clean`` runs ``variant="paper"`` everywhere into its own cells."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("hydra")

from vcast.models.attach import _check_param_values  # noqa: E402
from vcast.registry import is_token_method, method_variants  # noqa: E402
from vcast.sweep.profiles import resolve_variant  # noqa: E402
from vcast.sweep.spec import preflight, spec_from_config  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="sweep", overrides=overrides, return_hydra_config=True)


def test_resolve_variant_rules() -> None:
    table = {"visionzip": "vidcom2_qwen", "vcast": "official"}
    assert resolve_variant("reproduce", "visionzip", None, table) == "vidcom2_qwen"
    assert resolve_variant("reproduce", "random", None, table) == "paper"  # not named: ours
    assert resolve_variant("reproduce", "visionzip", "paper", table) == "paper"  # a pin wins
    assert resolve_variant("clean", "visionzip", None, table) == "paper"
    assert resolve_variant("clean", "visionzip", "paper", table) == "paper"
    with pytest.raises(ValueError, match="pins variant 'official'"):
        resolve_variant("clean", "vcast_x", "official", table)
    with pytest.raises(ValueError, match="'fancy'"):
        resolve_variant("fancy", "vcast", None, table)
    with pytest.raises(ValueError, match="bogus"):
        resolve_variant("reproduce", "vcast", None, {"vcast": "bogus"})
    with pytest.raises(ValueError, match="'bogus'"):
        resolve_variant("reproduce", "vcast", "bogus", {})


def test_reproduction_cell_runs_the_named_variant_and_clean_its_own_cell() -> None:
    reproduce = spec_from_config(_compose(["experiment=qwen3vl_8b", "method=vcast"]), "qwen3vl_8b")
    clean = spec_from_config(_compose(["experiment=qwen3vl_8b", "method=vcast", "profile=clean"]), "qwen3vl_8b")
    assert (reproduce.variant, reproduce.profile, reproduce.method_params["variant"]) == ("official", "reproduce", "official")
    assert (clean.variant, clean.profile, clean.method_params["variant"]) == ("paper", "clean", "paper")
    assert reproduce.relative_dir.parts[0] == "qwen3vl_8b"
    assert clean.relative_dir.parts[0] == "qwen3vl_8b-clean"
    assert reproduce.relative_dir.parts[1:] == clean.relative_dir.parts[1:]
    assert reproduce.as_dict()["variant"] == "official"  # cell.json records it (spec is written whole)


def test_reproduce_params_apply_to_the_reproduction_only() -> None:
    reproduce = spec_from_config(_compose(["experiment=llava_ov", "method=visionzip"]), "llava_ov")
    clean = spec_from_config(_compose(["experiment=llava_ov", "method=visionzip", "profile=clean"]), "llava_ov")
    assert reproduce.method_params == {"variant": "official", "spatial_tokens": 50}
    assert clean.method_params == {"variant": "paper"}


def test_single_variant_methods_take_no_variant_parameter() -> None:
    spec = spec_from_config(_compose(["experiment=efficiency", "method=random"]), "efficiency")
    assert spec.variant == "paper" and "variant" not in spec.method_params
    vanilla = spec_from_config(_compose(["experiment=efficiency", "method=vanilla"]), "efficiency")
    assert vanilla.variant == "paper" and "variant" not in vanilla.method_params


def test_preflight_names_a_missing_variant() -> None:
    spec = spec_from_config(_compose(["method=random", "+variants.random=official"]), "x")
    assert spec.variant == "official"
    problem = preflight(spec)
    assert problem is not None and "has no variant 'official'" in problem and problem.endswith("it has: paper")


def assert_runs_variant(spec, variant: str) -> None:
    """The cell passes pre-flight and ``attach``'s own check of its values (token methods; an input
    method's are pre-flight's), and runs ``variant``, one its method has."""
    assert preflight(spec) is None, preflight(spec)
    if is_token_method(spec.method_id):
        _check_param_values(spec.method_id, spec.ratio, dict(spec.method_params))
    assert spec.variant == variant, spec.name
    assert spec.variant in method_variants(spec.method_id)


