/* gpuarrays._core -- the compiled hot paths: the one internal header.
 *
 * What lives in the compiled core, and only because Python cannot reach the
 * targets of docs/design.md, "Performance":
 *   Lock      a plain lock whose non-blocking try the pool can take from C;
 *   State     the process-wide switches read on every allocation;
 *   Epoch     one generation of a device (a reset kills it);
 *   Storage   the reference-counted allocation (handles + release token);
 *   Array     the fields and lifetime (free, finalizer) of GPUArray;
 *   Pool      the warm-pool hit and the free of MemoryManager;
 *   Cache     the hit and the release of AllocCache;
 *   new_array the allocation path of ga.empty: dispatch to the cache or the pool;
 *   Gate      the per-device usage gate's shared entry and exit;
 *   apply     the elementwise hot path: check, type (remembered), allocate, run the
 *             cpu engine (NumPy on remembered views) or call the device engine;
 *   Launch    a generated kernel's enqueue on an OpenCL device, arguments and all.
 *   Filler    zeros, ones, full, the _like functions; the uploads of asarray, arange,
 *   Uploader  linspace, eye: allocate and write the new array in one call (a memset, a
 *   Writer    pattern, a memcpy on cpu; one asynchronous enqueue on OpenCL).
 * Everything else -- the ladder, trim, statistics, resets, errors -- stays in
 * Python, in the subclasses (storage.Storage, array.GPUArray, pool.MemoryManager,
 * cache.AllocCache); the slow paths here call back into them.  The design is
 * docs/design.md: "The storage model", "Release", "Pools, limits and the
 * out-of-memory ladder", "Allocation caches", "Performance".
 *
 * The files, all compiled into the one extension gpuarrays._core (setup.py):
 *   lock.c     Lock, State, Epoch                      calls nothing of the others
 *   storage.c  Storage and the home protocol           pool.c, cache.c
 *   array.c    Array (fields, free, finalizer), make() storage.c
 *   pool.c     Pool: warm-pool hit and free            lock.c, storage.c
 *   cache.c    Cache: hit, release, busy storages      lock.c, storage.c, pool.c
 *   alloc.c    new_array/empty and the new_storage hot path
 *                                                      storage.c, array.c, pool.c, cache.c
 *   gate.c     Gate: the usage gate's counters         nothing
 *   working.c  Working: holds for work in flight       storage.c, gate.c
 *   compute.c  apply(), Plan, host_view: the elementwise hot path
 *                                                      alloc.c, array.c, gate.c, launch.c
 *   launch.c   ClKernel, Launch, DeviceEngine: generated kernels enqueued on OpenCL
 *              devices from C                          compute.c
 *   fill.c     Writer, Filler, Uploader: creation functions written from C
 *                                                      alloc.c, array.c, gate.c, working.c,
 *                                                      compute.c (ga_array_address)
 *   streams.c  each thread's current stream per device; a storage's used streams
 *                                                      nothing (reads PoolObject.streams)
 *   module.c   the module, configure(), init; defines the globals declared here
 * storage.c and pool.c/cache.c call each other on purpose: a storage gives its memory
 * back to its home, and a home makes its storages.
 *
 * This header holds only what more than one file uses: the shared object layouts,
 * the globals (defined once, in module.c or alloc.c as noted), the small inline
 * helpers and the cross-file functions.  Everything declared here is prefixed
 * ga_ (the object layouts and GRANULARITY aside); whatever one file alone uses
 * stays static there.  Nothing declared here is exported from the shared object
 * (hidden visibility): only PyInit__core is, as when the core was one file.
 *
 * Thread safety is the GIL's: no C section runs Python code or releases the GIL
 * between reading and writing shared state, except where a Python method is
 * called on purpose (slow paths, the observed-allocation notes).  Pool and cache
 * state shared with Python code is guarded by their Lock; frees that cannot take
 * it at once are queued, never waited for.
 */
#ifndef GPUARRAYS_CORE_H
#define GPUARRAYS_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pythread.h>
#if defined(__linux__)
#include <semaphore.h>
#endif

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* ---------------------------------------------------------------- shared layouts */

