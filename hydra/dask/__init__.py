"""Lanes across machines on Dask (SPEC section 10).

A kernel called with a ``dask.array.Array`` as a varying argument returns at once,
lazily: each chunk of lanes becomes a Dask task (``worker.run_chunk``) that runs the
kernel's compiled code for lanes ``start:stop`` of the whole call, on whatever
scheduler is active (threads, processes, a ``distributed.Client``).  ``lane()`` and
``nlanes()`` stay global.  Cross-lane reductions and ``prefixsum`` become graph stages
(``stages``); the kernel travels as source and compiles once per worker process
(``ship``); the client builds the graph and the results (``call``).

Dask is needed only here: ``pip install hydra[dask]``.
"""

from .call import DaskCall, call, is_dask_array

__all__ = ["DaskCall", "call", "is_dask_array"]
