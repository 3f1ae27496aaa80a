/* gpuarrays._core -- the compiled hot paths (SPEC 5, 6, 7, 12).
 *
 * What lives here, and only because Python cannot reach SPEC 12's targets:
 *   Lock      a plain lock whose non-blocking try the pool can take from C;
 *   State     the process-wide switches read on every allocation;
 *   Epoch     one generation of a device (a reset kills it);
 *   Storage   the reference-counted allocation (handles + release token);
 *   Array     the fields and lifetime (free, finalizer) of GPUArray;
 *   Pool      the warm-pool hit and the free of MemoryManager;
 *   Cache     the hit and the release of AllocCache;
 *   new_array the allocation path of ga.empty: dispatch to the cache or the pool.
 * Everything else -- the ladder, trim, statistics, resets, errors -- stays in
 * Python, in the subclasses (storage.Storage, array.GPUArray, pool.MemoryManager,
 * cache.AllocCache); the slow paths here call back into them.
 *
 * Thread safety is the GIL's: no C section below runs Python code or releases
 * the GIL between reading and writing shared state, except where a Python
 * method is called on purpose (slow paths, the observed-allocation notes).
 * Pool and cache state shared with Python code is guarded by their Lock; frees
 * that cannot take it at once are queued, never waited for (PITFALLS).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <pythread.h>

/* configured by the Python modules at import (configure()) */
static PyTypeObject *g_storage_type;  /* storage.Storage */
static PyTypeObject *g_array_type;    /* array.GPUArray */
static PyObject *g_cache_var;         /* cache.current_cache (ContextVar) */
static PyObject *g_slow_new_storage;  /* alloc.new_storage (zero size, recording) */
static PyObject *g_slow_new_array;    /* array._new_array_slow (sizes past 2**63) */
static PyObject *g_warning;           /* errors.GPUArraysWarning */
static PyObject *g_device_var;        /* devices._current (ContextVar) */
static PyObject *g_default_devices;   /* devices._default (list, empty until resolved) */
static PyObject *g_get_device;        /* devices.get_device */
static PyObject *g_device_type;       /* devices.Device */
static PyObject *g_normalize_shape;   /* layout.normalize_shape */
static PyObject *g_float64;           /* numpy.dtype("float64") */

/* What the last allocation looked up, kept because loops allocate alike (each a
 * strong reference; all read and replaced under the GIL with no Python in between).
 * Devices' memory managers never change and their dtype caches only grow, so a
 * remembered answer stays right. */
static struct {
    PyObject *dev, *dtype_arg, *dt;       /* resolve_dtype(dev, dtype_arg) */
    PyObject *mgr_dev, *mgr;              /* mgr_dev.memory */
    PyObject *item_dtype, *strides1;      /* (item_dtype.itemsize,) */
    Py_ssize_t itemsize;
    Py_ssize_t nbytes, size;              /* the ints behind nbytes_obj, size_obj */
    PyObject *nbytes_obj, *size_obj;
} memo;

static inline void memo_set(PyObject **slot, PyObject *value)
{
    PyObject *old = *slot;
    *slot = Py_NewRef(value);
    Py_XDECREF(old);
}

/* A Py_ssize_t as an int object, reusing the remembered one when equal. */
static inline PyObject *memo_int(Py_ssize_t v, Py_ssize_t *key, PyObject **obj)
{
    if (*obj != NULL && *key == v)
        return Py_NewRef(*obj);
    PyObject *o = PyLong_FromSsize_t(v);
    if (o != NULL) {
        memo_set(obj, o);
        *key = v;
    }
    return o;
}

static PyTypeObject CacheType;
static PyObject *s_local, *s_forced, *s_release_storage, *s_take_block, *s_note_taken,
    *s_note_put, *s_apply_pending, *s_bad_kind, *s_memory, *s_itemsize,
    *s_note_reuse, *s_storage, *s_new_storage, *s_accepts, *s_dtype_of, *s_device;
static PyObject *g_zero;

/* ---------------------------------------------------------------- Lock */

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;
} LockObject;

static PyTypeObject LockType;

static inline int lock_try(LockObject *l)
{
    if (PyThread_acquire_lock(l->lock, NOWAIT_LOCK)) {
        l->locked = 1;
        return 1;
    }
    return 0;
}

static inline void lock_release(LockObject *l)
{
    l->locked = 0;
    PyThread_release_lock(l->lock);
}

/* Wait for the lock with the GIL released.  1: acquired, 0: timed out, -1: error
 * (a signal handler raised while waiting). */
static int lock_wait(LockObject *l, PY_TIMEOUT_T timeout_us)
{
    if (lock_try(l))
        return 1;
    if (timeout_us == 0)
        return 0;
    for (;;) {
        PyLockStatus r;
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(l->lock, timeout_us, 1);
        Py_END_ALLOW_THREADS
        if (r == PY_LOCK_ACQUIRED) {
            l->locked = 1;
            return 1;
        }
        if (r == PY_LOCK_FAILURE)
            return 0;
        if (Py_MakePendingCalls() < 0)  /* PY_LOCK_INTR: run signal handlers */
            return -1;
    }
}

static PyObject *Lock_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void Lock_dealloc(LockObject *self)
{
    if (self->lock) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Lock_acquire(LockObject *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|pd:acquire", names, &blocking, &timeout))
        return NULL;
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_Format(PyExc_ValueError, "timeout value must be a non-negative number or -1, "
                     "got %R", PyTuple_GET_SIZE(args) > 1 ? PyTuple_GET_ITEM(args, 1) : Py_None);
        return NULL;
    }
    PY_TIMEOUT_T us = !blocking ? 0 : timeout < 0 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
    int r = lock_wait(self, us);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *Lock_enter(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    int r = lock_wait(self, -1);
    if (r < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *Lock_release(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    lock_release(self);
    Py_RETURN_NONE;
}

static PyObject *Lock_exit(LockObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return Lock_release(self, NULL);
}

static PyObject *Lock_locked(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(self->locked);
}

static PyMethodDef Lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))Lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool, as threading.Lock."},
    {"release", (PyCFunction)Lock_release, METH_NOARGS, "Release the lock."},
    {"locked", (PyCFunction)Lock_locked, METH_NOARGS, "Whether the lock is held."},
    {"__enter__", (PyCFunction)Lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Lock_exit, METH_FASTCALL, NULL},
    {NULL}};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Lock",
    .tp_doc = "A non-reentrant lock (threading.Lock's interface) that C code can try.",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Lock_new,
    .tp_dealloc = (destructor)Lock_dealloc,
    .tp_methods = Lock_methods,
};

/* ---------------------------------------------------------------- State */

typedef struct {
    PyObject_HEAD
    char shutting_down;
    PyObject *recorders; /* list of stats.Recorder */
    PyObject *history;   /* history.History or None */
} StateObject;

static StateObject *g_state;

static PyMemberDef State_members[] = {
    {"shutting_down", T_BOOL, offsetof(StateObject, shutting_down), 0,
     "Set when interpreter shutdown starts: from then on nothing reaches the platform."},
    {"recorders", T_OBJECT_EX, offsetof(StateObject, recorders), READONLY,
     "Active record_allocations() blocks."},
    {"history", T_OBJECT, offsetof(StateObject, history), 0,
     "The active history recorder or None."},
    {NULL}};

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.State",
    .tp_doc = "Process-wide switches read on hot paths (one instance: _core.state).",
    .tp_basicsize = sizeof(StateObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_members = State_members,
};

static inline int observed(void)
{
    return g_state->history != Py_None || PyList_GET_SIZE(g_state->recorders) != 0;
}

/* ---------------------------------------------------------------- Epoch */

typedef struct {
    PyObject_HEAD
    char live;
    PyObject *generation;
} EpochObject;

static PyTypeObject EpochType;

static PyObject *Epoch_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"generation", NULL};
    PyObject *generation;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!:Epoch", names, &PyLong_Type, &generation))
        return NULL;
    EpochObject *self = (EpochObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->live = 1;
    self->generation = Py_NewRef(generation);
    return (PyObject *)self;
}

