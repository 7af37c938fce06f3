"""The per-lane array executor's contracts (hydra/executor, docs/DESIGN.md): every
region runs planned steps through the one runner; the reference plans every op as its
host rule; the steps of a compacted loop are Steps whose fallbacks go through the host
of the rows, so an error names the original lane; what dies after a step is a value of
the region that nothing reads later."""

import numpy as np
import pytest

import hydra
from hydra.errors import HydraError
from hydra.executor import compact
from hydra.executor.planner import Planner
from hydra.executor.policy import AUTO, Policy
from hydra.executor.steps import OpStep, Step
from test_arrays_flow import rnn_one  # the ragged RNN per example

f32 = np.float32



def rnn_args(lanes, seed=0):
    r = np.random.default_rng(seed)
    n = r.integers(0, 6, lanes)
    n[0] = 6
    return [r.standard_normal((lanes, 6, 3)).astype(f32), n,
            r.standard_normal((4, 3)).astype(f32), r.standard_normal((4, 4)).astype(f32),
            r.standard_normal(4).astype(f32)]


def plan_of(kern, args):
    return kern.specialize(kern.signature(list(args))[1])[1].__self__


def regions(fn):
    return [r for op in fn.walk() for r in op.regions]


def test_every_planned_region_is_steps_with_deaths_of_its_own_values():
    args = rnn_args(9)
    kern = hydra.compile(rnn_one, varying=("xs", "n"), backend="cpu")
    kern(*args)
    plan = plan_of(kern, args)
    assert all(isinstance(s, Step) for s in plan.steps)
    for region in regions(plan.fn):
        own = {a.id for a in region.args} | {r.id for o in region.ops for r in o.results}
        for rows in (False, True):
            for policy in (AUTO, Policy(plan_steps=False)):
                planned = plan.planner.plan(region, rows, policy)
                assert planned is plan.planner.plan(region, rows, policy)  # cached
                ran = [o for step, _ in planned for o in step.ops]
                assert ran == region.ops[:-1]  # every op once, in program order
                for step, dead in planned:
                    assert isinstance(step, Step) and set(dead) <= own


def test_the_reference_plans_every_op_as_its_host_rule():
    args = rnn_args(5)
    kern = hydra.compile(rnn_one, varying=("xs", "n"), backend="cpu")
    kern(*args)
    fn = plan_of(kern, args).fn
    reference = Planner(fn)
    for region in [fn.body, *regions(fn)]:
        assert all(type(s) is OpStep for s, _ in reference.plan(region, False, AUTO))


def test_every_host_step_runs_in_the_one_runner(monkeypatch):
    """numpy and cpu (compacted loop included) run their host steps through
    ``steps.run_steps``: the place an event hook goes."""
    import hydra.backends.cpu.phases as phases
    import hydra.executor.host as host
    seen = []
    real = host.run_steps

    def spy(host, plan, env):
        seen.append((host.ids is not None, len(plan)))
        return real(host, plan, env)
    monkeypatch.setattr(host, "run_steps", spy)
    monkeypatch.setattr(phases, "run_steps", spy)
    args = rnn_args(16)
    want = hydra.compile(rnn_one, varying=("xs", "n"), backend="numpy")(*args)
    assert seen and not any(rows for rows, _ in seen)
    seen.clear()
    got = hydra.compile(rnn_one, varying=("xs", "n"), backend="cpu",
                        compaction=Policy(op_below=0.0))(*args)
    assert any(rows for rows, _ in seen)  # the loop ran compacted, through the runner
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def step_error(xs, n, W, i):
    h = np.zeros(3, dtype=np.float32)
    for t in range(n):
        v = np.stack([xs[t], h])      # a precomputed stack, run on the rows
        h = np.tanh(W @ v[1] + v[0]) * xs[t][i]
    return h


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_an_error_in_a_compacted_loop_names_the_original_lane(backend):
    r = np.random.default_rng(3)
    lanes = 12
    xs = r.standard_normal((lanes, 5, 3)).astype(f32)
    n = np.array([5, 1, 4, 0, 5, 2, 5, 3, 5, 1, 5, 4])
    W = r.standard_normal((3, 3)).astype(f32)
    i = np.zeros(lanes, np.int64)
    i[7] = 3  # out of bounds on lane 7, row 6 of the loop compacted at its first test
    compact.COUNTS.clear()
    kern = hydra.compile(step_error, varying=("xs", "n", "i"), backend=backend,
                         compaction=Policy(op_below=0.0))
    with pytest.raises(HydraError) as err:
        kern(xs, n, W, i)
    assert "lane 7" in str(err.value) and "out of bounds" in str(err.value)
    assert compact.COUNTS["loops"] == (backend == "cpu")  # the reference never compacts
