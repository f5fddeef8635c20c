"""Dataset helpers (toy dataset generators and transforms)."""
from . import slowfast_sampling  # noqa: F401
from . import transforms  # noqa: F401