static void Epoch_dealloc(EpochObject *self)
{
    Py_XDECREF(self->generation);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef Epoch_members[] = {
    {"live", T_BOOL, offsetof(EpochObject, live), 0, "False once a reset ended it."},
    {"generation", T_OBJECT_EX, offsetof(EpochObject, generation), READONLY, NULL},
    {NULL}};

static PyTypeObject EpochType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Epoch",
    .tp_doc = "Epoch(generation): one generation of a device; storages of a dead epoch "
              "predate a reset.",
    .tp_basicsize = sizeof(EpochObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Epoch_new,
    .tp_dealloc = (destructor)Epoch_dealloc,
    .tp_members = Epoch_members,
};

static inline int epoch_live(PyObject *epoch)
{
    return Py_IS_TYPE(epoch, &EpochType) && ((EpochObject *)epoch)->live;
}

/* ---------------------------------------------------------------- Storage */

typedef struct {
    PyObject_HEAD
    PyObject *ptr, *nbytes, *device, *kind, *owned, *owner, *block;
    PyObject *epoch, *home, *reason;
    Py_ssize_t handles; /* live handles: arrays (and what they hand out) */
    char token;         /* 1 while the right to give the memory back is unclaimed */
    PyObject *weakreflist;
    /* served by a cache: its buffer entry, the list it goes back to, its busy slot */
    PyObject *served, *served_in;
    Py_ssize_t busy_pos;
} StorageObject;

static PyTypeObject StorageType, PoolType, CacheType;
static int pool_give_block(PyObject *mgr, PyObject *kind, PyObject *ptr, PyObject *size,
                           PyObject *epoch);
static int cache_release(PyObject *cache, StorageObject *st);

static void storage_unbusy(StorageObject *st);

static StorageObject *storage_alloc(PyObject *ptr, PyObject *nbytes, PyObject *device,
                                    PyObject *kind, PyObject *block, PyObject *epoch,
                                    PyObject *home)
{
    PyTypeObject *type = g_storage_type ? g_storage_type : &StorageType;
    StorageObject *st = (StorageObject *)type->tp_alloc(type, 0);
    if (st == NULL)
        return NULL;
    st->ptr = Py_NewRef(ptr);
    st->nbytes = Py_NewRef(nbytes);
    st->device = Py_NewRef(device);
    st->kind = Py_NewRef(kind);
    st->owned = Py_NewRef(Py_True);
    st->owner = Py_NewRef(Py_None);
    st->block = Py_NewRef(block);
    st->epoch = Py_NewRef(epoch);
    st->home = Py_NewRef(home);
    st->reason = Py_NewRef(Py_None);
    st->token = 1;
    return st;
}

static PyObject *Storage_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"ptr", "nbytes", "device", "kind", "home", "epoch", "block",
                            "owned", "owner", NULL};
    PyObject *ptr, *nbytes, *device, *kind, *home, *epoch, *block = g_zero,
             *owned = Py_True, *owner = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!OOOO!|O!OO:Storage", names, &PyLong_Type,
                                     &ptr, &PyLong_Type, &nbytes, &device, &kind, &home,
                                     &EpochType, &epoch, &PyLong_Type, &block, &owned, &owner))
        return NULL;
    StorageObject *st = (StorageObject *)type->tp_alloc(type, 0);
    if (st == NULL)
        return NULL;
    st->ptr = Py_NewRef(ptr);
    st->nbytes = Py_NewRef(nbytes);
    st->device = Py_NewRef(device);
    st->kind = Py_NewRef(kind);
    st->owned = Py_NewRef(PyObject_IsTrue(owned) ? Py_True : Py_False);
    st->owner = Py_NewRef(owner);
    st->block = Py_NewRef(block);
    st->epoch = Py_NewRef(epoch);
    st->home = Py_NewRef(home);
    st->reason = Py_NewRef(Py_None);
    st->token = 1;
    return (PyObject *)st;
}

static int Storage_traverse(StorageObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->device);
    Py_VISIT(self->owner);
    Py_VISIT(self->epoch);
    Py_VISIT(self->home);
    Py_VISIT(self->served);
    Py_VISIT(self->served_in);
    return 0;
}

static int Storage_clear(StorageObject *self)
{
    /* Only what can close a cycle; finalizers (which give memory back through
     * the home) have run before the collector clears anything. */
    storage_unbusy(self);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->home);
    return 0;
}

static void storage_return_orphan(StorageObject *self);

static void Storage_dealloc(StorageObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->token && self->handles == 0 && self->home)
        storage_return_orphan(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    Storage_clear(self);
    Py_XDECREF(self->ptr);
    Py_XDECREF(self->nbytes);
    Py_XDECREF(self->device);
    Py_XDECREF(self->kind);
    Py_XDECREF(self->owned);
    Py_XDECREF(self->block);
    Py_XDECREF(self->epoch);
    Py_XDECREF(self->reason);
    Py_XDECREF(self->served);
    Py_XDECREF(self->served_in);
    type->tp_free((PyObject *)self);
}

