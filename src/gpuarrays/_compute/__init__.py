"""The compute layer: the array API namespace (docs/compute.md).

Importing this package fills the array layer's operator hooks
(``_array/hooks.py``) so ``a + b``, ``a == b``, in-place operators and
``np.add(a, b)`` reach the elementwise engine.
"""
