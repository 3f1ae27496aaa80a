/* storage.c -- Storage: the reference-counted allocation shared by every array
 * derived from it (docs/design.md, "The storage model" and "Release").
 *
 * A storage counts its handles (one per array) and holds the release token:
 * the right to give the memory back, which exactly one caller claims -- the
 * last handle's release (reason "local"), a forced free, or a caller that takes
 * the memory itself (invalidate: cache.free()).  Reading and updating both is one
 * step under the GIL, so no lock is on this path.  The memory goes back to the
 * storage's home: a Pool, a Cache, or any object with release_storage(storage).
 * A dead epoch (a reset) counts as freed too.
 *
 * May call: lock.c (ga_epoch_live), pool.c (ga_pool_give_block), cache.c
 * (ga_cache_release, ga_storage_unbusy, ga_storage_return_orphan).
 */
#include "core.h"

StorageObject *ga_storage_alloc(PyObject *ptr, PyObject *nbytes, PyObject *device,
                                PyObject *kind, PyObject *block, PyObject *epoch,
                                PyObject *home)
{
    PyTypeObject *type = ga_storage_type ? ga_storage_type : &ga_StorageType;
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
    PyObject *ptr, *nbytes, *device, *kind, *home, *epoch, *block = ga_zero,
             *owned = Py_True, *owner = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!OOOO!|O!OO:Storage", names, &PyLong_Type,
                                     &ptr, &PyLong_Type, &nbytes, &device, &kind, &home,
                                     &ga_EpochType, &epoch, &PyLong_Type, &block, &owned, &owner))
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
    ga_storage_unbusy(self);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->home);
    return 0;
}

static void Storage_dealloc(StorageObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->token && self->handles == 0 && self->home)
        ga_storage_return_orphan(self);
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
int ga_storage_give_back(StorageObject *st)
{
    PyObject *home = st->home;
    if (home == NULL || home == Py_None)
        return 0;
    if (PyObject_TypeCheck(home, &ga_PoolType))
        return ga_pool_give_block(home, st->kind, st->ptr, st->block, st->epoch);
    if (PyObject_TypeCheck(home, &ga_CacheType))
        return ga_cache_release(home, st);
    Py_INCREF(home);
    PyObject *r = PyObject_CallMethodOneArg(home, ga_str_release_storage, (PyObject *)st);
    Py_DECREF(home);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

int ga_storage_decref(StorageObject *st)
{
    if (st->handles > 0)
        st->handles--;
    if (st->handles == 0 && st->token) {
        st->token = 0;
        Py_SETREF(st->reason, Py_NewRef(ga_str_local));
        return ga_storage_give_back(st);
    }
    return 0;
}

/* Claim the token with `reason`; 1 if this call won it. */
int ga_storage_claim(StorageObject *st, PyObject *reason)
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
    if (ga_storage_decref(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Storage_release(StorageObject *self, PyObject *reason)
{
    if (!ga_storage_claim(self, reason))
        Py_RETURN_FALSE;
    if (ga_storage_give_back(self) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *Storage_invalidate(StorageObject *self, PyObject *reason)
{
    return PyBool_FromLong(ga_storage_claim(self, reason));
}

static inline int storage_is_freed(StorageObject *st)
{
    return st->reason != Py_None || !ga_epoch_live(st->epoch);
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

PyTypeObject ga_StorageType = {
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
