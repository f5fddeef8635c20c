"""Dataset helpers (toy dataset generators and transforms)."""
from . import transforms  # noqa: F401
