"""The cuda backend: one GPU thread per lane through numba.cuda (``backend.py``).

Importing it raises ``ImportError`` when numba.cuda cannot run kernels here:
numba-cuda missing, neither a GPU nor the simulator (``NUMBA_ENABLE_CUDASIM=1``), or a
numba-cuda that fails to compile any kernel with this NumPy (numba-cuda 0.30 overloads
``np.row_stack``, which NumPy 2.5 removed: found on a GPU machine's image).
"""

try:
    from numba import config as _config
    from numba import cuda as _cuda
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("the cuda backend needs numba-cuda: pip install 'hydra[cuda]'") from exc

if not _config.ENABLE_CUDASIM and not _cuda.is_available():
    raise ImportError("the cuda backend needs an NVIDIA GPU with a working driver, or the "
                      "CUDA simulator (set NUMBA_ENABLE_CUDASIM=1 before importing numba)")

import numpy as _np  # noqa: E402

if not _config.ENABLE_CUDASIM and not hasattr(_np, "row_stack"):
    try:  # what numba-cuda imports when it compiles its first kernel
        import numba.cuda.np.arrayobj  # noqa: F401
    except AttributeError as exc:
        raise ImportError(f"numba-cuda cannot compile kernels with NumPy {_np.__version__} "
                          f"({exc}): install a NumPy it supports (numpy<2.5 for numba-cuda "
                          f"0.30) or a newer numba-cuda") from exc

from .backend import CudaBackend  # noqa: E402

__all__ = ["CudaBackend"]
