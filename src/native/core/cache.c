/* cache.c -- Cache: the compiled part of cache.AllocCache (which subclasses it):
 * its free buffers, the hit and the release, and the busy storages
 * (docs/design.md, "Allocation caches").
 *
 * A cache serves a storage over a buffer of exactly the size asked that no live
 * storage uses, so cached arrays never alias; a miss takes a new block from the
 * device's pool.  Also the cache's and pool's side of a storage's end:
 * ga_storage_unbusy and ga_storage_return_orphan (called from storage.c).
 *
 * May call: lock.c (ga_lock_try, ga_lock_wait, ga_lock_release, ga_epoch_live,
 * ga_observed), storage.c (ga_storage_alloc), pool.c (ga_take_block,
 * ga_pool_give_block, PoolObject.cache_hits).
 */
#include "core.h"

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
void ga_storage_unbusy(StorageObject *st)
{
    if (st->busy_pos && st->home && PyObject_TypeCheck(st->home, &ga_CacheType))
        busy_remove((CacheObject *)st->home, st);
    st->busy_pos = 0;
}

static PyObject *Cache_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    CacheObject *self = (CacheObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = (LockObject *)PyObject_CallNoArgs((PyObject *)&ga_LockType);
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
    if (!ga_epoch_live(st->epoch) || st->served_in == NULL)
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
        int rc = PyObject_TypeCheck(st, &ga_StorageType)
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
PyObject *ga_cache_storage(PyObject *self, PyObject *device, PyObject *kind,
                           PyObject *nbytes_obj)
{
    CacheObject *cache = (CacheObject *)self;
    PyObject *mgr = (device == cache->memo_device && cache->memo_mgr)
                        ? Py_NewRef(cache->memo_mgr) : PyObject_GetAttr(device, ga_str_memory);
    if (mgr == NULL)
        return NULL;
    if (PyObject_TypeCheck(mgr, &ga_PoolType) && ((PoolObject *)mgr)->streams > 0) {
        /* the device has streams: its pool's stream-ordered reuse serves (docs/streams.md) */
        Py_ssize_t nbytes = PyLong_AsSsize_t(nbytes_obj);
        PyObject *st = (nbytes == -1 && PyErr_Occurred())
                           ? NULL : ga_pool_new_storage(mgr, kind, nbytes, nbytes_obj);
        Py_DECREF(mgr);
        return st;
    }
    PyObject *entry = NULL, *bufs = NULL;
    int rc = ga_lock_wait(cache->lock, -1);
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
                    && ga_epoch_live(PyTuple_GET_ITEM(e, 2))) {
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
    ga_lock_release(cache->lock);
    if (rc < 0)
        goto fail;
    if (entry) {
        if (PyObject_TypeCheck(mgr, &ga_PoolType))
            ((PoolObject *)mgr)->cache_hits++;
        if (ga_observed()) {
            PyObject *r = PyObject_CallMethodObjArgs(self, ga_str_note_reuse, device, kind,
                                                     PyTuple_GET_ITEM(entry, 0),
                                                     PyTuple_GET_ITEM(entry, 1), NULL);
            if (r == NULL)
                goto fail_taken;
            Py_DECREF(r);
        }
    } else { /* outside our lock: the ladder may come back to us */
        Py_CLEAR(bufs);
        PyObject *found = ga_take_block(mgr, kind, nbytes_obj);
        if (found == NULL)
            goto fail;
        entry = found; /* (ptr, block, epoch), the buffer's entry from now on */
        if (ga_lock_wait(cache->lock, -1) < 0)
            goto fail_taken;
        sub = cache_sub_locked(cache, device, mgr, kind, 1);
        bufs = sub ? cache_list_locked(sub, nbytes_obj) : NULL;
        Py_XINCREF(bufs);
        ga_lock_release(cache->lock);
        if (bufs == NULL)
            goto fail_taken;
    }
    StorageObject *st = ga_storage_alloc(PyTuple_GET_ITEM(entry, 0), nbytes_obj, device, kind,
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
        if (PyObject_TypeCheck(mgr, &ga_PoolType)
                && ga_pool_give_block(mgr, kind, PyTuple_GET_ITEM(entry, 0),
                                      PyTuple_GET_ITEM(entry, 1), PyTuple_GET_ITEM(entry, 2),
                                      NULL) < 0)
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
int ga_cache_release(PyObject *self, StorageObject *st)
{
    CacheObject *cache = (CacheObject *)self;
    if (!ga_lock_try(cache->lock))
        return PyList_Append(cache->returned, (PyObject *)st);
    int rc = cache_put_back_locked(cache, st);
    ga_lock_release(cache->lock);
    return rc;
}

/* A storage made by a pool or cache and dropped before any array took a handle: the
 * memory is nobody's, so it goes back (wrapped memory is left to its owner).  Runs in
 * its dealloc: nothing here may keep a reference to it. */
void ga_storage_return_orphan(StorageObject *self)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    int rc = 0;
    if (PyObject_TypeCheck(self->home, &ga_CacheType)) {
        CacheObject *cache = (CacheObject *)self->home;
        if (self->busy_pos && ga_lock_try(cache->lock)) {
            self->token = 0;
            rc = cache_put_back_locked(cache, self);
            ga_lock_release(cache->lock);
        }
    } else if (PyObject_TypeCheck(self->home, &ga_PoolType)) {
        self->token = 0;
        rc = ga_pool_give_block(self->home, self->kind, self->ptr, self->block, self->epoch,
                                self->streams ? self->streams : Py_None);
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
    return ga_cache_storage(self, args[0], args[1], args[2]);
}

static PyObject *Cache_release_storage(PyObject *self, PyObject *st)
{
    if (!PyObject_TypeCheck(st, &ga_StorageType)) {
        PyErr_SetString(PyExc_TypeError, "release_storage needs a Storage");
        return NULL;
    }
    if (ga_cache_release(self, (StorageObject *)st) < 0)
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

PyTypeObject ga_CacheType = {
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
