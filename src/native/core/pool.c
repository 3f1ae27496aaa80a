/* pool.c -- Pool: the compiled part of pool.MemoryManager (which subclasses it):
 * the free lists and counters, the warm-pool hit and the free of a block
 * (docs/design.md, "Pools, limits and the out-of-memory ladder").
 *
 * A hit is a dict lookup and a list pop under the pool's lock, taken only by a
 * non-blocking try; a miss, a busy lock or queued frees go to
 * MemoryManager.take_block in Python (the ladder).  A free never waits: when
 * the lock is busy it is queued in `pending` and applied later.  Blocks of a dead
 * epoch are never reused or freed.
 *
 * May call: lock.c (ga_lock_try, ga_lock_release, ga_observed), storage.c
 * (ga_storage_alloc), the memo (ga_memo_int).
 */
#include "core.h"

static PyObject *Pool_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PoolObject *self = (PoolObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = (LockObject *)PyObject_CallNoArgs((PyObject *)&ga_LockType);
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
    if (!ga_lock_try(mgr->lock))
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
    ga_lock_release(mgr->lock);
    return rc;
}

static PyObject *pool_bad_kind(PyObject *mgr, PyObject *kind)
{
    if (!PyErr_Occurred()) {
        PyObject *err = PyObject_CallMethodOneArg(mgr, ga_str_bad_kind, kind);
        if (err) {
            PyErr_SetObject((PyObject *)Py_TYPE(err), err);
            Py_DECREF(err);
        }
    }
    return NULL;
}

/* MemoryManager.take_block(kind, nbytes): (ptr, block size, epoch), the slow path that
 * misses, queued frees, busy locks and the ladder take. */
PyObject *ga_take_block(PyObject *mgr, PyObject *kind, PyObject *nbytes_obj)
{
    PyObject *found = PyObject_CallMethodObjArgs(mgr, ga_str_take_block, kind, nbytes_obj, NULL);
    if (found != NULL && (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 3)) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, "take_block must return (ptr, size, epoch)");
        return NULL;
    }
    return found;
}

/* A pooled storage of `nbytes` (> 0): the warm-pool hit here, anything else in Python. */
PyObject *ga_pool_new_storage(PyObject *self, PyObject *kind, Py_ssize_t nbytes,
                              PyObject *nbytes_obj)
{
    PoolObject *mgr = (PoolObject *)self;
    PyObject *free = PyDict_GetItemWithError(mgr->free_lists, kind);
    if (free == NULL)
        return pool_bad_kind(self, kind);
    PyObject *ptr = NULL, *epoch = NULL, *sizeobj = NULL;
    if (nbytes > 0 && nbytes <= PY_SSIZE_T_MAX - GRANULARITY) { /* else: take_block copes */
        Py_ssize_t size = (nbytes + GRANULARITY - 1) & -(Py_ssize_t)GRANULARITY;
        if ((sizeobj = ga_memo_int(size, &ga_memo.size, &ga_memo.size_obj)) == NULL)
            return NULL;
        if (pool_hit(mgr, free, sizeobj, size, &ptr, &epoch) < 0) {
            Py_DECREF(sizeobj);
            return NULL;
        }
    }
    if (ptr != NULL) {
        if (ga_observed()) {
            PyObject *r = PyObject_CallMethodObjArgs(self, ga_str_note_taken, ptr, sizeobj, kind,
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
        PyObject *found = ga_take_block(self, kind, nbytes_obj);
        if (found == NULL)
            return NULL;
        ptr = Py_NewRef(PyTuple_GET_ITEM(found, 0));
        sizeobj = Py_NewRef(PyTuple_GET_ITEM(found, 1));
        epoch = Py_NewRef(PyTuple_GET_ITEM(found, 2));
        Py_DECREF(found);
    }
    StorageObject *st = ga_storage_alloc(ptr, nbytes_obj, mgr->device, kind, sizeobj, epoch, self);
    Py_DECREF(ptr);
    Py_DECREF(epoch);
    Py_DECREF(sizeobj);
    return (PyObject *)st;
}

/* Return a block to the pool; never waits (queues the free if the lock is busy). */
int ga_pool_give_block(PyObject *self, PyObject *kind, PyObject *ptr, PyObject *size,
                       PyObject *epoch, PyObject *recorded)
{
    PoolObject *mgr = (PoolObject *)self;
    if (epoch != mgr->epoch || ga_state->shutting_down)
        return 0; /* predates a reset (or the interpreter is exiting): never reuse or free */
    if (mgr->streams > 0) { /* stream-ordered: events, no lock taken (pool.py) */
        PyObject *r = PyObject_CallMethodObjArgs(self, ga_str_give_ordered, kind, ptr, size,
                                                 epoch, recorded ? recorded : Py_Ellipsis,
                                                 NULL);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    if (!ga_lock_try(mgr->lock)) {
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
            PyObject *r = PyObject_CallMethodNoArgs(self, ga_str_apply_pending);
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
    ga_lock_release(mgr->lock);
    if (rc == 0 && ga_state->history != Py_None) {
        PyObject *r = PyObject_CallMethodObjArgs(self, ga_str_note_put, kind, ptr, size, NULL);
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
    return ga_pool_new_storage(self, args[0], nbytes, args[1]);
}

static PyObject *Pool_give_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "give_block(kind, ptr, size, epoch) takes 4 arguments");
        return NULL;
    }
    if (ga_pool_give_block(self, args[0], args[1], args[2], args[3], NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Pool_release_storage(PyObject *self, PyObject *st)
{
    if (!PyObject_TypeCheck(st, &ga_StorageType)) {
        PyErr_SetString(PyExc_TypeError, "release_storage needs a Storage");
        return NULL;
    }
    StorageObject *s = (StorageObject *)st;
    if (ga_pool_give_block(self, s->kind, s->ptr, s->block, s->epoch,
                           s->streams ? s->streams : Py_None) < 0)
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
    {"streams", T_PYSSIZET, offsetof(PoolObject, streams), 0,
     "Live streams of the device besides its default one (streams.py counts them): while "
     "any, every free is stream-ordered through give_ordered."},
    {NULL}};

PyTypeObject ga_PoolType = {
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