/* On Linux the Lock is a POSIX semaphore: its try is one atomic operation, where
 * CPython's lock (3.11) reads the clock for every try, even a non-blocking one (two
 * tries per allocate-and-free). */
#if defined(__linux__)
#define GA_SEM_LOCK 1 /* semaphore.h is included above, outside the hidden visibility */
#endif

typedef struct {
    PyObject_HEAD
#ifdef GA_SEM_LOCK
    sem_t sem;
    char ready; /* sem initialised */
#else
    PyThread_type_lock lock;
#endif
    char locked;
} LockObject;

typedef struct {
    PyObject_HEAD
    char shutting_down;
    PyObject *recorders; /* list of stats.Recorder */
    PyObject *history;   /* history.History or None */
} StateObject;

typedef struct {
    PyObject_HEAD
    char live;
    PyObject *generation;
} EpochObject;

typedef struct StorageObject {
    PyObject_HEAD
    PyObject *ptr, *nbytes, *device, *kind, *owned, *owner, *block;
    PyObject *epoch, *home, *reason;
    Py_ssize_t handles; /* live handles: arrays (and what they hand out) */
    char token;         /* 1 while the right to give the memory back is unclaimed */
    /* holds: the handles gpuarrays cannot revoke (host views, DLPack capsules) and the
     * work in flight; while any is left a claimed token quarantines the memory instead
     * of giving it back (storage.c).  Storages with holds are on one list. */
    char quarantined;
    Py_ssize_t holds;
    struct StorageObject *held_prev, *held_next;
    PyObject *weakreflist;
    /* served by a cache: its buffer entry, the list it goes back to, its busy slot */
    PyObject *served, *served_in;
    Py_ssize_t busy_pos;
    /* the streams it was allocated or used on while its device had streams (a list without
     * repeats, None for the default stream), or NULL: its release is ordered after their
     * work (streams.c, pool.py) */
    PyObject *streams;
} StorageObject;

#define GRANULARITY 512

typedef struct {
    PyObject_HEAD
    LockObject *lock;
    PyObject *pending;    /* list of (kind, ptr, size, epoch) queued frees */
    PyObject *free_lists; /* kind -> {block size -> [ptr]} */
    PyObject *live;       /* ptr -> block size, every block out of the pool */
    PyObject *epoch;
    PyObject *device;
    Py_ssize_t used, pool_bytes, peak, alloc_count, alloc_bytes, cache_hits;
    /* live streams of the device besides its default one: while any, every free is
     * stream-ordered (MemoryManager.give_ordered) and caches do not reuse buffers */
    Py_ssize_t streams;
} PoolObject;

typedef struct {
    PyObject_HEAD
    StorageObject *storage;
    PyObject *shape, *strides, *offset, *dtype, *contig;
    char writeable, freed, hold;
    PyObject *weakreflist;
} ArrayObject;

typedef struct {
    PyObject_HEAD
    Py_ssize_t readers; /* shared holds */
    Py_ssize_t waiting; /* threads waiting on the Python condition */
    char writer;        /* a reset holds the gate */
    char forked;        /* a fork's child: holds of threads that did not survive are gone */
} GateObject;

/* CacheObject (cache.c) and PlanObject (compute.c) are private to their files. */

/* ---------------------------------------------------------------- the types */

extern PyTypeObject ga_LockType;    /* lock.c */
extern PyTypeObject ga_StateType;   /* lock.c */
extern PyTypeObject ga_EpochType;   /* lock.c */
extern PyTypeObject ga_StorageType; /* storage.c */
extern PyTypeObject ga_ArrayType;   /* array.c */
extern PyTypeObject ga_PoolType;    /* pool.c */
extern PyTypeObject ga_CacheType;   /* cache.c */
extern PyTypeObject ga_GateType;    /* gate.c */
extern PyTypeObject ga_PlanType;    /* compute.c */
extern PyTypeObject ga_FunctionType; /* compute.c */
extern PyTypeObject ga_ClKernelType; /* launch.c */
extern PyTypeObject ga_LaunchType;   /* launch.c */
extern PyTypeObject ga_DeviceEngineType; /* launch.c */

