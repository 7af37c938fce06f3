"""The per-lane array executor: what every backend's host side runs (the numpy
reference is this alone).

``host.Host`` runs a function's regions by the steps ``planner.Planner`` plans for
them (``steps``: one Step contract, ``run(host, env)``, and one runner), the host
rules (``rules``, ``arrays``, ``scalars``) defining what each op means over all lanes;
``compact`` runs a varying loop on its active lanes' rows under the backend's
``policy``; the step kinds are ``opsteps``, ``reductions``, ``products``, ``fuse``
(native loops of elementwise chains) and ``rowsteps`` (a compacted loop's steps).  A
backend supplies a policy and a native loop compiler; this package imports no
backend (tests/test_architecture.py).
"""
