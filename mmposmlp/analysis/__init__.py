"""Analysis tools that sit above the models: speed/memory benchmarks and complexity (params, FLOPs).

Kept apart from :mod:`mmposmlp.utils` (ground utilities: compatibility, environment, distributed set-up), which
the models import; nothing below this package imports it.
"""
