"""ga.fuse: whole expressions in one kernel (docs/fusion.md)."""
