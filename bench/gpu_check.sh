#!/usr/bin/env bash
# The GPU check: bash bench/gpu_check.sh OUTDIR
#
# For a bare GPU machine with this project copied and no network (the device tool of the
# GPU issue).  Installs hydra with what the machine has, then runs in stages, each one
# writing its file into OUTDIR as it goes (at most 8 files, so that all come back), each
# under its own time limit so that the whole ends in about 8 minutes at worst:
#   versions.txt   GPU, driver and package versions; the install's log
#   tools.txt      ncu and compute-sanitizer on a small hydra cuda program (refused on
#                  some machines: the file says which)
#   bench_gpu.txt  python -m bench --gpu at scale 1 and 100 (hydra cuda vs numba.cuda by hand)
#   bench_ml.txt   python -m bench ml --gpu (per-example ML workloads vs PyTorch on the GPU)
#   tests.txt      the cuda tests on the GPU (NUMBA_ENABLE_CUDASIM=0, lane cap lifted)
# With GPU_CHECK_QUICK=1 (the CPU smoke test: tests/test_bench_gpu.py) every stage runs
# at its smallest size.
set -u
OUT=${1:?usage: bash bench/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export HYDRA_CACHE_DIR=${HYDRA_CACHE_DIR:-/tmp/hydra-gpu-check-cache}
QUICK=${GPU_CHECK_QUICK:-0}
if [ "$QUICK" = 1 ]; then
    export NUMBA_ENABLE_CUDASIM=1
    SCALES="0.001"; ML_SCALE=0.01; TEST_LIMIT=120; TESTS="tests/test_cuda_runtime.py"
    WORKERS=0; REPEAT=1
else
    export NUMBA_ENABLE_CUDASIM=0
    SCALES="1 100"; ML_SCALE=1; TEST_LIMIT=200; TESTS="tests"; WORKERS=8; REPEAT=5
fi
stage() { echo "== $(date -u +%H:%M:%S) $*"; }
# the whole run's budget in seconds: the tests get what the stages before them left
BUDGET=${GPU_CHECK_BUDGET:-480}
left() { local l=$((BUDGET - SECONDS - 15)); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }

# Wheels carried in .whl/ (ignored by git) replace the machine's packages: numba-cuda
# 0.30.4 overloads np.row_stack when it compiles its first kernel, and NumPy 2.5 (the GPU
# image's) removed it, so every kernel fails there unless a NumPy 2.4 wheel is carried.
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/hydra-gpu-site .whl/*.whl > "$OUT/versions.txt" 2>&1
    export PYTHONPATH="/tmp/hydra-gpu-site:$PYTHONPATH"
fi
{
    stage versions
    ls .whl 2>/dev/null | sed 's/^/carried wheel: /'
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1
    "$PY" --version
    "$PY" - <<'PY'
import importlib
for name in ("numba", "llvmlite", "numba_cuda", "numpy", "cupy", "torch", "jax", "pytest",
             "xdist"):
    try:
        print(f"{name:10} {getattr(importlib.import_module(name), '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{name:10} absent ({type(e).__name__})")
from numba import cuda
print("cuda.is_available():", cuda.is_available())
PY
    stage install
    timeout 60 "$PY" -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -5
    "$PY" -c "import hydra, sys; print('hydra from', hydra.__file__)"
} >> "$OUT/versions.txt" 2>&1

cat > /tmp/hydra_gpu_tiny.py <<'PY'
"""A small hydra cuda program (a varying loop, an array argument): for ncu and the
sanitizer; exits 1 where cuda disagrees with the numpy backend."""
import numpy as np
import hydra

def steps(x, scale):
    n = 0
    while x > 1.0 and n < 50:
        x = x * scale
        n += 1
    return n

x = np.linspace(0.5, 40.0, 1000)
got = hydra.compile(steps, varying=("x",), backend="cuda")(x, 0.75)
want = hydra.compile(steps, varying=("x",), backend="numpy")(x, 0.75)
print("cuda agrees with numpy:", bool(np.array_equal(got, want)))
raise SystemExit(0 if np.array_equal(got, want) else 1)
PY
{
    stage "plain run"; timeout 60 "$PY" /tmp/hydra_gpu_tiny.py 2>&1 | tail -5
    if [ "$QUICK" != 1 ]; then
        stage ncu
        timeout 45 ncu --clock-control none --launch-count 1 --section SpeedOfLight \
            "$PY" /tmp/hydra_gpu_tiny.py 2>&1 | tail -25
        echo "ncu exit: ${PIPESTATUS[0]}"
        stage compute-sanitizer
        timeout 45 compute-sanitizer --tool memcheck "$PY" /tmp/hydra_gpu_tiny.py 2>&1 | tail -8
        echo "compute-sanitizer exit: ${PIPESTATUS[0]}"
    fi
} > "$OUT/tools.txt" 2>&1

{
    for s in $SCALES; do
        stage "bench --gpu --scale $s"
        timeout 100 "$PY" -m bench --gpu --scale "$s" --repeat "$REPEAT" 2>&1
        echo "exit: $?"
    done
} > "$OUT/bench_gpu.txt" 2>&1

{
    stage "bench ml --gpu --scale $ML_SCALE"
    timeout 90 "$PY" -m bench ml --gpu --scale "$ML_SCALE" --repeat "$REPEAT" 2>&1
    echo "exit: $?"
} > "$OUT/bench_ml.txt" 2>&1

{
    TEST_LIMIT=$(left "$TEST_LIMIT")
    stage "cuda tests: $TESTS, lane cap lifted, ${TEST_LIMIT}s"
    XDIST=""
    [ "$WORKERS" -gt 0 ] && XDIST="-n $WORKERS"
    # SIGINT at the limit: pytest still prints its summary of what ran
    HYDRA_TEST_CUDA_LANES=1000 timeout -s INT -k 30 "$TEST_LIMIT" \
        "$PY" -m pytest $TESTS -k cuda $XDIST -p no:cacheprovider -rfE -v \
        --disable-warnings 2>&1 | grep -v " PASSED "
    echo "exit: ${PIPESTATUS[0]}"
} > "$OUT/tests.txt" 2>&1
stage done