/* ---------------------------------------------------------------- globals (module.c) */

/* configured by the Python modules at import (configure()) */
extern PyTypeObject *ga_storage_type;  /* storage.Storage */
extern PyTypeObject *ga_array_type;    /* array.GPUArray */
extern PyObject *ga_cache_var;         /* cache.current_cache (ContextVar) */
extern PyObject *ga_slow_new_storage;  /* alloc.new_storage (zero size, recording) */
extern PyObject *ga_slow_new_array;    /* array._new_array_slow (sizes past 2**63) */
extern PyObject *ga_warning;           /* errors.GPUArraysWarning */
extern PyObject *ga_device_var;        /* devices._current (ContextVar) */
extern PyObject *ga_default_devices;   /* devices._default (list, empty until resolved) */
extern PyObject *ga_get_device;        /* devices.get_device */
extern PyObject *ga_device_type;       /* devices.Device */
extern PyObject *ga_normalize_shape;   /* layout.normalize_shape */
extern PyObject *ga_float64;           /* the dtype of an omitted dtype: None (the device's default) */

/* configured by the compute layer at import (compute.c uses them) */
extern PyObject *ga_make_view;         /* cpu_engine.make_view(address, shape, strides, dtype) */
extern PyObject *ga_plans;             /* dispatch: {Op: _core.Plan} */
extern PyObject *ga_apply_slow;        /* dispatch.apply_slow(op, args, out) */
extern PyObject *ga_errstate_var;      /* NumPy's error-state ContextVar (or NULL) */
extern PyObject *ga_errstate_quiet;    /* its value that ignores every floating-point error */
extern PyObject *ga_ops;               /* table.OPS: {name: Op} */
extern PyObject *ga_operators_slow;    /* operators.py's (binary, reflected, inplace, unary) */

/* made at init: the one State (_core.state), 0, and the interned names */
extern StateObject *ga_state;
extern PyObject *ga_zero;
extern PyObject *ga_str_local, *ga_str_forced, *ga_str_release_storage, *ga_str_take_block,
    *ga_str_note_taken, *ga_str_note_put, *ga_str_apply_pending, *ga_str_bad_kind,
    *ga_str_memory, *ga_str_itemsize, *ga_str_note_reuse, *ga_str_storage,
    *ga_str_new_storage, *ga_str_accepts, *ga_str_dtype_of, *ga_str_device,
    *ga_str_give_ordered;

/* ---------------------------------------------------------------- the memo (alloc.c) */

/* What the last allocation looked up, kept because loops allocate alike (each a
 * strong reference; all read and replaced under the GIL with no Python in between).
 * Devices' memory managers never change and their dtype caches only grow, so a
 * remembered answer stays right. */
struct ga_memo {
    PyObject *dev, *dtype_arg, *dt;       /* resolve_dtype(dev, dtype_arg) */
    PyObject *mgr_dev, *mgr;              /* mgr_dev.memory */
    PyObject *item_dtype, *strides1;      /* (item_dtype.itemsize,) */
    Py_ssize_t itemsize;
    Py_ssize_t nbytes, size;              /* the ints behind nbytes_obj, size_obj */
    PyObject *nbytes_obj, *size_obj;
};
extern struct ga_memo ga_memo;

static inline void ga_memo_set(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    *slot = Py_NewRef(value);
    Py_XDECREF(old);
}

/* A Py_ssize_t as an int object, reusing the remembered one when equal. */
static inline PyObject *ga_memo_int(Py_ssize_t v, Py_ssize_t *key, PyObject **obj)
{
    if (*obj != NULL && *key == v)
        return Py_NewRef(*obj);
    PyObject *o = PyLong_FromSsize_t(v);
    if (o != NULL) {
        ga_memo_set(obj, o);
        *key = v;
    }
    return o;
}

/* ---------------------------------------------------------------- lock.c */

