"""Property tests (hypothesis) on the transport layer: marginals, symmetry, and the limits that connect
the solvers (entropic -> exact as ε -> 0, unbalanced -> balanced as λ -> ∞; movers' unbalanced solver
with λ = ∞ on both sides is balanced entropic OT). Bounds are the textbook
ones, not values taken from the code: an entropic plan is feasible, so its cost is >= the EMD, and it
minimises <C, P> - ε H(P), so its cost exceeds the EMD by at most ε log(n m)."""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from movers.core.transport import emd, unbalanced_sinkhorn_batch

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw, max_size: int = 7):
    """(a, b, cost): positive histograms summing to 1 (masses in [0.05, 1] before normalising) and a
    cost in [0, 1]; sizes 1..max_size."""
    n, m = draw(st.integers(1, max_size)), draw(st.integers(1, max_size))
    mass = st.floats(0.05, 1.0, allow_nan=False)
    a = np.array(draw(st.lists(mass, min_size=n, max_size=n)))
    b = np.array(draw(st.lists(mass, min_size=m, max_size=m)))
    cost = np.array(draw(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=n * m, max_size=n * m)))
    return a / a.sum(), b / b.sum(), cost.reshape(n, m)


def _t(*arrays):
    return [torch.as_tensor(x, dtype=torch.float64).unsqueeze(0) for x in arrays]


@SETTINGS
@given(problems())
def test_emd_plan_has_the_marginals_and_its_cost(problem):
    a, b, cost = problem
    out = emd(a, b, cost)
    assert np.all(out.plan >= 0)
    np.testing.assert_allclose(out.plan.sum(1), a, atol=1e-9, rtol=0)
    np.testing.assert_allclose(out.plan.sum(0), b, atol=1e-9, rtol=0)
    assert math.isclose(out.cost, float((out.plan * cost).sum()), abs_tol=1e-12)


@SETTINGS
@given(problems())
def test_emd_is_symmetric_under_transposition(problem):
    a, b, cost = problem
    assert math.isclose(emd(a, b, cost).cost, emd(b, a, cost.T).cost, abs_tol=1e-9)


@SETTINGS
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=7), st.data())
def test_emd_of_a_histogram_with_itself_is_zero(points, data):
    x = np.array(points)
    mass = np.array(data.draw(st.lists(st.floats(0.05, 1.0), min_size=len(x), max_size=len(x))))
    mass /= mass.sum()
    cost = np.abs(x[:, None] - x[None, :])  # a metric: zero on the diagonal
    assert emd(mass, mass, cost).cost <= 1e-12


def _uot(a, b, cost, *, reg, reg_a, reg_b, tol=1e-10):
    out = unbalanced_sinkhorn_batch(*_t(a, b, cost), reg=reg, reg_a=reg_a, reg_b=reg_b, tol=tol)
    return float(out.cost[0]), out.plan[0].numpy()


@SETTINGS
@given(problems(), st.sampled_from([1e-2, 1e-3]))
def test_balanced_entropic_tends_to_the_emd_as_eps_goes_to_zero(problem, eps):
    """λa = λb = ∞ is balanced entropic OT: exact marginals, cost in [EMD, EMD + ε log(n m)]."""
    a, b, cost = problem
    got, plan = _uot(a, b, cost, reg=eps, reg_a=math.inf, reg_b=math.inf, tol=1e-12)
    np.testing.assert_allclose(plan.sum(1), a, atol=1e-6, rtol=0)
    np.testing.assert_allclose(plan.sum(0), b, atol=1e-6, rtol=0)
    exact = emd(a, b, cost).cost
    n, m = cost.shape
    assert exact - 1e-6 <= got <= exact + eps * math.log(n * m) + 1e-6, (got, exact)


@SETTINGS
@given(problems(), st.floats(0.05, 5.0), st.floats(0.05, 5.0))
def test_unbalanced_is_symmetric_when_the_roles_swap(problem, reg_a, reg_b):
    a, b, cost = problem
    one, plan = _uot(a, b, cost, reg=0.05, reg_a=reg_a, reg_b=reg_b)
    other, plan_t = _uot(b, a, cost.T, reg=0.05, reg_a=reg_b, reg_b=reg_a)
    assert math.isclose(one, other, abs_tol=1e-7)
    np.testing.assert_allclose(plan, plan_t.T, atol=1e-7, rtol=0)


@SETTINGS
@given(problems())
@example((np.array([0.82758621, 0.17241379]), np.array([0.09248555, 0.07514451, 0.83236994]),
          np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])))  # λ 10 -> 100 only 2.2 times closer: not yet 1/λ
def test_unbalanced_tends_to_balanced_as_lambda_goes_to_infinity(problem):
    """KL penalties of strength λ: the distance to the balanced entropic solution with the same ε (its
    marginals and cost) shrinks like 1/λ once λ is large (here from λ = 100 on; between 10 and 100 a problem can
    still be on its way there)."""
    a, b, cost = problem
    eps = 0.05
    balanced, _ = _uot(a, b, cost, reg=eps, reg_a=math.inf, reg_b=math.inf, tol=1e-12)
    errors = []
    for lam in (1e1, 1e2, 1e3):
        got, plan = _uot(a, b, cost, reg=eps, reg_a=lam, reg_b=lam, tol=1e-9)
        errors.append(max(np.abs(plan.sum(1) - a).max(), np.abs(plan.sum(0) - b).max(), abs(got - balanced)))
    assert errors[1] <= 1e-2, errors
    assert errors[1] <= errors[0] + 1e-9, errors  # closer as λ grows
    assert errors[2] <= 0.2 * errors[1] + 1e-9, errors  # ten times λ: at least five times closer


@SETTINGS
@given(problems())
def test_unbalanced_with_no_relaxation_on_one_side_keeps_that_marginal(problem):
    """λa = ∞ (exact row marginal), λb finite: rows sum to a."""
    a, b, cost = problem
    _, plan = _uot(a, b, cost, reg=0.05, reg_a=math.inf, reg_b=0.5, tol=1e-12)
    np.testing.assert_allclose(plan.sum(1), a, atol=1e-6, rtol=0)
