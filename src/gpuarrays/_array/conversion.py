"""NumPy's conversion protocol (``np.asarray(a)``, ``np.array(a)``): it follows the memory.

Memory the host addresses in place -- the device's ``info.host_kinds`` (every kind on
``cpu`` and on an OpenCL CPU device such as PoCL, fine-grain SVM, CUDA pinned and
managed memory), and ``"host"``/``"unified"`` everywhere -- converts as a zero-copy
NumPy view that holds the storage (``transfer.pinned_view``); ``a.host_view()`` is the
same view. Other device memory is refused with ``TypeError``: copying
it to the host is slow and must be asked for (``a.get()``, ``ga.to_numpy(a)``).

``GPUARRAYS_STRICT_HOST=1`` keeps only ``"host"`` and ``"unified"`` memory convertible,
on every device, so that ``cpu:0`` refuses what a GPU would; it is read at each call
(docs/design.md, "Foreign memory"; docs/decisions.md says why).
"""

from __future__ import annotations

import os

import numpy as np

from . import transfer

__all__ = ["STRICT_HOST_ENV", "strict_host", "numpy_kinds", "to_numpy_protocol"]

STRICT_HOST_ENV = "GPUARRAYS_STRICT_HOST"
_OFF = ("", "0")
_ON = ("1",)


def strict_host() -> bool:
    """Whether ``GPUARRAYS_STRICT_HOST`` is set to ``1`` now (``ValueError`` for a value
    other than ``0``, ``1`` or empty)."""
    value = os.environ.get(STRICT_HOST_ENV, "").strip()
    if value in _OFF:
        return False
    if value in _ON:
        return True
    raise ValueError(f"{STRICT_HOST_ENV}={value!r} is not understood; set it to 1 (NumPy "
                     f"converts only kind='host' and kind='unified' arrays, as on a GPU) or "
                     f"to 0 / unset it (NumPy converts all memory the host addresses in place)")


def numpy_kinds(device) -> tuple[str, ...]:
    """The memory kinds of ``device`` that ``np.asarray`` converts in place now."""
    if strict_host():
        return transfer.HOST_KINDS
    return tuple(dict.fromkeys((*transfer.HOST_KINDS, *device.info.host_kinds)))


def to_numpy_protocol(a, dtype=None, copy: bool | None = None) -> np.ndarray:
    """``GPUArray.__array__``: a pinned zero-copy view, a copy, or a refusal.

    ``copy=None``: the view, or a converted copy when ``dtype`` differs; ``copy=True``: a
    new NumPy array; ``copy=False``: the view, ``ValueError`` when ``dtype`` needs a
    copy. Device memory the host cannot address raises ``TypeError`` whatever ``copy``
    says; a freed array raises ``FreedArrayError``.
    """
    st = a._live()
    kinds = numpy_kinds(st.device)
    if st.kind not in kinds:
        strict = (f"; {STRICT_HOST_ENV}=1 is set, so only kind='host' and kind='unified' "
                  f"arrays convert" if strict_host() and st.kind in st.device.info.host_kinds
                  else "")
        raise TypeError(
            f"NumPy cannot read this GPUArray in place: it is in {st.kind!r} memory on "
            f"{st.device}{strict}, and gpuarrays copies device memory to the host only when "
            f"asked; copy it with a.get() (or ga.to_numpy(a)), or allocate it with "
            f"kind='host' or kind='unified' for zero-copy NumPy views")
    want = None if dtype is None else np.dtype(dtype)
    if want is not None and want != a.dtype and copy is False:
        raise ValueError(f"np.asarray(copy=False): a {a.dtype} GPUArray cannot be viewed as "
                         f"{want} without a copy; pass copy=None or copy=True")
    view = transfer.pinned_view(a)
    if want is not None and want != view.dtype:
        return view.astype(want)  # a new array: the view, and its hold, go with this frame
    return view.copy() if copy else view
