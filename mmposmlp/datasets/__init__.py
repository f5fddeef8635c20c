"""Dataset helpers (toy dataset generators and transforms)."""