static inline int ga_lock_try(LockObject *l)
{
#ifdef GA_SEM_LOCK
    if (sem_trywait(&l->sem) == 0) {
#else
    if (PyThread_acquire_lock(l->lock, NOWAIT_LOCK)) {
#endif
        l->locked = 1;
        return 1;
    }
    return 0;
}

static inline void ga_lock_release(LockObject *l)
{
    l->locked = 0;
#ifdef GA_SEM_LOCK
    sem_post(&l->sem);
#else
    PyThread_release_lock(l->lock);
#endif
}

/* Wait for the lock with the GIL released.  1: acquired, 0: timed out, -1: error
 * (a signal handler raised while waiting). */
int ga_lock_wait(LockObject *l, PY_TIMEOUT_T timeout_us);

/* Whether allocations are being observed (a history or a record_allocations block). */
static inline int ga_observed(void)
{
    return ga_state->history != Py_None || PyList_GET_SIZE(ga_state->recorders) != 0;
}

static inline int ga_epoch_live(PyObject *epoch)
{
    return Py_IS_TYPE(epoch, &ga_EpochType) && ((EpochObject *)epoch)->live;
}

/* ---------------------------------------------------------------- storage.c */

/* A new storage (of ga_storage_type) whose memory goes back to `home`. */
StorageObject *ga_storage_alloc(PyObject *ptr, PyObject *nbytes, PyObject *device,
                                PyObject *kind, PyObject *block, PyObject *epoch,
                                PyObject *home);
/* Give the memory back to the storage's home (the token is already claimed). */
int ga_storage_give_back(StorageObject *st);
/* Release one handle; the last one gives the memory back. */
int ga_storage_decref(StorageObject *st);
/* Claim the token with `reason`; 1 if this call won it. */
int ga_storage_claim(StorageObject *st, PyObject *reason);
/* Claim the token and give the memory back, or quarantine it while holds remain. */
int ga_storage_release(StorageObject *st, PyObject *reason);
/* One more hold (the caller already counts a handle for it). */
void ga_storage_hold(StorageObject *st);
/* A hold and its handle go; the last hold ends a quarantine. */
int ga_storage_unhold(StorageObject *st);

/* ---------------------------------------------------------------- array.c */

/* A new array taking one handle on `st` (steals nothing). */
PyObject *ga_array_make(StorageObject *st, PyObject *shape, PyObject *strides,
                        PyObject *offset, PyObject *dtype, int writeable, PyObject *contig);
/* _core.make() */
PyObject *ga_core_make(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* ---------------------------------------------------------------- pool.c */

/* MemoryManager.take_block(kind, nbytes): (ptr, block size, epoch), the slow path. */
PyObject *ga_take_block(PyObject *mgr, PyObject *kind, PyObject *nbytes_obj);
/* A pooled storage of `nbytes` (> 0): the warm-pool hit in C, anything else in Python. */
PyObject *ga_pool_new_storage(PyObject *self, PyObject *kind, Py_ssize_t nbytes,
                              PyObject *nbytes_obj);
/* Return a block to the pool; never waits (queues the free if the lock is busy).  While
 * the device has streams the free is stream-ordered: `recorded` is the storage's list of
 * streams, Py_None for a storage no stream used since, NULL when unknown (then ordered
 * after every stream of the device). */
int ga_pool_give_block(PyObject *mgr, PyObject *kind, PyObject *ptr, PyObject *size,
                       PyObject *epoch, PyObject *recorded);

/* ---------------------------------------------------------------- cache.c */

/* A storage over a cached buffer (reused when one is free, else a new one). */
PyObject *ga_cache_storage(PyObject *self, PyObject *device, PyObject *kind,
                           PyObject *nbytes_obj);
/* Home protocol; may run in a finalizer, so it never waits for the lock. */
int ga_cache_release(PyObject *cache, StorageObject *st);
/* A storage leaving for good (deallocated or cleared): out of its cache's busy array. */
void ga_storage_unbusy(StorageObject *st);
/* A storage of a pool or cache dropped before any array took a handle: memory back. */
void ga_storage_return_orphan(StorageObject *self);

/* Release the array's handle (free(force=False)). */
int ga_array_free(PyObject *a);

/* ---------------------------------------------------------------- gate.c */

/* Take / let go of a shared hold on a Gate (type checked by the caller: ga_gate_check). */
int ga_gate_enter(PyObject *gate);
int ga_gate_exit(PyObject *gate);
int ga_gate_check(PyObject *gate);
int ga_gate_init(void);

/* ---------------------------------------------------------------- working.c */

/* Holds for work in flight: one more handle and hold on each storage / their release;
 * whether a storage is live (not freed, not reset). */
extern PyTypeObject ga_WorkingType;
int ga_work_hold(StorageObject *const *held, int n); /* holds taken even on -1 */
int ga_work_unhold(StorageObject *const *held, int n);
int ga_work_live(StorageObject *st);
int ga_working_init(void);

/* ---------------------------------------------------------------- compute.c */

/* Whether x is a gpuarrays array: GPUArray itself first (a subtype check walks the MRO). */
static inline int ga_is_array(PyObject *x)
{
    return Py_IS_TYPE(x, ga_array_type) || PyObject_TypeCheck(x, &ga_ArrayType);
}

/* Whether two tuples of ints (shapes, strides) are equal; anything odd is "not equal",
 * never an error. */
int ga_same_ints(PyObject *a, PyObject *b);

/* The address of a's first element; -1 with an exception for a storage address or offset
 * that is not an int. */
int ga_array_address(ArrayObject *a, size_t *addr);

/* _core.apply() and _core.host_view() */
PyObject *ga_core_apply(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames);
PyObject *ga_core_host_view(PyObject *mod, PyObject *arg);
int ga_compute_init(PyObject *m);

/* ---------------------------------------------------------------- launch.c */

/* Whether `engine` is a DeviceEngine; its Python engine (borrowed); its compiled run into
 * result (`given`: the caller's output): 0 launched, 1 run the Python engine instead, -1
 * error.  `tuple` holds xs, or is NULL. */
int ga_device_engine_check(PyObject *engine);
PyObject *ga_device_engine_fallback(PyObject *engine);
int ga_device_engine_run(PyObject *engine, PyObject *result, PyObject *const *xs, int n,
                         PyObject *tuple, int given);
int ga_launch_init(PyObject *m);

/* ---------------------------------------------------------------- alloc.c */

/* _core.new_array() and _core.empty() */
PyObject *ga_core_new_array(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *ga_core_empty(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames);
/* empty()'s arguments resolved (new references): the device (`device`, else the current
 * one, else the default), the shape as a tuple of non-negative ints, the device's checked
 * dtype for `dtype` (None: its default floating type). */
PyObject *ga_resolve_device(PyObject *device);
PyObject *ga_resolve_shape(PyObject *shape);
PyObject *ga_resolve_dtype(PyObject *dev, PyObject *dtype);

/* ---------------------------------------------------------------- streams.c */

/* How many devices have a current stream in the calling thread (0: the hot paths' case). */
extern _Thread_local int ga_current_count;
extern Py_ssize_t ga_streams_alive; /* live non-default streams, every device */
PyObject *ga_thread_stream(PyObject *device); /* borrowed, or NULL: the default */
int ga_storage_record_slow(StorageObject *st);
/* Whether this thread is inside a stream of any device now. */
static inline int ga_in_stream(void)
{
    return ga_current_count != 0;
}
/* Remember the current stream of st's device on st (the default one only while the device
 * has streams); -1: error. */
static inline int ga_storage_record(StorageObject *st)
{
    return (ga_current_count || ga_streams_alive) ? ga_storage_record_slow(st) : 0;
}
PyObject *ga_core_set_thread_stream(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *ga_core_thread_stream(PyObject *mod, PyObject *device);
PyObject *ga_core_add_streams(PyObject *mod, PyObject *delta);

/* ---------------------------------------------------------------- fill.c */

extern PyTypeObject ga_WriterType, ga_FillerType, ga_UploaderType;
int ga_fill_init(void);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUARRAYS_CORE_H */