/* Give the memory back to the storage's home (the token is already claimed). */
static int storage_give_back(StorageObject *st)
{
    PyObject *home = st->home;
    if (home == NULL || home == Py_None)
        return 0;
    if (PyObject_TypeCheck(home, &PoolType))
        return pool_give_block(home, st->kind, st->ptr, st->block, st->epoch);
    if (PyObject_TypeCheck(home, &CacheType))
        return cache_release(home, st);
    Py_INCREF(home);
    PyObject *r = PyObject_CallMethodOneArg(home, s_release_storage, (PyObject *)st);
    Py_DECREF(home);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int storage_decref(StorageObject *st)
{
    if (st->handles > 0)
        st->handles--;
    if (st->handles == 0 && st->token) {
        st->token = 0;
        Py_SETREF(st->reason, Py_NewRef(s_local));
        return storage_give_back(st);
    }
    return 0;
}

/* Claim the token with `reason`; 1 if this call won it. */
static int storage_claim(StorageObject *st, PyObject *reason)
{
    if (!st->token)
        return 0;
    st->token = 0;
    Py_INCREF(reason);
    Py_SETREF(st->reason, reason);
    return 1;
}

static PyObject *Storage_decref(StorageObject *self, PyObject *Py_UNUSED(ignored))
{
    if (storage_decref(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Storage_release(StorageObject *self, PyObject *reason)
{
    if (!storage_claim(self, reason))
        Py_RETURN_FALSE;
    if (storage_give_back(self) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *Storage_invalidate(StorageObject *self, PyObject *reason)
{
    return PyBool_FromLong(storage_claim(self, reason));
}

static inline int storage_is_freed(StorageObject *st)
{
    return st->reason != Py_None || !epoch_live(st->epoch);
}

static PyObject *Storage_get_is_freed(StorageObject *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(storage_is_freed(self));
}

static PyObject *Storage_get_refcount(StorageObject *self, void *Py_UNUSED(c))
{
    return PyLong_FromSsize_t(storage_is_freed(self) ? 0 : self->handles);
}

static PyMethodDef Storage_methods[] = {
    {"decref", (PyCFunction)Storage_decref, METH_NOARGS,
     "Release one handle; the last one gives the memory back to its home."},
    {"release", (PyCFunction)Storage_release, METH_O,
     "release(reason) -> bool: give the memory back now, whatever handles remain; "
     "True if this call did it."},
    {"invalidate", (PyCFunction)Storage_invalidate, METH_O,
     "invalidate(reason) -> bool: mark freed without giving the memory back (the caller "
     "takes it); True if won."},
    {NULL}};

static PyGetSetDef Storage_getset[] = {
    {"is_freed", (getter)Storage_get_is_freed, NULL, "Whether the memory was given back.", NULL},
    {"refcount", (getter)Storage_get_refcount, NULL,
     "Number of live handles on this storage (0 once it is freed).", NULL},
    {NULL}};

static PyMemberDef Storage_members[] = {
    {"ptr", T_OBJECT_EX, offsetof(StorageObject, ptr), READONLY, "Base address."},
    {"nbytes", T_OBJECT_EX, offsetof(StorageObject, nbytes), READONLY, "Bytes requested."},
    {"device", T_OBJECT_EX, offsetof(StorageObject, device), READONLY, NULL},
    {"kind", T_OBJECT_EX, offsetof(StorageObject, kind), READONLY, NULL},
    {"owned", T_OBJECT_EX, offsetof(StorageObject, owned), READONLY,
     "Whether gpuarrays frees the memory."},
    {"owner", T_OBJECT, offsetof(StorageObject, owner), 0,
     "Kept alive while the storage lives (wrapped memory)."},
    {"block", T_OBJECT_EX, offsetof(StorageObject, block), READONLY,
     "Bytes taken from the pool (0 when not pooled)."},
    {"_epoch", T_OBJECT_EX, offsetof(StorageObject, epoch), READONLY, NULL},
    {"_home", T_OBJECT, offsetof(StorageObject, home), READONLY, NULL},
    {"_reason", T_OBJECT, offsetof(StorageObject, reason), READONLY, NULL},
    {"_handle_count", T_PYSSIZET, offsetof(StorageObject, handles), READONLY, NULL},
    {NULL}};

static PyTypeObject StorageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Storage",
    .tp_doc = "Storage(ptr, nbytes, device, kind, home, epoch, block=0, owned=True, "
              "owner=None): one allocation shared by every array derived from it.",
    .tp_basicsize = sizeof(StorageObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = Storage_new,
    .tp_dealloc = (destructor)Storage_dealloc,
    .tp_traverse = (traverseproc)Storage_traverse,
    .tp_clear = (inquiry)Storage_clear,
    .tp_weaklistoffset = offsetof(StorageObject, weakreflist),
    .tp_methods = Storage_methods,
    .tp_getset = Storage_getset,
    .tp_members = Storage_members,
};

/* ---------------------------------------------------------------- Array */

typedef struct {
    PyObject_HEAD
    StorageObject *storage;
    PyObject *shape, *strides, *offset, *dtype, *contig;
    char writeable, freed;
    PyObject *weakreflist;
} ArrayObject;

static PyTypeObject ArrayType;

/* A new array taking one handle on `st` (steals nothing). */
static PyObject *array_make(StorageObject *st, PyObject *shape, PyObject *strides,
                            PyObject *offset, PyObject *dtype, int writeable, PyObject *contig)
{
    PyTypeObject *type = g_array_type ? g_array_type : &ArrayType;
    ArrayObject *a = (ArrayObject *)type->tp_alloc(type, 0);
    if (a == NULL)
        return NULL;
    a->storage = (StorageObject *)Py_NewRef(st);
    st->handles++;
    a->shape = Py_NewRef(shape);
    a->strides = Py_NewRef(strides);
    a->offset = Py_NewRef(offset);
    a->dtype = Py_NewRef(dtype);
    a->contig = Py_NewRef(contig);
    a->writeable = (char)writeable;
    return (PyObject *)a;
}

static PyObject *core_make(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5 || nargs > 7) {
        PyErr_Format(PyExc_TypeError, "make() takes 5 to 7 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &StorageType)) {
        PyErr_Format(PyExc_TypeError, "make() needs a Storage, got %.200s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    int writeable = 1;
    if (nargs > 5 && (writeable = PyObject_IsTrue(args[5])) < 0)
        return NULL;
    return array_make((StorageObject *)args[0], args[1], args[2], args[3], args[4], writeable,
                      nargs > 6 ? args[6] : Py_None);
}

static void array_release_quietly(ArrayObject *a)
{
    if (a->freed || a->storage == NULL)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    a->freed = 1; /* set before the handle goes (GPUArrays.jl's lesson) */
    if (storage_decref(a->storage) < 0) {
        /* a finalizer never raises: report as a warning (or drop it) */
        PyObject *t, *v, *b;
        PyErr_Fetch(&t, &v, &b);
        PyErr_NormalizeException(&t, &v, &b);
        if (PyErr_WarnFormat(g_warning ? g_warning : PyExc_RuntimeWarning, 1,
                             "releasing a GPUArray failed: %R", v ? v : Py_None) < 0)
            PyErr_Clear();
        Py_XDECREF(t);
        Py_XDECREF(v);
        Py_XDECREF(b);
    }
    PyErr_Restore(et, ev, tb);
}

static void Array_finalize(PyObject *self)
{
    array_release_quietly((ArrayObject *)self);
}

static int Array_traverse(ArrayObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->storage);
    Py_VISIT(self->dtype);
    return 0;
}

static int Array_clear(ArrayObject *self)
{
    Py_CLEAR(self->contig);
    return 0;
}

static void Array_dealloc(ArrayObject *self)
{
    PyObject_GC_UnTrack(self);
    array_release_quietly(self); /* no-op when the finalizer already ran */
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    Py_XDECREF(self->storage);
    Py_XDECREF(self->shape);
    Py_XDECREF(self->strides);
    Py_XDECREF(self->offset);
    Py_XDECREF(self->dtype);
    Py_XDECREF(self->contig);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Array_free(ArrayObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    int force = 0;
    if (nargs || kwnames) {
        PyObject *flag = NULL;
        if (nargs > 1 || (kwnames && PyTuple_GET_SIZE(kwnames) + nargs > 1)) {
            PyErr_SetString(PyExc_TypeError, "free() takes at most one argument (force)");
            return NULL;
        }
        if (nargs)
            flag = args[0];
        else if (PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "force") == 0)
            flag = args[0];
        else {
            PyErr_Format(PyExc_TypeError, "free() got an unexpected keyword argument %R",
                         PyTuple_GET_ITEM(kwnames, 0));
            return NULL;
        }
        if ((force = PyObject_IsTrue(flag)) < 0)
            return NULL;
    }
    StorageObject *st = self->storage;
    if (!self->freed) {
        self->freed = 1; /* set before the handle goes */
        if (!force) {
            if (storage_decref(st) < 0)
                return NULL;
            Py_RETURN_NONE;
        }
        if (st->handles > 0)
            st->handles--;
    }
    if (force && storage_claim(st, s_forced) && storage_give_back(st) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef Array_methods[] = {
    {"free", (PyCFunction)(void (*)(void))Array_free, METH_FASTCALL | METH_KEYWORDS,
     "free(force=False)\n--\n\n"
     "Release this array's handle now (idempotent).\n\n"
     "``force=True`` releases the memory itself: every array sharing the storage becomes "
     "freed (``FreedArrayError`` on use)."},
    {NULL}};

static PyMemberDef Array_members[] = {
    {"_storage", T_OBJECT_EX, offsetof(ArrayObject, storage), READONLY, NULL},
    {"_shape", T_OBJECT_EX, offsetof(ArrayObject, shape), READONLY, NULL},
    {"_strides", T_OBJECT_EX, offsetof(ArrayObject, strides), READONLY, NULL},
    {"_offset", T_OBJECT_EX, offsetof(ArrayObject, offset), READONLY, NULL},
    {"_dtype", T_OBJECT_EX, offsetof(ArrayObject, dtype), READONLY, NULL},
    {"_contig", T_OBJECT, offsetof(ArrayObject, contig), 0,
     "C-contiguity when known (None: not computed yet)."},
    {"_writeable", T_BOOL, offsetof(ArrayObject, writeable), READONLY, NULL},
    {"_freed", T_BOOL, offsetof(ArrayObject, freed), READONLY, NULL},
    {NULL}};

static PyTypeObject ArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Array",
    .tp_doc = "Fields and lifetime of GPUArray (see array.GPUArray).",
    .tp_basicsize = sizeof(ArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)Array_dealloc,
    .tp_finalize = Array_finalize,
    .tp_traverse = (traverseproc)Array_traverse,
    .tp_clear = (inquiry)Array_clear,
    .tp_weaklistoffset = offsetof(ArrayObject, weakreflist),
    .tp_methods = Array_methods,
    .tp_members = Array_members,
};

/* ---------------------------------------------------------------- Pool */

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
} PoolObject;

static PyObject *Pool_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PoolObject *self = (PoolObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = (LockObject *)PyObject_CallNoArgs((PyObject *)&LockType);
    self->pending = PyList_New(0);
    self->free_lists = PyDict_New();
    self->live = PyDict_New();
    self->epoch = Py_NewRef(Py_None);
    self->device = Py_NewRef(Py_None);
    if (!self->lock || !self->pending || !self->free_lists || !self->live) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int Pool_traverse(PoolObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->pending);
    Py_VISIT(self->free_lists);
    Py_VISIT(self->live);
    Py_VISIT(self->epoch);
    Py_VISIT(self->device);
    return 0;
}

static int Pool_clear(PoolObject *self)
{
    Py_CLEAR(self->pending);
    Py_CLEAR(self->free_lists);
    Py_CLEAR(self->live);
    Py_CLEAR(self->epoch);
    Py_CLEAR(self->device);
    return 0;
}

static void Pool_dealloc(PoolObject *self)
{
    PyObject_GC_UnTrack(self);
    Pool_clear(self);
    Py_CLEAR(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The warm-pool hit: a block of exactly `size` bytes, or 0 (then *ptr is NULL).
 * Counts it as taken; -1 on error. */
static int pool_hit(PoolObject *mgr, PyObject *free, PyObject *sizeobj, Py_ssize_t size,
                    PyObject **ptr, PyObject **epoch)
{
    *ptr = NULL;
    if (!lock_try(mgr->lock))
        return 0; /* busy: the slow path waits */
    int rc = 0;
    if (PyList_GET_SIZE(mgr->pending) == 0) {
        PyObject *blocks = PyDict_GetItemWithError(free, sizeobj);
        if (blocks && PyList_CheckExact(blocks) && PyList_GET_SIZE(blocks) > 0) {
            Py_ssize_t n = PyList_GET_SIZE(blocks) - 1;
            PyObject *p = PyList_GET_ITEM(blocks, n);
            if (PyDict_SetItem(mgr->live, p, sizeobj) < 0) {
                rc = -1;
            } else {
                Py_SET_SIZE(blocks, n); /* the list's reference is now ours */
                *ptr = p;
                *epoch = Py_NewRef(mgr->epoch);
                mgr->pool_bytes -= size;
                mgr->used += size;
                if (mgr->used > mgr->peak)
                    mgr->peak = mgr->used;
                mgr->alloc_count++;
                mgr->alloc_bytes += size;
            }
        } else if (blocks == NULL && PyErr_Occurred()) {
            rc = -1;
        }
    }
    lock_release(mgr->lock);
    return rc;
}

static PyObject *pool_bad_kind(PyObject *mgr, PyObject *kind)
{
    if (!PyErr_Occurred()) {
        PyObject *err = PyObject_CallMethodOneArg(mgr, s_bad_kind, kind);
        if (err) {
            PyErr_SetObject((PyObject *)Py_TYPE(err), err);
            Py_DECREF(err);
        }
    }
    return NULL;
}

/* MemoryManager.take_block(kind, nbytes): (ptr, block size, epoch), the slow path that
 * misses, queued frees, busy locks and the ladder take. */
static PyObject *take_block(PyObject *mgr, PyObject *kind, PyObject *nbytes_obj)
{
    PyObject *found = PyObject_CallMethodObjArgs(mgr, s_take_block, kind, nbytes_obj, NULL);
    if (found != NULL && (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 3)) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, "take_block must return (ptr, size, epoch)");
        return NULL;
    }
    return found;
}

/* A pooled storage of `nbytes` (> 0): the warm-pool hit here, anything else in Python. */
static PyObject *pool_new_storage(PyObject *self, PyObject *kind, Py_ssize_t nbytes,
                                  PyObject *nbytes_obj)
{
    PoolObject *mgr = (PoolObject *)self;
    PyObject *free = PyDict_GetItemWithError(mgr->free_lists, kind);
    if (free == NULL)
        return pool_bad_kind(self, kind);
    PyObject *ptr = NULL, *epoch = NULL, *sizeobj = NULL;
    if (nbytes > 0 && nbytes <= PY_SSIZE_T_MAX - GRANULARITY) { /* else: take_block copes */
        Py_ssize_t size = (nbytes + GRANULARITY - 1) & -(Py_ssize_t)GRANULARITY;
        if ((sizeobj = memo_int(size, &memo.size, &memo.size_obj)) == NULL)
            return NULL;
        if (pool_hit(mgr, free, sizeobj, size, &ptr, &epoch) < 0) {
            Py_DECREF(sizeobj);
            return NULL;
        }
    }
    if (ptr != NULL) {
        if (observed()) {
            PyObject *r = PyObject_CallMethodObjArgs(self, s_note_taken, ptr, sizeobj, kind,
                                                     NULL);
            if (r == NULL) {
                Py_DECREF(ptr);
                Py_DECREF(epoch);
                Py_DECREF(sizeobj);
                return NULL;
            }
            Py_DECREF(r);
        }
    } else {
        /* pool miss, busy lock or queued frees: MemoryManager.take_block does it all */
        Py_XDECREF(sizeobj);
        PyObject *found = take_block(self, kind, nbytes_obj);
        if (found == NULL)
            return NULL;
        ptr = Py_NewRef(PyTuple_GET_ITEM(found, 0));
        sizeobj = Py_NewRef(PyTuple_GET_ITEM(found, 1));
        epoch = Py_NewRef(PyTuple_GET_ITEM(found, 2));
        Py_DECREF(found);
    }
    StorageObject *st = storage_alloc(ptr, nbytes_obj, mgr->device, kind, sizeobj, epoch, self);
    Py_DECREF(ptr);
    Py_DECREF(epoch);
    Py_DECREF(sizeobj);
    return (PyObject *)st;
}

/* Return a block to the pool; never waits (queues the free if the lock is busy). */
static int pool_give_block(PyObject *self, PyObject *kind, PyObject *ptr, PyObject *size,
                           PyObject *epoch)
{
    PoolObject *mgr = (PoolObject *)self;
    if (epoch != mgr->epoch || g_state->shutting_down)
        return 0; /* predates a reset (or the interpreter is exiting): never reuse or free */
    if (!lock_try(mgr->lock)) {
        PyObject *item = PyTuple_Pack(4, kind, ptr, size, epoch);
        if (item == NULL)
            return -1;
        int r = PyList_Append(mgr->pending, item);
        Py_DECREF(item);
        return r;
    }
    int rc = 0;
    if (epoch == mgr->epoch) { /* a reset may have run since the check above */
        Py_ssize_t nbytes = PyLong_AsSsize_t(size);
        PyObject *free = NULL, *blocks = NULL;
        if (nbytes == -1 && PyErr_Occurred())
            rc = -1;
        if (rc == 0 && PyList_GET_SIZE(mgr->pending)) {
            PyObject *r = PyObject_CallMethodNoArgs(self, s_apply_pending);
            if (r == NULL)
                rc = -1;
            Py_XDECREF(r);
        }
        if (rc == 0 && (free = PyDict_GetItemWithError(mgr->free_lists, kind)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, kind);
            rc = -1;
        }
        if (rc == 0 && PyDict_DelItem(mgr->live, ptr) < 0)
            rc = -1;
        if (rc == 0) {
            Py_INCREF(free);
            blocks = PyDict_GetItemWithError(free, size);
            if (blocks != NULL) {
                rc = PyList_Append(blocks, ptr);
            } else if (!PyErr_Occurred() && (blocks = PyList_New(1)) != NULL) {
                PyList_SET_ITEM(blocks, 0, Py_NewRef(ptr));
                rc = PyDict_SetItem(free, size, blocks);
                Py_DECREF(blocks);
            } else {
                rc = -1;
            }
            Py_DECREF(free);
            if (rc == 0) {
                mgr->used -= nbytes;
                mgr->pool_bytes += nbytes;
            }
        }
    }
    lock_release(mgr->lock);
    if (rc == 0 && g_state->history != Py_None) {
        PyObject *r = PyObject_CallMethodObjArgs(self, s_note_put, kind, ptr, size, NULL);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return rc;
}

static PyObject *Pool_new_storage(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "new_storage(kind, nbytes) takes 2 arguments");
        return NULL;
    }
    if (!PyLong_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "new_storage needs an int size, got %R", args[1]);
        return NULL;
    }
    Py_ssize_t nbytes = PyLong_AsSsize_t(args[1]);
    if (nbytes == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear(); /* past 2**63: no hit possible, take_block reports it */
    }
    return pool_new_storage(self, args[0], nbytes, args[1]);
}

static PyObject *Pool_give_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "give_block(kind, ptr, size, epoch) takes 4 arguments");
        return NULL;
    }
    if (pool_give_block(self, args[0], args[1], args[2], args[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Pool_release_storage(PyObject *self, PyObject *st)
{
    if (!PyObject_TypeCheck(st, &StorageType)) {
        PyErr_SetString(PyExc_TypeError, "release_storage needs a Storage");
        return NULL;
    }
    StorageObject *s = (StorageObject *)st;
    if (pool_give_block(self, s->kind, s->ptr, s->block, s->epoch) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef Pool_methods[] = {
    {"new_storage", (PyCFunction)(void (*)(void))Pool_new_storage, METH_FASTCALL,
     "new_storage(kind, nbytes) -> Storage: a fresh pooled storage (its home is this "
     "manager).  The hot path of every allocation: a warm-pool hit is a dict lookup and a "
     "list pop under the lock; anything else goes through take_block."},
    {"give_block", (PyCFunction)(void (*)(void))Pool_give_block, METH_FASTCALL,
     "give_block(kind, ptr, size, epoch): return a block to the pool; never blocks "
     "(queues the free if the lock is busy); drops blocks of a dead epoch."},
    {"release_storage", (PyCFunction)Pool_release_storage, METH_O,
     "Home protocol: the storage's last handle went (or a forced free)."},
    {NULL}};

static PyMemberDef Pool_members[] = {
    {"lock", T_OBJECT_EX, offsetof(PoolObject, lock), READONLY,
     "Guards the free lists, counters and epoch (tiny critical sections)."},
    {"pending", T_OBJECT_EX, offsetof(PoolObject, pending), READONLY,
     "Frees queued while the lock was busy: (kind, ptr, size, epoch)."},
    {"free_lists", T_OBJECT_EX, offsetof(PoolObject, free_lists), READONLY,
     "kind -> {block size -> [ptr]}."},
    {"live", T_OBJECT_EX, offsetof(PoolObject, live), READONLY,
     "ptr -> block size, for every block out of the pool."},
    {"epoch", T_OBJECT_EX, offsetof(PoolObject, epoch), 0, "The device's current Epoch."},
    {"device", T_OBJECT_EX, offsetof(PoolObject, device), 0, NULL},
    {"used", T_PYSSIZET, offsetof(PoolObject, used), 0, "Bytes in blocks out of the pool."},
    {"pool_bytes", T_PYSSIZET, offsetof(PoolObject, pool_bytes), 0,
     "Bytes in free pool blocks."},
    {"peak", T_PYSSIZET, offsetof(PoolObject, peak), 0, NULL},
    {"alloc_count", T_PYSSIZET, offsetof(PoolObject, alloc_count), 0, NULL},
    {"alloc_bytes", T_PYSSIZET, offsetof(PoolObject, alloc_bytes), 0, NULL},
    {"cache_hits", T_PYSSIZET, offsetof(PoolObject, cache_hits), 0,
     "Allocations served by an AllocCache on this device."},
    {NULL}};

static PyTypeObject PoolType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Pool",
    .tp_doc = "The compiled part of pool.MemoryManager: free lists, counters, hit and free.",
    .tp_basicsize = sizeof(PoolObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = Pool_new,
    .tp_dealloc = (destructor)Pool_dealloc,
    .tp_traverse = (traverseproc)Pool_traverse,
    .tp_clear = (inquiry)Pool_clear,
    .tp_methods = Pool_methods,
    .tp_members = Pool_members,
};

/* ---------------------------------------------------------------- Cache */

/* Buffers: _free[(manager, kind)][nbytes] is a list of (ptr, block, epoch).  The
 * inner dicts and lists are never removed once made (Python code only empties
 * them), so a storage can keep the list its buffer goes back to (`served_in`)
 * and the cache can remember the last (device, kind) -> inner dict it used:
 * a hit and its release look nothing up by a built key.
 *
 * Busy storages (served, not yet released) are an array of borrowed pointers,
 * each storage knowing its slot (`busy_pos`, 1-based, 0: not busy): adding and
 * removing are O(1) without hashing.  A storage leaves the array when released,
 * when cache.free() takes them all, or when it is deallocated. */
typedef struct {
    PyObject_HEAD
    LockObject *lock;
    PyObject *free;     /* (manager, kind) -> {nbytes -> [(ptr, block, epoch)]} */
    PyObject *returned; /* storages released while the lock was busy */
    PyObject *scopes;   /* one item per active cached(cache) block */
    StorageObject **busy;
    Py_ssize_t nbusy, busy_cap;
    PyObject *memo_device, *memo_kind, *memo_mgr, *memo_sub; /* the last (device, kind) */
    Py_ssize_t hits, misses;
    PyObject *weakreflist;
} CacheObject;

static void busy_remove(CacheObject *cache, StorageObject *st)
{
    Py_ssize_t i = st->busy_pos - 1;
    if (i < 0 || i >= cache->nbusy || cache->busy[i] != st)
        return;
    StorageObject *last = cache->busy[--cache->nbusy];
    cache->busy[i] = last;
    last->busy_pos = i + 1;
    st->busy_pos = 0;
}

static int busy_add(CacheObject *cache, StorageObject *st)
{
    if (cache->nbusy == cache->busy_cap) {
        Py_ssize_t cap = cache->busy_cap ? cache->busy_cap * 2 : 16;
        StorageObject **grown = PyMem_Realloc(cache->busy, cap * sizeof(StorageObject *));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        cache->busy = grown;
        cache->busy_cap = cap;
    }
    cache->busy[cache->nbusy++] = st;
    st->busy_pos = cache->nbusy;
    return 0;
}

/* A storage leaving for good (deallocated or cleared): out of its cache's busy array. */
static void storage_unbusy(StorageObject *st)
{
    if (st->busy_pos && st->home && PyObject_TypeCheck(st->home, &CacheType))
        busy_remove((CacheObject *)st->home, st);
    st->busy_pos = 0;
}

static PyObject *Cache_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    CacheObject *self = (CacheObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = (LockObject *)PyObject_CallNoArgs((PyObject *)&LockType);
    self->free = PyDict_New();
    self->returned = PyList_New(0);
    self->scopes = PyList_New(0);
    if (!self->lock || !self->free || !self->returned || !self->scopes) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int Cache_traverse(CacheObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->free);
    Py_VISIT(self->returned);
    Py_VISIT(self->scopes);
    Py_VISIT(self->memo_device);
    Py_VISIT(self->memo_mgr);
    Py_VISIT(self->memo_sub);
    return 0;
}

static int Cache_clear(CacheObject *self)
{
    Py_CLEAR(self->returned);
    Py_CLEAR(self->memo_device);
    Py_CLEAR(self->memo_kind);
    Py_CLEAR(self->memo_mgr);
    Py_CLEAR(self->memo_sub);
    return 0;
}

static void Cache_dealloc(CacheObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)self);
    Cache_clear(self);
    Py_CLEAR(self->free);
    Py_CLEAR(self->scopes);
    Py_CLEAR(self->lock);
    /* busy storages hold their cache alive: none can remain */
    PyMem_Free(self->busy);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A storage released while the lock was busy, or now: its buffer goes back (lock held). */
static int cache_put_back_locked(CacheObject *cache, StorageObject *st)
{
    if (!st->busy_pos)
        return 0; /* not ours any more: cache.free() took it */
    busy_remove(cache, st);
    if (!epoch_live(st->epoch) || st->served_in == NULL)
        return 0; /* a reset ended its epoch: the buffer is gone with it */
    return PyList_Append(st->served_in, st->served);
}

static int cache_drain_locked(CacheObject *cache)
{
    PyObject *returned = cache->returned;
    while (returned && PyList_GET_SIZE(returned)) {
        Py_ssize_t n = PyList_GET_SIZE(returned) - 1;
        PyObject *st = PyList_GET_ITEM(returned, n);
        Py_SET_SIZE(returned, n); /* the list's reference is now ours */
        int rc = PyObject_TypeCheck(st, &StorageType)
                     ? cache_put_back_locked(cache, (StorageObject *)st) : 0;
        Py_DECREF(st);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* The inner dict for (mgr, kind): the memo, else _free's (made when `create`), else NULL
 * (no error set).  Borrowed.  Lock held. */
static PyObject *cache_sub_locked(CacheObject *cache, PyObject *device, PyObject *mgr,
                                  PyObject *kind, int create)
{
    if (device == cache->memo_device && kind == cache->memo_kind)
        return cache->memo_sub;
    PyObject *key = PyTuple_Pack(2, mgr, kind);
    if (key == NULL)
        return NULL;
    PyObject *sub = PyDict_GetItemWithError(cache->free, key);
    if (sub == NULL && !PyErr_Occurred() && create) {
        sub = PyDict_New();
        if (sub != NULL) {
            int rc = PyDict_SetItem(cache->free, key, sub);
            Py_DECREF(sub); /* _free holds it */
            if (rc < 0)
                sub = NULL;
        }
    }
    Py_DECREF(key);
    if (sub != NULL) {
        Py_XSETREF(cache->memo_device, Py_NewRef(device));
        Py_XSETREF(cache->memo_kind, Py_NewRef(kind));
        Py_XSETREF(cache->memo_mgr, Py_NewRef(mgr));
        Py_XSETREF(cache->memo_sub, Py_NewRef(sub));
    }
    return sub;
}

/* The list of free buffers of `nbytes` in `sub` (made when missing).  Borrowed. */
static PyObject *cache_list_locked(PyObject *sub, PyObject *nbytes_obj)
{
    PyObject *bufs = PyDict_GetItemWithError(sub, nbytes_obj);
    if (bufs != NULL || PyErr_Occurred())
        return bufs;
    if ((bufs = PyList_New(0)) == NULL)
        return NULL;
    int rc = PyDict_SetItem(sub, nbytes_obj, bufs);
    Py_DECREF(bufs);
    return rc < 0 ? NULL : bufs;
}

/* A storage over a cached buffer (reused when one is free, else a new one). */
static PyObject *cache_storage(PyObject *self, PyObject *device, PyObject *kind,
                               PyObject *nbytes_obj)
{
    CacheObject *cache = (CacheObject *)self;
    PyObject *mgr = (device == cache->memo_device && cache->memo_mgr)
                        ? Py_NewRef(cache->memo_mgr) : PyObject_GetAttr(device, s_memory);
    if (mgr == NULL)
        return NULL;
    PyObject *entry = NULL, *bufs = NULL;
    int rc = lock_wait(cache->lock, -1);
    if (rc < 0)
        goto fail;
    rc = PyList_GET_SIZE(cache->returned) ? cache_drain_locked(cache) : 0;
    PyObject *sub = rc == 0 ? cache_sub_locked(cache, device, mgr, kind, 0) : NULL;
    if (sub != NULL && (bufs = PyDict_GetItemWithError(sub, nbytes_obj)) != NULL) {
        while (PyList_CheckExact(bufs) && PyList_GET_SIZE(bufs)) {
            Py_ssize_t n = PyList_GET_SIZE(bufs) - 1;
            PyObject *e = PyList_GET_ITEM(bufs, n);
            Py_SET_SIZE(bufs, n); /* the list's reference is now ours */
            if (PyTuple_Check(e) && PyTuple_GET_SIZE(e) == 3
                    && epoch_live(PyTuple_GET_ITEM(e, 2))) {
                entry = e;
                break;
            }
            Py_DECREF(e); /* a buffer of a reset epoch: gone with the epoch */
        }
        Py_INCREF(bufs);
    }
    if (PyErr_Occurred())
        rc = -1;
    else if (entry)
        cache->hits++;
    else
        cache->misses++;
    lock_release(cache->lock);
    if (rc < 0)
        goto fail;
    if (entry) {
        if (PyObject_TypeCheck(mgr, &PoolType))
            ((PoolObject *)mgr)->cache_hits++;
        if (observed()) {
            PyObject *r = PyObject_CallMethodObjArgs(self, s_note_reuse, device, kind,
                                                     PyTuple_GET_ITEM(entry, 0),
                                                     PyTuple_GET_ITEM(entry, 1), NULL);
            if (r == NULL)
                goto fail_taken;
            Py_DECREF(r);
        }
    } else { /* outside our lock: the ladder may come back to us */
        Py_CLEAR(bufs);
        PyObject *found = take_block(mgr, kind, nbytes_obj);
        if (found == NULL)
            goto fail;
        entry = found; /* (ptr, block, epoch), the buffer's entry from now on */
        if (lock_wait(cache->lock, -1) < 0)
            goto fail_taken;
        sub = cache_sub_locked(cache, device, mgr, kind, 1);
        bufs = sub ? cache_list_locked(sub, nbytes_obj) : NULL;
        Py_XINCREF(bufs);
        lock_release(cache->lock);
        if (bufs == NULL)
            goto fail_taken;
    }
    StorageObject *st = storage_alloc(PyTuple_GET_ITEM(entry, 0), nbytes_obj, device, kind,
                                      PyTuple_GET_ITEM(entry, 1), PyTuple_GET_ITEM(entry, 2),
                                      self);
    if (st == NULL)
        goto fail_taken;
    st->served = entry; /* both references move to the storage */
    st->served_in = bufs;
    if (busy_add(cache, st) < 0) {
        Py_DECREF(st);
        entry = bufs = NULL;
        goto fail;
    }
    Py_DECREF(mgr);
    return (PyObject *)st;
fail_taken: /* the block is ours: hand it to the pool rather than lose it */
    {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (PyObject_TypeCheck(mgr, &PoolType)
                && pool_give_block(mgr, kind, PyTuple_GET_ITEM(entry, 0),
                                   PyTuple_GET_ITEM(entry, 1), PyTuple_GET_ITEM(entry, 2)) < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
fail:
    Py_XDECREF(entry);
    Py_XDECREF(bufs);
    Py_DECREF(mgr);
    return NULL;
}

/* Home protocol; may run in a finalizer, so it never waits for the lock. */
static int cache_release(PyObject *self, StorageObject *st)
{
    CacheObject *cache = (CacheObject *)self;
    if (!lock_try(cache->lock))
        return PyList_Append(cache->returned, (PyObject *)st);
    int rc = cache_put_back_locked(cache, st);
    lock_release(cache->lock);
    return rc;
}

/* A storage made by a pool or cache and dropped before any array took a handle: the
 * memory is nobody's, so it goes back (wrapped memory is left to its owner).  Runs in
 * its dealloc: nothing here may keep a reference to it. */
static void storage_return_orphan(StorageObject *self)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int rc = 0;
    if (PyObject_TypeCheck(self->home, &CacheType)) {
        CacheObject *cache = (CacheObject *)self->home;
        if (self->busy_pos && lock_try(cache->lock)) {
            self->token = 0;
            rc = cache_put_back_locked(cache, self);
            lock_release(cache->lock);
        }
    } else if (PyObject_TypeCheck(self->home, &PoolType)) {
        self->token = 0;
        rc = pool_give_block(self->home, self->kind, self->ptr, self->block, self->epoch);
    }
    if (rc < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
}

static PyObject *Cache_storage(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "storage(device, kind, nbytes) takes 3 arguments");
        return NULL;
    }
    return cache_storage(self, args[0], args[1], args[2]);
}

static PyObject *Cache_release_storage(PyObject *self, PyObject *st)
{
    if (!PyObject_TypeCheck(st, &StorageType)) {
        PyErr_SetString(PyExc_TypeError, "release_storage needs a Storage");
        return NULL;
    }
    if (cache_release(self, (StorageObject *)st) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Cache_drain_locked(CacheObject *self, PyObject *Py_UNUSED(ignored))
{
    if (cache_drain_locked(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *busy_list(CacheObject *self, int take)
{
    PyObject *out = PyList_New(self->nbusy);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->nbusy; i++)
        PyList_SET_ITEM(out, i, Py_NewRef((PyObject *)self->busy[i]));
    if (take) {
        for (Py_ssize_t i = 0; i < self->nbusy; i++)
            self->busy[i]->busy_pos = 0;
        self->nbusy = 0;
    }
    return out;
}

static PyObject *Cache_busy_list(CacheObject *self, PyObject *Py_UNUSED(ignored))
{
    return busy_list(self, 0);
}

static PyObject *Cache_take_busy(CacheObject *self, PyObject *Py_UNUSED(ignored))
{
    return busy_list(self, 1);
}

static PyMethodDef Cache_methods[] = {
    {"storage", (PyCFunction)(void (*)(void))Cache_storage, METH_FASTCALL,
     "storage(device, kind, nbytes) -> Storage over a cached buffer (reused when one is "
     "free, else a new block from the device's pool)."},
    {"release_storage", (PyCFunction)Cache_release_storage, METH_O,
     "Home protocol; may run in a finalizer, so it never waits for the lock."},
    {"_drain_locked", (PyCFunction)Cache_drain_locked, METH_NOARGS,
     "Apply releases that arrived while the lock was busy (call with the lock held)."},
    {"_busy_list", (PyCFunction)Cache_busy_list, METH_NOARGS,
     "The storages served and not yet released (a new list)."},
    {"_take_busy", (PyCFunction)Cache_take_busy, METH_NOARGS,
     "The busy storages, which stop being the cache's (cache.free())."},
    {NULL}};

static PyMemberDef Cache_members[] = {
    {"_lock", T_OBJECT_EX, offsetof(CacheObject, lock), READONLY, NULL},
    {"_free", T_OBJECT_EX, offsetof(CacheObject, free), READONLY,
     "(manager, kind) -> {nbytes -> [(ptr, block, epoch)]}; never remove from it, empty it."},
    {"_returned", T_OBJECT_EX, offsetof(CacheObject, returned), READONLY, NULL},
    {"_scopes", T_OBJECT_EX, offsetof(CacheObject, scopes), READONLY, NULL},
    {"hits", T_PYSSIZET, offsetof(CacheObject, hits), 0, "Allocations served from a buffer."},
    {"misses", T_PYSSIZET, offsetof(CacheObject, misses), 0,
     "Allocations that needed a new buffer."},
    {NULL}};

static PyTypeObject CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Cache",
    .tp_doc = "The compiled part of cache.AllocCache: its buffers, hit and release.",
    .tp_basicsize = sizeof(CacheObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = Cache_new,
    .tp_dealloc = (destructor)Cache_dealloc,
    .tp_traverse = (traverseproc)Cache_traverse,
    .tp_clear = (inquiry)Cache_clear,
    .tp_weaklistoffset = offsetof(CacheObject, weakreflist),
    .tp_methods = Cache_methods,
    .tp_members = Cache_members,
};

/* ---------------------------------------------------------------- allocation */

/* A fresh storage of `nbytes` on `device`: alloc.new_storage's hot path. */
static PyObject *storage_for(PyObject *device, PyObject *kind, Py_ssize_t nbytes,
                             PyObject *nbytes_obj)
{
    if (nbytes == 0 || PyList_GET_SIZE(g_state->recorders) || g_cache_var == NULL)
        return PyObject_CallFunctionObjArgs(g_slow_new_storage, device, kind, nbytes_obj, NULL);
    PyObject *cache, *st;
    if (PyContextVar_Get(g_cache_var, Py_None, &cache) < 0)
        return NULL;
    if (cache != Py_None) {
        if (PyObject_TypeCheck(cache, &CacheType))
            st = cache_storage(cache, device, kind, nbytes_obj);
        else
            st = PyObject_CallMethodObjArgs(cache, s_storage, device, kind, nbytes_obj, NULL);
        Py_DECREF(cache);
        return st;
    }
    Py_DECREF(cache);
    PyObject *mgr;
    if (device == memo.mgr_dev) {
        mgr = Py_NewRef(memo.mgr);
    } else {
        if ((mgr = PyObject_GetAttr(device, s_memory)) == NULL)
            return NULL;
        memo_set(&memo.mgr, mgr);
        memo_set(&memo.mgr_dev, device);
    }
    if (PyObject_TypeCheck(mgr, &PoolType))
        st = pool_new_storage(mgr, kind, nbytes, nbytes_obj);
    else
        st = PyObject_CallMethodObjArgs(mgr, s_new_storage, kind, nbytes_obj, NULL);
    Py_DECREF(mgr);
    return st;
}

/* new_array(shape, dtype, device, kind): a C-contiguous, uninitialised array. */
static PyObject *core_new_array(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "new_array(shape, dtype, device, kind)");
        return NULL;
    }
    PyObject *shape = args[0], *dtype = args[1], *device = args[2], *kind = args[3];
    if (!PyTuple_CheckExact(shape)) {
        PyErr_SetString(PyExc_TypeError, "new_array needs a normalised shape tuple");
        return NULL;
    }
    Py_ssize_t itemsize;
    if (dtype == memo.item_dtype) {
        itemsize = memo.itemsize;
    } else {
        PyObject *item = PyObject_GetAttr(dtype, s_itemsize);
        if (item == NULL)
            return NULL;
        itemsize = PyLong_AsSsize_t(item);
        Py_DECREF(item);
        if (itemsize == -1 && PyErr_Occurred())
            return NULL;
        PyObject *strides1 = Py_BuildValue("(n)", itemsize);
        if (strides1 == NULL)
            return NULL;
        memo_set(&memo.item_dtype, dtype);
        memo.itemsize = itemsize;
        Py_XSETREF(memo.strides1, strides1);
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    PyObject *strides;
    Py_ssize_t nbytes = itemsize;
    int overflow = 0;
    if (ndim == 1) { /* the common case: the remembered (itemsize,) */
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
        if (n < 0) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return NULL;
            PyErr_Clear();
            overflow = 1;
        }
        overflow |= __builtin_mul_overflow(nbytes, n, &nbytes);
        strides = Py_NewRef(memo.strides1);
    } else if ((strides = PyTuple_New(ndim)) == NULL) {
        return NULL;
    }
    Py_ssize_t step = itemsize;
    for (Py_ssize_t i = ndim - 1; ndim != 1 && i >= 0; i--) {
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (n < 0) {
            if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_OverflowError)) {
                Py_DECREF(strides);
                return NULL;
            }
            PyErr_Clear();
            overflow = 1;
            break;
        }
        PyObject *s = PyLong_FromSsize_t(step);
        if (s == NULL) {
            Py_DECREF(strides);
            return NULL;
        }
        PyTuple_SET_ITEM(strides, i, s);
        overflow |= __builtin_mul_overflow(nbytes, n, &nbytes);
        if (n > 1)
            overflow |= __builtin_mul_overflow(step, n, &step);
    }
    if (overflow) { /* sizes past what a Py_ssize_t holds: Python's integers do it */
        Py_DECREF(strides);
        return PyObject_Vectorcall(g_slow_new_array, args, 4, NULL);
    }
    PyObject *nbytes_obj = memo_int(nbytes, &memo.nbytes, &memo.nbytes_obj);
    if (nbytes_obj == NULL) {
        Py_DECREF(strides);
        return NULL;
    }
    PyObject *st = storage_for(device, kind, nbytes, nbytes_obj);
    Py_DECREF(nbytes_obj);
    if (st == NULL) {
        Py_DECREF(strides);
        return NULL;
    }
    PyObject *a = NULL;
    if (!PyObject_TypeCheck(st, &StorageType))
        PyErr_SetString(PyExc_TypeError, "an allocator returned something not a Storage");
    else
        a = array_make((StorageObject *)st, shape, strides, g_zero, dtype, 1, Py_True);
    Py_DECREF(strides);
    if (a == NULL && PyObject_TypeCheck(st, &StorageType)) {
        /* never lose the memory: a storage without handles gives it back */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        StorageObject *s = (StorageObject *)st;
        if (storage_claim(s, s_local) && storage_give_back(s) < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(st);
    return a;
}

/* The device an allocation goes to: `device`, else the current one, else the default. */
static PyObject *resolve_device(PyObject *device)
{
    if (device != Py_None) {
        if ((PyObject *)Py_TYPE(device) == g_device_type)
            return Py_NewRef(device);
        return PyObject_CallOneArg(g_get_device, device);
    }
    PyObject *dev;
    if (PyContextVar_Get(g_device_var, Py_None, &dev) < 0)
        return NULL;
    if (dev != Py_None)
        return dev;
    Py_DECREF(dev);
    if (PyList_GET_SIZE(g_default_devices))
        return Py_NewRef(PyList_GET_ITEM(g_default_devices, 0));
    return PyObject_CallOneArg(g_get_device, Py_None);
}

/* The shape as a tuple of non-negative ints (layout.normalize_shape unless trivial). */
static PyObject *resolve_shape(PyObject *shape)
{
    if (PyLong_CheckExact(shape)) {
        Py_ssize_t n = PyLong_AsSsize_t(shape);
        if (n >= 0)
            return PyTuple_Pack(1, shape);
        PyErr_Clear();
    } else if (PyTuple_CheckExact(shape)) {
        Py_ssize_t i, ndim = PyTuple_GET_SIZE(shape);
        for (i = 0; i < ndim; i++) {
            PyObject *n = PyTuple_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(n) || PyLong_AsSsize_t(n) < 0) {
                PyErr_Clear(); /* negative or huge: normalize_shape explains or copes */
                break;
            }
        }
        if (i == ndim)
            return Py_NewRef(shape);
    }
    return PyObject_CallOneArg(g_normalize_shape, shape);
}

/* The device's checked dtype for `dtype` (its cache, else Device.dtype_of). */
static PyObject *resolve_dtype(PyObject *dev, PyObject *dtype)
{
    if (dev == memo.dev && dtype == memo.dtype_arg)
        return Py_NewRef(memo.dt);
    PyObject *accepts = PyObject_GetAttr(dev, s_accepts);
    if (accepts == NULL)
        return NULL;
    PyObject *dt = PyDict_CheckExact(accepts) ? PyDict_GetItemWithError(accepts, dtype) : NULL;
    Py_XINCREF(dt);
    Py_DECREF(accepts);
    if (dt == NULL) {
        PyErr_Clear(); /* unhashable: dtype_of explains or copes */
        if ((dt = PyObject_CallMethodOneArg(dev, s_dtype_of, dtype)) == NULL)
            return NULL;
        if (PyObject_Hash(dtype) == -1) { /* a list describing a structured dtype: it */
            PyErr_Clear();                /* may change, so never remember it */
            return dt;
        }
    }
    memo_set(&memo.dt, dt);
    memo_set(&memo.dev, dev);
    memo_set(&memo.dtype_arg, dtype);
    return dt;
}

static PyObject *core_empty(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    PyObject *shape = nargs > 0 ? args[0] : NULL, *dtype = nargs > 1 ? args[1] : NULL;
    PyObject *device = Py_None, *kind = s_device;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "empty() takes from 1 to 2 positional arguments but %zd "
                     "were given (device= and kind= are keywords)", nargs);
        return NULL;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        PyObject **slot = NULL;
        if (PyUnicode_CompareWithASCIIString(name, "device") == 0)
            slot = &device;
        else if (PyUnicode_CompareWithASCIIString(name, "kind") == 0)
            slot = &kind;
        else if (PyUnicode_CompareWithASCIIString(name, "dtype") == 0 && dtype == NULL)
            slot = &dtype;
        else if (PyUnicode_CompareWithASCIIString(name, "shape") == 0 && shape == NULL)
            slot = &shape;
        if (slot == NULL) {
            PyErr_Format(PyExc_TypeError, "empty() got an unexpected or repeated keyword "
                         "argument %R", name);
            return NULL;
        }
        *slot = value;
    }
    if (shape == NULL) {
        PyErr_SetString(PyExc_TypeError, "empty() missing required argument 'shape'");
        return NULL;
    }
    if (dtype == NULL)
        dtype = g_float64;
    PyObject *dev = resolve_device(device);
    if (dev == NULL)
        return NULL;
    PyObject *dims = resolve_shape(shape);
    PyObject *dt = dims ? resolve_dtype(dev, dtype) : NULL;
    PyObject *a = NULL;
    if (dt != NULL) {
        PyObject *call[4] = {dims, dt, dev, kind};
        a = core_new_array(mod, call, 4);
    }
    Py_XDECREF(dt);
    Py_XDECREF(dims);
    Py_DECREF(dev);
    return a;
}

static int set_global(PyObject **slot, PyObject *value)
{
    Py_XINCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static PyObject *core_configure(PyObject *mod, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments only");
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kw && PyDict_Next(kw, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (name == NULL)
            return NULL;
        if (strcmp(name, "storage_type") == 0 || strcmp(name, "array_type") == 0) {
            PyTypeObject *base = name[0] == 's' ? &StorageType : &ArrayType;
            if (!PyType_Check(value) || !PyType_IsSubtype((PyTypeObject *)value, base)) {
                PyErr_Format(PyExc_TypeError, "%s must be a subclass of %s", name,
                             base->tp_name);
                return NULL;
            }
            set_global((PyObject **)(name[0] == 's' ? &g_storage_type : &g_array_type), value);
        } else if (strcmp(name, "cache_var") == 0) {
            if (!PyContextVar_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "cache_var must be a ContextVar");
                return NULL;
            }
            set_global(&g_cache_var, value);
        } else if (strcmp(name, "slow_new_storage") == 0) {
            set_global(&g_slow_new_storage, value);
        } else if (strcmp(name, "slow_new_array") == 0) {
            set_global(&g_slow_new_array, value);
        } else if (strcmp(name, "warning") == 0) {
            set_global(&g_warning, value);
        } else if (strcmp(name, "device_var") == 0) {
            if (!PyContextVar_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "device_var must be a ContextVar");
                return NULL;
            }
            set_global(&g_device_var, value);
        } else if (strcmp(name, "default_devices") == 0) {
            if (!PyList_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "default_devices must be a list");
                return NULL;
            }
            set_global(&g_default_devices, value);
        } else if (strcmp(name, "get_device") == 0) {
            set_global(&g_get_device, value);
        } else if (strcmp(name, "device_type") == 0) {
            set_global(&g_device_type, value);
        } else if (strcmp(name, "normalize_shape") == 0) {
            set_global(&g_normalize_shape, value);
        } else if (strcmp(name, "float64") == 0) {
            set_global(&g_float64, value);
        } else {
            PyErr_Format(PyExc_TypeError, "configure() got an unexpected keyword %R", key);
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef core_functions[] = {
    {"make", (PyCFunction)(void (*)(void))core_make, METH_FASTCALL,
     "make(storage, shape, strides, offset, dtype, writeable=True, contiguous=None) -> "
     "GPUArray taking one handle on storage."},
    {"new_array", (PyCFunction)(void (*)(void))core_new_array, METH_FASTCALL,
     "new_array(shape, dtype, device, kind) -> a C-contiguous, uninitialised GPUArray "
     "(shape and dtype already normalised)."},
    {"empty", (PyCFunction)(void (*)(void))core_empty, METH_FASTCALL | METH_KEYWORDS,
     "empty($module, shape, dtype=None, *, device=None, kind='device')\n--\n\n"
     "An uninitialised C-contiguous array.\n\n"
     "``shape``: int or tuple of non-negative ints; ``dtype``: anything ``numpy.dtype`` "
     "takes (None: float64, as NumPy); ``device``: a Device, a name such as ``'cpu:0'`` or "
     "None (the current device); ``kind``: ``'device'``, ``'host'`` or ``'unified'``.  "
     "Raises ``ValueError``/``TypeError`` for bad shapes, kinds and devices, "
     "``UnsupportedDTypeError`` for bad dtypes, ``OutOfMemoryError`` when memory cannot be "
     "found.  Compiled: a warm-pool or cache hit never leaves C."},
    {"configure", (PyCFunction)(void (*)(void))core_configure, METH_VARARGS | METH_KEYWORDS,
     "configure(**kw): the Python classes and hooks the hot paths use."},
    {NULL}};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "gpuarrays._core",
    "The compiled hot paths of gpuarrays: storage handles, array lifetime, pool and cache "
    "hits (see the source's header for what lives here and why).",
    -1, core_functions};

#define INTERN(var, text)                                 \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return NULL;

PyMODINIT_FUNC PyInit__core(void)
{
    INTERN(s_local, "local");
    INTERN(s_forced, "forced");
    INTERN(s_release_storage, "release_storage");
    INTERN(s_take_block, "take_block");
    INTERN(s_note_taken, "_note_taken");
    INTERN(s_note_put, "_note_put");
    INTERN(s_apply_pending, "_apply_pending_locked");
    INTERN(s_bad_kind, "_bad_kind");
    INTERN(s_memory, "memory");
    INTERN(s_itemsize, "itemsize");
    INTERN(s_note_reuse, "_note_reuse");
    INTERN(s_storage, "storage");
    INTERN(s_new_storage, "new_storage");
    INTERN(s_accepts, "_accepts");
    INTERN(s_dtype_of, "dtype_of");
    INTERN(s_device, "device");
    if ((g_zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    PyTypeObject *types[] = {&LockType, &StateType, &EpochType, &StorageType, &ArrayType,
                             &PoolType, &CacheType};
    const char *names[] = {"Lock", "State", "Epoch", "Storage", "Array", "Pool", "Cache"};
    PyObject *m = PyModule_Create(&core_module);
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, names[i],
                                                                (PyObject *)types[i]) < 0)
            goto fail;
    }
    g_state = PyObject_New(StateObject, &StateType);
    if (g_state == NULL)
        goto fail;
    g_state->shutting_down = 0;
    g_state->recorders = PyList_New(0);
    g_state->history = Py_NewRef(Py_None);
    if (g_state->recorders == NULL || PyModule_AddObjectRef(m, "state", (PyObject *)g_state) < 0)
        goto fail;
    if (PyModule_AddIntConstant(m, "GRANULARITY", GRANULARITY) < 0
            || PyModule_AddObjectRef(m, "FREED_LOCAL", s_local) < 0
            || PyModule_AddObjectRef(m, "FREED_FORCED", s_forced) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
