"""PyOpenCL interop: an allocator plug-in and zero-copy views both ways.

* :class:`Allocator` -- ``allocator(nbytes)`` as ``pyopencl.array`` calls it
  (``pyopencl.array.empty(queue, shape, dtype, allocator=Allocator(dev))``).
  Each call is a ``ga.empty(nbytes, uint8)`` on the OpenCL device, so it comes
  from the device's pool, or from the active ``ga.cached(...)`` cache, and shows
  in ``ga.memory_stats``, ``ga.record_allocations`` and ``ga.memory_history``.
  It returns a :class:`pyopencl.SVM` (a subclass of it) over that memory which
  holds the gpuarrays array: when PyOpenCL drops its last reference to the
  memory, the array's handle is released and the buffer goes back to its pool
  or cache.
* :func:`to_pyopencl` -- a ``pyopencl.array.Array`` over a GPUArray's memory,
  no copy.  It holds its own handle on the storage, so ``a.free()`` (local) does
  not pull the memory from under it; ``a.free(force=True)`` or a device reset
  does, as for every other sharer.  Its temporaries come from our pools too.
* :func:`from_pyopencl` -- a GPUArray over a PyOpenCL array's memory: zero-copy
  for SVM-backed arrays (ours: shares the storage; other SVM of the device's
  context: wrapped, keeping PyOpenCL's memory object alive).  ``cl.Buffer``
  memory has no address; it is copied (through the host) unless ``copy=False``.
* :func:`context_and_queue` -- the PyOpenCL context and queue the opencl
  back-end uses for a device.  PyOpenCL work must run on that context (our SVM
  pointers belong to it), and should run on that queue: it is in-order and
  shared with every gpuarrays operation and every free, so a buffer the pool
  hands out again is never reused before the kernels that used it have run.
  On another queue of the same context, synchronize before dropping arrays.

On PoCL before 3.1, do not bind PyOpenCL's own ``SVMAllocator``/``SVMPool`` to
a queue: PyOpenCL then frees with ``clEnqueueSVMFree`` over a pointer array
that PoCL reads only when the command runs, after PyOpenCL dropped it, and the
heap gets corrupted (random crashes later).  :class:`Allocator` is not
affected: its memory goes back to gpuarrays, whose back-end keeps those arrays
alive until the queue has passed them.

After ``ga.device_reset`` the device has a new context: allocators made before
raise ``DeviceResetError`` when called, and PyOpenCL arrays over memory from
before the reset must not be used (their memory is gone, as for any array).

PyOpenCL is imported lazily; without it every function raises ``ImportError``
naming the ``opencl`` extra.
"""

from __future__ import annotations

import ctypes
import operator
import threading

import numpy as np

from .._array.array import GPUArray, new_array, wrap_storage
from .._common.errors import DeviceResetError
from .._common.raw import extent
from .._memory.devices import get_device

__all__ = ["Allocator", "context_and_queue", "to_pyopencl", "from_pyopencl"]

_EXTRA_HINT = 'pip install "gpuarrays[opencl]"'
_UINT8 = np.dtype(np.uint8)

_svm_class: type | None = None
_default_allocators: dict = {}
_lock = threading.Lock()


def _pyopencl():
    """``(pyopencl, pyopencl.array)``, or an ImportError naming the extra to install."""
    try:
        import pyopencl as cl
        import pyopencl.array as cl_array
    except ImportError as e:
        raise ImportError(
            f"gpuarrays.interop.pyopencl needs PyOpenCL, which cannot be imported ({e}); "
            f"install the opencl extra: {_EXTRA_HINT}"
        ) from e
    return cl, cl_array


def _svm_type(cl) -> type:
    """The ``pyopencl.SVM`` subclass that keeps a GPUArray alive (made on first use)."""
    global _svm_class
    if _svm_class is None:
        with _lock:
            if _svm_class is None:

                class GPUArraySVM(cl.SVM):
                    """SVM memory of a gpuarrays array, for PyOpenCL.

                    ``array`` is the GPUArray whose handle keeps the memory alive
                    while this object lives; ``_queue`` is the back-end's queue
                    (PyOpenCL warns when an array on another queue uses it).
                    """

                GPUArraySVM.__qualname__ = "GPUArraySVM"
                _svm_class = GPUArraySVM
    return _svm_class


def _opencl_device(device):
    """The OpenCL device named by ``device`` (None: the current one, else the first)."""
    if device is None:
        dev = get_device()
        if dev.backend != "opencl":
            from .._memory.devices import devices

            try:
                return devices("opencl")[0]
            except ValueError as e:
                raise ValueError(f"PyOpenCL interop needs an opencl device: {e}") from None
        return dev
    dev = get_device(device)
    if dev.backend != "opencl":
        raise ValueError(
            f"PyOpenCL interop needs an opencl device, got {dev} ({dev.name}); "
            f"pass device='opencl:0' or copy the array there with a.to_device('opencl:0')"
        )
    return dev


