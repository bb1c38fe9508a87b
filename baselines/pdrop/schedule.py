"""PDrop's schedule: the default layer list moved to a model's depth, and the ``lam`` that meets a
layer-averaged retention (:mod:`baselines.pdrop`)."""

from __future__ import annotations

from collections.abc import Sequence

from vcast.models.llm_plan import layer_averaged_retention, layer_scaled

REFERENCE_LAYERS = 28  # the depth the default layer list is given for (Qwen2-7B)
REFERENCE_LAYER_LIST = (2, 8, 16)  # ours (official: [8, 16, 24] on 32 layers, the release's scripts)


def default_layer_list(num_layers: int) -> list[int]:
    """``[2, 8, 16]`` moved to ``num_layers`` layers (duplicates dropped, strictly increasing)."""
    layers = sorted({layer_scaled(layer, REFERENCE_LAYERS, num_layers) for layer in REFERENCE_LAYER_LIST})
    return layers


def layer_average(lam: float, layer_list: Sequence[int], num_layers: int) -> float:
    """``rho(lam) = sum_i (b_{i+1} - b_i) lam^i / L`` with ``b = [0, *layer_list, L]``."""
    return layer_averaged_retention(1.0, list(layer_list), [lam**i for i in range(1, len(layer_list) + 1)], num_layers)


def solve_lambda(ratio: float, layer_list: Sequence[int], num_layers: int) -> float:
    """The ``lam`` in ``(0, 1]`` with ``rho(lam) == ratio`` (bisection on the increasing polynomial).

    Raises:
        ValueError: ``ratio <= layer_list[0] / L`` (the layers before the first drop alone
            already see that share), naming the values.
    """
    floor = layer_list[0] / num_layers
    if ratio <= floor:
        raise ValueError(
            f"PDrop cannot reach a layer-averaged retention of {ratio} with layer_list {list(layer_list)} on "
            f"{num_layers} layers: the first {layer_list[0]} layers alone already see {layer_list[0]}/{num_layers} = "
            f"{floor:.3f} of the video tokens (move the first drop earlier, ask for a ratio above {floor:.3f}, or give lam)")
    if ratio >= 1.0:
        return 1.0
    low, high = 0.0, 1.0
    for _ in range(200):
        middle = 0.5 * (low + high)
        if middle in (low, high):
            break
        if layer_average(middle, layer_list, num_layers) < ratio:
            low = middle
        else:
            high = middle
    return high
