"""fig:temporal_allocation: V-CAST's per-frame (or per temporal patch) token budgets under each
allocation, one panel per video (:mod:`vcast.budget_profiles` computes them)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import numpy as np
from matplotlib.figure import Figure

from vcast.budget_profiles import ALLOCATION_LABELS, step_name
from vcast.report.figure_common import ALLOCATION_COLORS, ANALYSIS_COLORS, PathLike, figure_legend, pct, save_figure


Profiles = Mapping[str, np.ndarray]


def _panels(profiles: Union[Profiles, Sequence[tuple[str, Profiles]]]) -> list[tuple[str, Profiles]]:
    panels = [("", profiles)] if isinstance(profiles, Mapping) else list(profiles)
    if not panels or any(not panel for _, panel in panels):
        raise ValueError("budget profiles: nothing to plot (no video, or a video with no allocation)")
    for title, panel in panels:
        lengths = {name: len(budgets) for name, budgets in panel.items()}
        if len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ValueError(f"budget profiles {title!r}: every allocation needs the same number (> 0) of frames, "
                             f"got {lengths}")
    return panels


def budget_profile_labels(frames_per_step: int) -> dict[str, str]:
    """Title, x and y label of the budget-profile figure, all naming the same unit: a frame, or a
    temporal patch of ``frames_per_step`` frames (Qwen3-VL)."""
    step = step_name(frames_per_step)
    if frames_per_step == 1:
        return {"title": "Token budget per frame", "x": "Frame index", "y": "Tokens kept per frame"}
    return {"title": f"Token budget per {step} ({frames_per_step} frames)",
            "x": f"{step.capitalize()} index ({frames_per_step} frames each)", "y": f"Tokens kept per {step}"}


def build_budget_profiles(profiles: Union[Profiles, Sequence[tuple[str, Profiles]]], *, ratio: float,
                          frames_per_step: int = 1, labels: Optional[Mapping[str, str]] = None) -> Figure:
    """Budget curves, one point per frame or temporal patch, one panel per video.

    Args:
        profiles: ``{allocation: int array [T]}`` for one video (see
            :func:`vcast.report.budget_profile.budget_profiles`), or a list of
            ``(title, profiles)`` for several.
        ratio: the retention ratio the budgets were computed at (for the title).
        frames_per_step: frames behind a point: 1 (a frame, LLaVA), or a temporal patch of
            several frames (Qwen3-VL: 2); the title and both axes say it.
        labels: legend label per curve key, over :data:`vcast.budget_profiles.ALLOCATION_LABELS`.
    """
    axis = budget_profile_labels(frames_per_step)
    panels = _panels(profiles)
    figure = Figure(figsize=(4.6 * len(panels), 3.2), layout="constrained")
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, panel) in zip(axes, panels):
        for index, (name, budgets) in enumerate(panel.items()):
            budgets = np.asarray(budgets)
            is_vcast = name == "curvature"
            ax.plot(np.arange(len(budgets)), budgets,
                    color=ALLOCATION_COLORS.get(name, ANALYSIS_COLORS.get(name, f"C{index + 3}")),
                    label=(labels or {}).get(name, ALLOCATION_LABELS.get(name, name)), gid=f"profile:{name}",
                    marker="o",
                    markersize=3 if is_vcast else 2, linewidth=2.0 if is_vcast else 1.4, zorder=3 if is_vcast else 2)
        ax.set_xlabel(axis["x"])
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(axis["y"])
    figure.suptitle(f"{axis['title']}, R = {pct(ratio)}")
    figure_legend(figure, axes, columns=min(len(ALLOCATION_COLORS), max(len(panel) for _, panel in panels)))
    return figure


def plot_budget_profiles(profiles: Union[Profiles, Sequence[tuple[str, Profiles]]], out_stem: PathLike, *,
                         ratio: float, frames_per_step: int = 1,
                         labels: Optional[Mapping[str, str]] = None) -> list[Path]:
    """Budget profiles (fig:temporal_allocation, fig:budget_analysis) as PNG and PDF (see
    :func:`build_budget_profiles`)."""
    return save_figure(build_budget_profiles(profiles, ratio=ratio, frames_per_step=frames_per_step, labels=labels),
                       out_stem)