def context_and_queue(device=None) -> tuple:
    """The ``pyopencl.Context`` and ``pyopencl.CommandQueue`` gpuarrays uses on ``device``.

    ``device``: an opencl device or spec; ``None`` is the current device if it
    is an opencl one, else the first opencl device.  ``ValueError`` for a device
    of another back-end.  The queue is in-order and shared with every gpuarrays
    operation of the calling thread on the device: inside ``with stream:`` the stream's
    queue (docs/streams.md), else the default one; after ``ga.device_reset`` both are new.
    """
    _pyopencl()
    dev = _opencl_device(device)
    return dev.impl.context_and_queue(dev.index)


def _svm_over(cl, holder: GPUArray, start: int, nbytes: int, queue):
    """A GPUArraySVM over ``[start, start + nbytes)`` that keeps ``holder`` alive."""
    buf = (ctypes.c_char * nbytes).from_address(start)
    svm = _svm_type(cl)(buf)
    svm.array = holder
    svm._queue = queue
    return svm


class Allocator:
    """A PyOpenCL allocator drawing from gpuarrays' pools and caches.

    ``Allocator(device=None, kind="device")``; ``allocator(nbytes)`` returns an
    SVM object over ``nbytes`` of fresh (uninitialised) memory of ``kind``,
    served by the active ``ga.cached`` scope of the calling thread/task, else
    by the device's pool.  The memory goes back when PyOpenCL drops the object.
    Use it with the queue from :attr:`queue` (= :func:`context_and_queue`).
    ``ValueError`` for a kind the device lacks; ``DeviceResetError`` when called
    after the device was reset.
    """

    __slots__ = ("device", "kind", "context", "queue", "_svm")

    def __init__(self, device=None, kind: str = "device") -> None:
        cl, _ = _pyopencl()
        self._svm = _svm_type(cl)
        dev = _opencl_device(device)
        if kind not in dev.kinds:
            raise ValueError(
                f"memory kind {kind!r} is not supported by {dev} ({dev.name}); "
                f"it supports {', '.join(map(repr, dev.kinds))}"
            )
        self.device = dev
        self.kind = kind
        self.context, self.queue = dev.impl.context_and_queue(dev.index)

    def __call__(self, nbytes: int):
        dev = self.device
        if dev.impl.context_and_queue(dev.index)[0] is not self.context:
            raise DeviceResetError(
                f"this PyOpenCL allocator belongs to {dev} from before a device reset "
                f"(ga.device_reset); its context is gone: make a new Allocator and use "
                f"the queue from gpuarrays.interop.pyopencl.context_and_queue({str(dev)!r})"
            )
        nbytes = operator.index(nbytes)
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        a = new_array((nbytes,), _UINT8, dev, self.kind)  # pool, or the active cache
        svm = self._svm((ctypes.c_char * nbytes).from_address(a._storage.ptr))
        svm.array = a
        svm._queue = self.queue
        return svm

    def __repr__(self) -> str:
        return f"<gpuarrays PyOpenCL Allocator on {self.device}, kind={self.kind!r}>"


def _default_allocator(dev, kind: str = "device") -> Allocator:
    """One shared allocator per (device, kind), renewed after a reset."""
    key = (dev, kind)
    alloc = _default_allocators.get(key)
    context, _ = dev.impl.context_and_queue(dev.index)
    if alloc is None or alloc.context is not context:
        with _lock:
            alloc = _default_allocators[key] = Allocator(dev, kind)
    return alloc


def to_pyopencl(a: GPUArray, queue=None):
    """A ``pyopencl.array.Array`` over ``a``'s memory, without copying.

    Writes through either are seen by the other (on the shared queue).  The
    result holds its own handle on ``a.storage``: ``a.free()`` leaves it valid,
    a forced free or a device reset do not.  Its ``allocator`` is a gpuarrays
    :class:`Allocator`, so temporaries of PyOpenCL arithmetic come from our
    pools and caches.  ``queue``: defaults to the back-end's queue; another
    queue must belong to the device's context (``ValueError``).

    Raises ``TypeError`` for a non-GPUArray, ``ValueError`` for arrays of other
    back-ends and for read-only views (PyOpenCL arrays cannot be read-only),
    ``FreedArrayError`` for a freed array.
    """
    cl, cl_array = _pyopencl()
    if not isinstance(a, GPUArray):
        raise TypeError(f"to_pyopencl expects a gpuarrays GPUArray, got {type(a).__name__}")
    st = a._live()
    dev = st.device
    if dev.backend != "opencl":
        raise ValueError(
            f"to_pyopencl needs an array on an opencl device, this one is on {dev}; "
            f"copy it first with a.to_device('opencl:0')"
        )
    if not a._writeable:
        raise ValueError(
            "to_pyopencl cannot share a read-only view (broadcast, diagonal ...): PyOpenCL "
            "arrays are always writeable; pass a.copy() instead"
        )
    context, own_queue = dev.impl.context_and_queue(dev.index)
    if queue is None:
        queue = own_queue
    elif queue.context != context:
        raise ValueError(
            f"queue belongs to another OpenCL context than {dev}'s; use a queue made on "
            f"gpuarrays.interop.pyopencl.context_and_queue({str(dev)!r})[0]"
        )
    shape, strides, dtype = a._shape, a._strides, a._dtype
    lo, hi = extent(shape, strides, dtype.itemsize)
    holder = wrap_storage(st, shape, strides, dtype, a._offset, True)  # our own handle
    start = st.ptr + a._offset + lo if hi > lo else 0
    svm = _svm_over(cl, holder, start, hi - lo, own_queue)
    return cl_array.Array(queue, shape, dtype, data=svm, offset=-lo, strides=strides,
                          allocator=_default_allocator(dev))


