"""The cuda backend: one GPU thread per lane through numba.cuda (``backend.py``).

Importing it raises ``ImportError`` when numba.cuda cannot run kernels here:
numba-cuda missing, or neither a GPU nor the simulator (``NUMBA_ENABLE_CUDASIM=1``).
"""

try:
    from numba import config as _config
    from numba import cuda as _cuda
except ImportError as exc:  # pragma: no cover - depends on the installation
    raise ImportError("the cuda backend needs numba-cuda: pip install 'hydra[cuda]'") from exc

if not _config.ENABLE_CUDASIM and not _cuda.is_available():
    raise ImportError("the cuda backend needs an NVIDIA GPU with a working driver, or the "
                      "CUDA simulator (set NUMBA_ENABLE_CUDASIM=1 before importing numba)")

from .backend import CudaBackend  # noqa: E402

__all__ = ["CudaBackend"]
