"""vcast.spelling: the edit distance and the closest names, on known answers; the registry's
refusal of an unknown method names the closest one."""

from __future__ import annotations

import pytest
import torch

import vcast
from vcast.spelling import closest, did_you_mean, edit_distance, max_edits, suggestion


@pytest.mark.parametrize("a, b, distance", [
    ("", "", 0), ("", "abc", 3), ("abc", "", 3), ("ratio", "ratio", 0),
    ("ratoi", "ratio", 1),      # a swap of two neighbours is one edit
    ("tua", "tau", 1), ("limt", "limit", 1), ("frame", "frames", 1), ("seeds", "seed", 1),
    ("vcst", "vcast", 1), ("kitten", "sitting", 3), ("flaw", "lawn", 2),
    ("ca", "abc", 3),           # optimal string alignment: no substring is edited twice (true Damerau: 2)
    ("abcdef", "badcfe", 3), ("Ratio", "ratio", 1),
])
def test_edit_distance_known_answers(a: str, b: str, distance: int) -> None:
    assert edit_distance(a, b) == distance
    assert edit_distance(b, a) == distance


def test_the_threshold_grows_with_the_name() -> None:
    assert [max_edits(name) for name in ("", "ab", "tua", "ratio", "pretrained", "max_pixels_x")] == [1, 1, 1, 1, 3, 4]


KEYS = ["frames", "ratio", "results_root", "processes", "batch_size", "limit", "seed", "profile"]


@pytest.mark.parametrize("typed, expected", [
    ("ratoi", ["ratio"]), ("ratios", ["ratio"]), ("limt", ["limit"]), ("frame", ["frames"]), ("seeds", ["seed"]),
    ("Ratio", ["ratio"]),                  # case is not an edit
    ("batch", ["batch_size"]),             # a prefix of four letters or more names the key it begins
    ("rat", []), ("xyz", []), ("ratio", []),  # too far, and the name itself
])
def test_closest_keys(typed: str, expected: list[str]) -> None:
    assert closest(typed, KEYS) == expected


def test_closest_ranks_by_distance_then_order_and_keeps_the_nearest_tier() -> None:
    pixels = ["min_pixels", "max_pixels", "total_pixels"]
    assert closest("mi_pixels", pixels) == ["min_pixels", "max_pixels"]  # 1 edit, then 2
    assert closest("max_pixel", pixels) == ["max_pixels"]                 # 1; min_pixels is 3 (> 1 + 1)
    assert closest("mxa_pixels", pixels) == ["max_pixels", "min_pixels"]  # 1 (a swap), then 2
    assert closest("ab", ["ac", "ab", "bb", "abcd", "a", "b"]) == ["ac", "bb", "a"]  # ties: the candidates' order
    assert closest("ab", ["ac", "ab", "bb", "abcd", "a", "b"], limit=2) == ["ac", "bb"]
    assert closest("vcst", ["vanilla", "vcast", "vcast_official", "evs"]) == ["vcast"]
    assert closest("VCast", ["vcast", "vcast_tau06", "vcast_tau09"]) == ["vcast"]  # not the longer ones too
    assert closest("qwen3vl", ["demo_qwen3vl", "qwen3vl_30b_a3b", "qwen3vl_32b", "qwen3vl_8b"]) == [
        "qwen3vl_8b", "qwen3vl_32b"]      # prefixes, 3 and 4 edits; demo_qwen3vl (5) is further than 3 + 1


def test_did_you_mean_sentences() -> None:
    assert did_you_mean("ratoi", KEYS) == "did you mean ratio?"
    assert did_you_mean("xyz", KEYS) == ""
    assert suggestion(["a", "b"]) == "did you mean a or b?"
    assert suggestion(["a", "b", "c"]) == "did you mean a, b or c?"
    assert suggestion([]) == ""


def test_an_unknown_method_is_refused_with_its_spelling_and_the_list() -> None:
    with pytest.raises(ValueError, match=r"unknown method 'vcst'; did you mean vcast\? available: .*fastv.*vcast"):
        vcast.select(torch.randn(2, 3, 4), 0.5, method="vcst")
    with pytest.raises(ValueError, match=r"unknown method 'xyzzy'; available: "):  # none close: only the list
        vcast.method_params("xyzzy")