def _device_of_context(context):
    """The opencl device whose current context is ``context``, else None."""
    from .._memory.devices import devices

    try:
        candidates = devices("opencl")
    except ValueError:
        return None
    for dev in candidates:
        state = dev.impl._states.get(dev.index)
        if state is not None and state.context == context:
            return dev
    return None


def _same_device(device, dev) -> None:
    if device is not None and get_device(device) != dev:
        raise ValueError(
            f"from_pyopencl: the memory is on {dev}, not on {get_device(device)}; a zero-copy "
            f"import stays on its device (move it afterwards with .to_device())"
        )


def from_pyopencl(arr, *, device=None, kind: str | None = None, copy: bool | None = None
                  ) -> GPUArray:
    """A GPUArray over a ``pyopencl.array.Array``'s memory.

    * SVM memory from gpuarrays (an :class:`Allocator`, :func:`to_pyopencl`):
      the result shares that storage (a new handle; zero-copy).
    * Other SVM memory of an opencl device's context (``pyopencl.SVMAllocation``,
      ``SVMPool``): wrapped zero-copy, keeping PyOpenCL's memory object alive;
      ``kind`` defaults to what the back-end knows of the address, else
      ``"device"`` (coarse-grained: no host access), pass ``kind=`` to say more.
    * ``cl.Buffer`` memory has no address: copied through the host onto
      ``device`` (default: the array's device) -- or ``ValueError`` with
      ``copy=False``.

    ``device``: for shared memory, only checked (``ValueError`` when the memory
    is on another device).

    ``copy=True`` always returns new memory.  ``TypeError`` for anything but a
    ``pyopencl.array.Array``; ``ValueError`` for memory of a context gpuarrays
    does not use.
    """
    cl, cl_array = _pyopencl()
    if not isinstance(arr, cl_array.Array):
        raise TypeError(f"from_pyopencl expects a pyopencl.array.Array, got {type(arr).__name__}")
    base = arr.base_data
    shape = tuple(int(n) for n in arr.shape)
    strides = tuple(int(s) for s in arr.strides)
    dtype = np.dtype(arr.dtype)
    offset = int(arr.offset)
    if isinstance(base, _svm_type(cl)):
        st = base.array._live()
        _same_device(device, st.device)
        result = wrap_storage(st, shape, strides, dtype, base.svm_ptr + offset - st.ptr, True)
    elif isinstance(base, cl.SVMPointer):
        dev = _device_of_context(arr.context)
        if dev is None:
            raise ValueError(
                "from_pyopencl: this SVM memory belongs to an OpenCL context gpuarrays does "
                "not use; allocate it on the context from "
                "gpuarrays.interop.pyopencl.context_and_queue(device)"
            )
        _same_device(device, dev)
        if kind is None:
            info = dev.impl.pointer_info(base.svm_ptr)
            kind = "device" if info is None else info.kind
        from .._array.wrap import unsafe_wrap

        result = unsafe_wrap(base.svm_ptr + offset, shape, dtype, strides=strides, device=dev,
                             kind=kind, owner=base)
    elif base is None or arr.size == 0:  # no memory at all (zero-size)
        from .._array.creation import empty

        dev = _device_of_context(arr.context) if device is None else get_device(device)
        return empty(shape, dtype, device=dev or _opencl_device(None),
                     kind=kind or "device")
    else:
        if copy is False:
            raise ValueError(
                f"from_pyopencl(copy=False): a {type(base).__name__}-backed PyOpenCL array has "
                f"no address to share; allocate it with gpuarrays.interop.pyopencl.Allocator "
                f"(SVM) or allow a copy"
            )
        from .._array.creation import asarray

        if device is None:
            device = _device_of_context(arr.context) or _opencl_device(None)
        return asarray(arr.get(), device=device, kind=kind or "device")
    if copy:
        try:
            return result.copy()
        finally:
            result.free()
    return result
