"""The oracle of per-lane array tests (SPEC section 8): the undecorated per-example
function run example by example in plain Python, compared with a kernel's result.

Elementwise work is bit-exact; products and reductions add in another order when
batched (one GEMM over the lanes instead of N mat-vecs), so floats compare within
``RTOL``/``ATOL`` (docs/guide.md, "Per-lane arrays"); integers and bools exactly.
``check`` also compares the array arguments afterwards (what the function writes into
them, through views included) with the per-example run's.
"""

import numpy as np

import hydra
from hydra.backends import available

#: cuda on the CUDA simulator in CI: these tests' lane counts are small (~25 s in all)
ARRAY_BACKENDS = tuple(b for b in ("numpy", "cpu", "cuda") if available(b))
ARRAY_LANES = (1, 3, 17, 64)
RTOL = 1e-5
ATOL = 1e-5


def per_example(fn, varying, args, n):
    """fn run lane by lane in plain Python: a list of per-lane results."""
    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    out = []
    for i in range(n):
        out.append(fn(*[a[i] if name in varying else a for name, a in zip(names, args)]))
    return out


def assert_same(got, want, exact=False):
    """A kernel's result against the per-example results stacked by lane."""
    want = np.stack([np.asarray(w) for w in want])
    got = np.asarray(got)
    if got.shape == want.shape[1:]:  # a uniform result comes back once (SPEC section 8)
        got = np.broadcast_to(got, want.shape)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if exact or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def check(fn, varying, args, n, backend, exact=False, **options):
    """Compile fn for ``backend`` (with ``options``) and compare every result with the
    per-example run."""
    # on copies (fn may write its arguments); one array passed twice stays one array
    made = {id(a): a.copy(order="K") for a in args if isinstance(a, np.ndarray)}
    copies = [made.get(id(a), a) for a in args]
    want = per_example(fn, varying, copies, n)
    got = hydra.compile(fn, varying=varying, backend=backend, **options)(*args)
    if isinstance(want[0], tuple):
        assert isinstance(got, tuple) and len(got) == len(want[0])
        for j in range(len(got)):
            assert_same(got[j], [w[j] for w in want], exact)
    else:
        assert_same(got, want, exact)
    for a, c in zip(args, copies):  # what the function writes into its arguments too
        if isinstance(a, np.ndarray):
            assert_same(a[None], [c], exact)
    return got
