"""Benchmarks of hydra against its peers (NumPy, Numba, JAX); see ``run.py``."""
