"""Value rescaling h and its inverse on hand-checked numbers, exact inversion, monotonicity."""

from __future__ import annotations

import math

import pytest
import torch

from border_py.agents.rescaling import rescale, unrescale

# h(x) = sign(x) (sqrt(|x| + 1) - 1) + 1e-3 x, by hand: sqrt(2) = 1.414213562,
# sqrt(11) = 3.316624790, sqrt(10001) = 100.004999875
HAND = [
    (0.0, 0.0),
    (1.0, 0.415213562),
    (-1.0, -0.415213562),
    (10.0, 2.326624790),
    (1e4, 109.004999875),
]


@pytest.mark.parametrize(("x", "h"), HAND)
def test_h_and_its_inverse_at_hand_computed_points(x, h):
    y = rescale(torch.tensor([x], dtype=torch.float64)).item()
    assert y == pytest.approx(h, rel=1e-9, abs=1e-12)
    back = unrescale(torch.tensor([h], dtype=torch.float64)).item()
    assert back == pytest.approx(x, rel=1e-8, abs=1e-12)
    assert rescale(torch.tensor([x])).item() == pytest.approx(h, rel=1e-6)  # float32


def _rlax_inverse(y: float, eps: float = 1e-3) -> float:
    """The closed form as rlax writes it (``signed_parabolic``), in float64."""
    z = math.sqrt(1 + 4 * eps * (eps + 1 + abs(y))) / 2 / eps - 1 / 2 / eps
    return math.copysign(z * z - 1, y)


def test_the_inverse_equals_rlaxs_closed_form():
    for y in (0.3, 1.0, 5.0, 77.0, 1000.0, -2.5):
        ours = unrescale(torch.tensor([y], dtype=torch.float64)).item()
        assert ours == pytest.approx(_rlax_inverse(y), rel=1e-9)


def test_inverse_of_h_is_x_to_float32_precision_over_twelve_decades_both_signs():
    magnitudes = torch.logspace(-6, 6, 2001)
    x = torch.cat([magnitudes, -magnitudes, torch.zeros(1)])
    back = unrescale(rescale(x))
    relative = ((back - x).abs() / x.abs().clamp(min=1e-30))[x != 0]
    assert relative.max().item() < 1e-5
    assert back[-1].item() == 0.0


def test_h_is_odd_and_strictly_increasing():
    x = torch.linspace(-1e3, 1e3, 200_001, dtype=torch.float64)
    y = rescale(x)
    assert torch.all(y[1:] > y[:-1])
    assert torch.equal(rescale(-x), -y)
    inverse = unrescale(torch.linspace(-50, 50, 100_001, dtype=torch.float64))
    assert torch.all(inverse[1:] > inverse[:-1])
