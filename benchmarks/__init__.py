"""lyra's benchmarks: timing scripts that print ratios, never run as tests.

``python -m benchmarks`` runs them all and prints one table; see
``benchmarks/README.md``. Each module also runs alone: ``python benchmarks/NAME.py``.
"""
