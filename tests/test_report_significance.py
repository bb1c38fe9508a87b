"""Per-sample analysis: loyalty, flips, the paired bootstrap and McNemar's test, from real run logs."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
import pytest

from tests.support.sample_logs import Answer, answers_spec, write_answers_cell
from vcast.report.__main__ import main
from vcast.report.analysis import accuracy_intervals, compare_all
from vcast.report.collect import collect
from vcast.report.per_sample import collect_items, option_letter, read_items
from vcast.report.scoring import load_task_scorings
from vcast.report.significance import (bootstrap_statistics, mcnemar_exact, paired_difference_interval,
                                       percentile_interval, stratified_accuracy, stratum_blocks)
from vcast.results.tree import Cell

SCORINGS = load_task_scorings()
EXPERIMENT, MODEL = "sig", "tiny"
# Video-MME, 10 items per duration, truth "A" everywhere: (vanilla, method) predictions per item.
VIDEOMME = {
    # R->W at 6, 7; W->R at 8; equal answers at 0-5 and 9 -> loyalty 7/10
    "short": ("AAAAAAAABB", "AAAAAACCAB"),
    # identical runs
    "medium": ("AAAAABBBBB", "AAAAABBBBB"),
    # R->W at 0; W->R at 1-8 (b=1, c=8, the hand-computed McNemar case); equal only at 9
    "long": ("ACCCCCCCCC", "DAAAAAAAAC"),
}


def _videomme(preds: dict[str, str]) -> dict[str, list[Answer]]:
    return {"videomme": [Answer(p, "A", duration) for duration, text in preds.items() for p in text]}


def _write_tree(root: Path) -> None:
    videomme = SCORINGS["videomme"]
    vanilla = {d: v for d, (v, _) in VIDEOMME.items()}
    method = {d: m for d, (_, m) in VIDEOMME.items()}
    for name, ratio, preds in (("vanilla", 1.0, vanilla), ("random", 0.25, method), ("vcast", 0.25, method)):
        write_answers_cell(root, answers_spec(EXPERIMENT, MODEL, 16, ratio, name, videomme), videomme, _videomme(preds))
    # MVBench: two subtasks of unequal size, so the mean of subtask accuracies differs from the pooled one.
    mvbench = SCORINGS["mvbench"]
    antonym_vanilla = [Answer("A" if i < 5 else "B", "A") for i in range(10)]   # 50 %
    antonym_method = [Answer("A", "A") for i in range(10)]                       # 100 %
    count_vanilla = [Answer("C", "C") for _ in range(31)]                         # 100 %
    count_method = [Answer("C" if i < 24 else "D", "C") for i in range(30)] + [Answer("", "C")]  # 24/30 answered
    for name, ratio, (antonym, count) in (("vanilla", 1.0, (antonym_vanilla, count_vanilla)),
                                          ("random", 0.25, (antonym_method, count_method))):
        write_answers_cell(root, answers_spec(EXPERIMENT, MODEL, 16, ratio, name, mvbench), mvbench,
                           {"mvbench_action_antonym": antonym, "mvbench_action_count": count})


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sig_results")
    _write_tree(root)
    return root


@pytest.fixture(scope="module")
def comparisons(tree: Path):
    items = collect_items(tree)
    assert items.problems == []
    return compare_all(items.cells, SCORINGS, resamples=2000, seed=0)


def _row(frame, method: str, reference: str, benchmark: str):
    rows = frame[(frame["method"] == method) & (frame["reference"] == reference) & (frame["benchmark"] == benchmark)]
    assert len(rows) == 1, (method, reference, benchmark, len(rows))
    return rows.iloc[0]


def _loop_interval(reference: np.ndarray, method: np.ndarray, blocks: list[tuple[int, int]], resamples: int,
                   seed: int, level: float = 0.95) -> tuple[float, float]:
    """An independent plain-loop paired bootstrap: resample r draws rng.random(N); in the stratum at
    [s, e) item s + floor(u * (e - s)); statistic = mean over strata of the mean difference."""
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        u = rng.random(len(reference))
        means = []
        for start, end in blocks:
            total = 0.0
            for position in range(start, end):
                pick = start + min(int(u[position] * (end - start)), end - start - 1)
                total += float(method[pick]) - float(reference[pick])
            means.append(total / (end - start))
        stats.append(100.0 * sum(means) / len(means))
    stats.sort()
    # numpy's default (linear) percentile, written out
    def percentile(q: float) -> float:
        position = q / 100.0 * (len(stats) - 1)
        low = math.floor(position)
        return stats[low] + (stats[min(low + 1, len(stats) - 1)] - stats[low]) * (position - low)
    return percentile(100 * (1 - level) / 2), percentile(100 * (1 + level) / 2)


def test_mcnemar_exact_against_hand_computed_values() -> None:
    # b=1, c=8: p = 2 * (C(9,0) + C(9,1)) / 2^9 = 2 * 10 / 512
    assert mcnemar_exact(1, 8) == 0.0390625 == mcnemar_exact(8, 1)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 6) == 2 / 64  # 2 * C(6,0) / 2^6
    assert mcnemar_exact(3, 4) == 1.0     # the doubled tail exceeds 1
    assert 0 < mcnemar_exact(1000, 1200) < 1e-4  # big counts stay exact integers
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar_exact(-1, 2)


def test_mcnemar_matches_scipys_binomial_test() -> None:
    stats = pytest.importorskip("scipy.stats")
    for b, c in ((1, 8), (7, 19), (40, 61), (0, 3)):
        assert mcnemar_exact(b, c) == pytest.approx(stats.binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-12)


def test_bootstrap_equals_an_independent_plain_loop_with_the_same_seed() -> None:
    rng = np.random.default_rng(7)
    reference = rng.random(37) < 0.6
    method = rng.random(37) < 0.7
    strata = np.array([0] * 12 + [1] * 25)
    for blocks, codes in (([(0, 37)], None), ([(0, 12), (12, 37)], strata)):
        ours = paired_difference_interval(reference, method, codes, resamples=3000, seed=5)
        assert ours == pytest.approx(_loop_interval(reference, method, blocks, 3000, 5), abs=1e-9)
    # the chunked draw gives the same replicates as one chunk
    import vcast.report.significance as significance

    whole = bootstrap_statistics(method.astype(float), strata, resamples=500, seed=1)
    small, significance.CHUNK_NUMBERS = significance.CHUNK_NUMBERS, 100
    try:
        chunked = bootstrap_statistics(method.astype(float), strata, resamples=500, seed=1)
    finally:
        significance.CHUNK_NUMBERS = small
    assert np.array_equal(whole, chunked)


def test_bootstrap_interval_is_close_to_the_normal_approximation() -> None:
    rng = np.random.default_rng(3)
    reference = rng.random(2000) < 0.62
    method = np.where(rng.random(2000) < 0.85, reference, ~reference)  # correlated, as paired runs are
    low, high = paired_difference_interval(reference, method, resamples=10_000, seed=0)
    diff = method.astype(float) - reference.astype(float)
    centre, half = 100 * diff.mean(), 100 * 1.959964 * diff.std(ddof=1) / math.sqrt(len(diff))
    assert low < centre < high
    assert (high - low) / 2 == pytest.approx(half, rel=0.08)
    assert (low + high) / 2 == pytest.approx(centre, abs=0.15 * half)


def test_stratified_accuracy_and_blocks() -> None:
    correct = np.array([1, 0, 1, 1, 1, 1])
    assert stratified_accuracy(correct) == pytest.approx(100 * 5 / 6)
    assert stratified_accuracy(correct, [0, 0, 1, 1, 1, 1]) == pytest.approx(75.0)
    with pytest.raises(ValueError, match="not contiguous"):
        stratum_blocks([0, 1, 0], 3)
    with pytest.raises(ValueError, match="level"):
        percentile_interval(np.zeros(3), level=1.5)


def test_option_letter() -> None:
    assert [option_letter(t) for t in ("(b) red", "B.", "The answer is C.", "A red square", "  d ", "none")] == \
        ["B", "B", "C", "a red square", "D", "none"]


def test_loyalty_and_flips_per_duration_group(comparisons) -> None:
    expected = {  # benchmark: (loyalty %, right->wrong, wrong->right)
        "VideoMME-Short": (70.0, 2, 1), "VideoMME-Medium": (100.0, 0, 0), "VideoMME-Long": (10.0, 1, 8),
        "VideoMME": (100.0 * 18 / 30, 3, 9),
    }
    for benchmark, (loyalty, right_to_wrong, wrong_to_right) in expected.items():
        row = _row(comparisons, "random", "vanilla", benchmark)
        assert row["loyalty"] == pytest.approx(loyalty)
        assert (row["right_to_wrong"], row["wrong_to_right"]) == (right_to_wrong, wrong_to_right)
        assert row["p_mcnemar"] == mcnemar_exact(right_to_wrong, wrong_to_right)
    long = _row(comparisons, "random", "vanilla", "VideoMME-Long")
    assert long["p_mcnemar"] == 0.0390625
    assert (long["score"], long["reference_score"], long["difference"]) == pytest.approx((80.0, 10.0, 70.0))
    assert long["ci_low"] <= 70.0 <= long["ci_high"] and long["ci_low"] > 0
    overall = _row(comparisons, "random", "vanilla", "VideoMME")
    assert overall["items"] == 30 and overall["difference"] == pytest.approx(100 * (21 - 15) / 30)
    # V-CAST gave the same answers as random: loyal everywhere, no flips, a zero-width interval.
    same = _row(comparisons, "random", "vcast", "VideoMME")
    assert (same["loyalty"], same["right_to_wrong"], same["wrong_to_right"], same["p_mcnemar"]) == (100.0, 0, 0, 1.0)
    assert (same["ci_low"], same["ci_high"]) == (0.0, 0.0)
    # vanilla is only a reference; V-CAST is compared with vanilla but not with itself
    assert "vanilla" not in set(comparisons["method"])
    assert set(comparisons.loc[comparisons["method"] == "vcast", "reference"]) == {"vanilla"}


def test_the_interval_is_the_independent_loops(tree: Path, comparisons) -> None:
    cells = {(c.method, c.task): c for c in collect_items(tree).cells}
    reference = cells[("vanilla", "videomme")].items
    method = cells[("random", "videomme")].items
    long_ref = reference[reference["group"] == "long"]["correct"].to_numpy()
    long_method = method[method["group"] == "long"]["correct"].to_numpy()
    row = _row(comparisons, "random", "vanilla", "VideoMME-Long")
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        _loop_interval(long_ref, long_method, [(0, 10)], 2000, 0), abs=1e-9)


def test_mvbench_is_the_mean_of_its_subtasks_and_resampled_within_them(tree: Path, comparisons) -> None:
    row = _row(comparisons, "random", "vanilla", "MVBench")
    # the empty reply is not an item (lmms-eval divides by answered items), so 10 + 30 are paired
    assert row["items"] == 40
    assert (row["reference_score"], row["score"]) == pytest.approx((75.0, 90.0))  # pooled would be 87.5 vs 85.0
    assert row["difference"] == pytest.approx(15.0)
    assert (row["right_to_wrong"], row["wrong_to_right"]) == (6, 5)
    # the tables' MVBench (lmms-eval's per-subtask aggregates) is the same number
    frame = collect(tree).frame
    table = frame[(frame["benchmark"] == "MVBench")].set_index("method")["value"]
    assert (table["vanilla"], table["random"]) == pytest.approx((75.0, 90.0))
    cells = {(c.method, c.task): c for c in collect_items(tree).cells}
    ref = cells[("vanilla", "mvbench")].items.set_index(["lmms_task", "doc_id"])
    ours = cells[("random", "mvbench")].items.set_index(["lmms_task", "doc_id"])
    ref = ref.loc[ours.index.intersection(ref.index, sort=False)]
    ref = ref.iloc[sorted(range(len(ref)), key=lambda i: (ref.index[i][0], int(ref.index[i][1])))]
    ours = ours.loc[ref.index]
    blocks = [(0, 10), (10, 40)]  # action_antonym, then action_count (strata in name order)
    assert list(ref.index.get_level_values(0)[[0, 10]]) == ["mvbench_action_antonym", "mvbench_action_count"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(
        _loop_interval(ref["correct"].to_numpy(), ours["correct"].to_numpy(), blocks, 2000, 0), abs=1e-9)


def test_accuracy_intervals_and_items(tree: Path) -> None:
    cells = collect_items(tree).cells
    frame = accuracy_intervals(cells, SCORINGS, resamples=1000, seed=0)
    vanilla = frame[(frame["method"] == "vanilla") & (frame["benchmark"] == "VideoMME-Medium")].iloc[0]
    assert vanilla["score"] == pytest.approx(50.0) and vanilla["items"] == 10
    assert vanilla["ci_low"] < 50.0 < vanilla["ci_high"]
    [random_mvbench] = [c for c in cells if c.method == "random" and c.task == "mvbench"]
    mvbench = read_items(Cell(tree / random_mvbench.cell).samples(), SCORINGS["mvbench"])
    assert len(mvbench) == 40 and set(mvbench["stratum"]) == {"mvbench_action_antonym", "mvbench_action_count"}


def test_cli_analyze_and_build_with_intervals(tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    assert main(["analyze", EXPERIMENT, "--results", str(tree), "--out", str(out), "--resamples", "2000",
                 "--show"]) == 0
    printed = capsys.readouterr()
    assert "| Random | 0.25 | VideoMME-Long | 10 | 80.0 | 10.0 | 1 | 8 | +70.0 |" in printed.out
    names = sorted(p.name for p in out.iterdir())
    assert names == [f"{EXPERIMENT}-analysis.{s}" for s in ("csv", "md", "tex")]
    # these cells recorded no efficiency, so there is no trade-off figure, and the reason is given
    assert "skipped: figure sig-tradeoff: trade-off: no cell of model 'tiny' recorded kept tokens" in printed.err
    rows = list(csv.DictReader(io.StringIO((out / f"{EXPERIMENT}-analysis.csv").read_text())))
    long = next(r for r in rows if r["method"] == "random" and r["reference"] == "vanilla"
                and r["benchmark"] == "VideoMME-Long")
    assert float(long["p_mcnemar"]) == 0.0390625 and float(long["loyalty"]) == 10.0
    tex = (out / f"{EXPERIMENT}-analysis.tex").read_text()
    assert tex.count("{") == tex.count("}") and tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 1

    assert main(["build", EXPERIMENT, "--results", str(tree), "--out", str(out), "--intervals",
                 "--resamples", "1000"]) == 0
    md = (out / f"{EXPERIMENT}.md").read_text()
    table = list(csv.DictReader(io.StringIO((out / f"{EXPERIMENT}.csv").read_text())))
    vanilla = next(r for r in table if r["method"] == "vanilla")
    cell = next(c for c in collect_items(tree).cells if c.method == "vanilla" and c.task == "videomme")
    long = cell.items[cell.items["group"] == "long"]["correct"].to_numpy(float)
    low, high = percentile_interval(bootstrap_statistics(long, resamples=1000, seed=0))
    assert float(vanilla["VideoMME-Long_pm"]) == pytest.approx((high - low) / 2, abs=1e-4)
    assert f"10.0 ± {(high - low) / 2:.1f}" in md and "bootstrap interval" in md
    assert r"$\pm$" in (out / f"{EXPERIMENT}.tex").read_text()


def test_a_broken_samples_file_is_named_and_skipped(tmp_path: Path) -> None:
    _write_tree(tmp_path)
    cell = next(tmp_path.rglob("random/r0.25/videomme"))
    samples = next(cell.rglob("*_samples_*.jsonl"))
    samples.write_text(samples.read_text().splitlines()[0] + "\n{broken\n")
    items = collect_items(tmp_path)
    assert len(items.problems) == 1 and "random/r0.25/videomme" in items.problems[0] and "not JSON" in items.problems[0]
    assert len(items.cells) == 4


def test_random_weight_replies_as_in_the_demo(tmp_path: Path) -> None:
    """What docs/report.md says of `make demo`: replies that name no option score 0 with a [0, 0]
    interval; loyalty is 100% where both runs parse to nothing and drops where a stray letter
    parses in one run only, even when that letter is wrong."""
    scorings = load_task_scorings()
    synth = scorings["vcast_synth"]
    truth = "BADCABCDABCD"
    stray = ["D" if i == 0 else "" for i in range(12)]  # VisionZip's one parsed reply, wrong (B is right)
    for method, ratio, preds in (("vanilla", 1.0, [""] * 12), ("vcast", 0.25, [""] * 12), ("visionzip", 0.25, stray)):
        write_answers_cell(tmp_path, answers_spec("demo", "tiny", 16, ratio, method, synth), synth,
                           {"vcast_synth": [Answer(p, t) for p, t in zip(preds, truth)]})
    rows = compare_all(collect_items(tmp_path).cells, scorings, resamples=500)
    vcast = _row(rows, "vcast", "vanilla", "VCastSynth")
    visionzip = _row(rows, "visionzip", "vanilla", "VCastSynth")
    assert vcast["loyalty"] == 100.0 and visionzip["loyalty"] == pytest.approx(100 * 11 / 12)
    for row in (vcast, visionzip):
        assert (row["score"], row["reference_score"], row["ci_low"], row["ci_high"]) == (0.0, 0.0, 0.0, 0.0)
        assert (row["right_to_wrong"], row["wrong_to_right"], row["p_mcnemar"]) == (0, 0, 1.0)
