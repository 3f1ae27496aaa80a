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
 * Holds (docs/design.md, "Release"): some handles cannot be revoked -- a NumPy host
 * view, a DLPack capsule, a consumed capsule whose deleter has not run -- and work in
 * flight (a transfer, copy, fill or kernel) must not see its memory reused under it.
 * Such a handle is also a hold.  A forced free or cache.free() that claims the token
 * while holds remain invalidates every array as usual but *quarantines* the memory:
 * it goes back to its home when the last hold goes.  Storages with holds are on one
 * list (Storage._held()), for memory_stats and device_reset.
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
    if (ga_storage_record(st) < 0) {
        Py_DECREF(st);
        return NULL;
    }
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
    int is_owned = PyObject_IsTrue(owned); /* may raise: the error propagates */
    if (is_owned < 0)
        return NULL;
    StorageObject *st = (StorageObject *)type->tp_alloc(type, 0);
    if (st == NULL)
        return NULL;
    st->ptr = Py_NewRef(ptr);
    st->nbytes = Py_NewRef(nbytes);
    st->device = Py_NewRef(device);
    st->kind = Py_NewRef(kind);
    st->owned = Py_NewRef(is_owned ? Py_True : Py_False);
    st->owner = Py_NewRef(owner);
    st->block = Py_NewRef(block);
    st->epoch = Py_NewRef(epoch);
    st->home = Py_NewRef(home);
    st->reason = Py_NewRef(Py_None);
    st->token = 1;
    if (ga_storage_record(st) < 0) {
        Py_DECREF(st);
        return NULL;
    }
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
    Py_VISIT(self->streams);
    return 0;
}

static int Storage_clear(StorageObject *self)
{
    /* Only what can close a cycle; finalizers (which give memory back through
     * the home) have run before the collector clears anything. */
    ga_storage_unbusy(self);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->home);
    Py_CLEAR(self->streams);
    return 0;
}

/* The list of storages with holds (borrowed: every hold keeps its storage alive). */
static StorageObject *held_head;

static void held_unlink(StorageObject *st)
{
    if (st->held_prev)
        st->held_prev->held_next = st->held_next;
    else if (held_head == st)
        held_head = st->held_next;
    if (st->held_next)
        st->held_next->held_prev = st->held_prev;
    st->held_prev = st->held_next = NULL;
}

static void Storage_dealloc(StorageObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->holds > 0) /* cannot happen while a hold keeps it alive; never dangle */
        held_unlink(self);
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
        return ga_pool_give_block(home, st->kind, st->ptr, st->block, st->epoch,
                                  st->streams ? st->streams : Py_None);
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

/* The token is claimed: give the memory back now, or when the last hold goes. */
static int give_back_or_quarantine(StorageObject *st)
{
    if (st->holds > 0) {
        st->quarantined = 1;
        return 0;
    }
    return ga_storage_give_back(st);
}

/* Claim the token and give the memory back, or quarantine it while holds remain. */
int ga_storage_release(StorageObject *st, PyObject *reason)
{
    if (!ga_storage_claim(st, reason))
        return 0;
    return give_back_or_quarantine(st);
}

/* One more hold (the caller already counts a handle for it). */
void ga_storage_hold(StorageObject *st)
{
    if (st->holds++ == 0) {
        st->held_prev = NULL;
        st->held_next = held_head;
        if (held_head)
            held_head->held_prev = st;
        held_head = st;
    }
}

/* A hold and its handle go; the last hold ends a quarantine. */
int ga_storage_unhold(StorageObject *st)
{
    int rc = 0;
    if (st->holds > 0 && --st->holds == 0) {
        held_unlink(st);
        if (st->quarantined) {
            st->quarantined = 0;
            rc = ga_storage_give_back(st);
        }
    }
    return ga_storage_decref(st) < 0 ? -1 : rc;
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
    if (give_back_or_quarantine(self) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static int rehome(StorageObject *self, PyObject *home)
{
    ga_storage_unbusy(self); /* out of a cache's busy array before it stops being home */
    Py_INCREF(home);
    Py_XSETREF(self->home, home);
    return 0;
}

static PyObject *Storage_release_to(StorageObject *self, PyObject *const *args,
                                    Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_release_to(reason, home) takes 2 arguments");
        return NULL;
    }
    if (!ga_storage_claim(self, args[0])) {
        if (self->quarantined) /* freed already, its memory still held: it goes to home */
            rehome(self, args[1]);
        Py_RETURN_FALSE;
    }
    rehome(self, args[1]);
    if (give_back_or_quarantine(self) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *Storage_rehome(StorageObject *self, PyObject *home)
{
    rehome(self, home);
    Py_RETURN_NONE;
}

static PyObject *Storage_hold(StorageObject *self, PyObject *Py_UNUSED(ignored))
{
    self->handles++;
    ga_storage_hold(self);
    Py_RETURN_NONE;
}

static PyObject *Storage_unhold(StorageObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->holds <= 0) {
        PyErr_SetString(PyExc_RuntimeError, "_unhold() without a matching _hold()");
        return NULL;
    }
    if (ga_storage_unhold(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Storage_held(PyObject *cls, PyObject *Py_UNUSED(ignored))
{
    PyObject *out = PyList_New(0);
    for (StorageObject *st = held_head; out != NULL && st != NULL; st = st->held_next) {
        if (PyList_Append(out, (PyObject *)st) < 0)
            Py_CLEAR(out);
    }
    return out;
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
    {"_release_to", (PyCFunction)(void (*)(void))Storage_release_to, METH_FASTCALL,
     "_release_to(reason, home) -> bool: claim the token; the memory goes to `home` now, "
     "or when the last hold goes (quarantine, also of a storage freed before); True if "
     "this call claimed it."},
    {"_rehome", (PyCFunction)Storage_rehome, METH_O,
     "_rehome(home): the memory goes to `home` when it is given back."},
    {"_hold", (PyCFunction)Storage_hold, METH_NOARGS,
     "Take a handle that is a hold (work in flight): the memory is not reused before "
     "_unhold()."},
    {"_unhold", (PyCFunction)Storage_unhold, METH_NOARGS,
     "Release a hold taken by _hold(); ends a quarantine when it is the last."},
    {"_held", (PyCFunction)Storage_held, METH_NOARGS | METH_CLASS,
     "The storages with holds now (a new list)."},
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
    {"_holds", T_PYSSIZET, offsetof(StorageObject, holds), READONLY,
     "Handles gpuarrays cannot revoke, plus work in flight."},
    {"_quarantined", T_BOOL, offsetof(StorageObject, quarantined), READONLY,
     "Freed, but held: the memory goes back when the last hold goes."},
    {"_streams", T_OBJECT, offsetof(StorageObject, streams), READONLY,
     "The streams it was allocated or used on while its device had streams (None in it: "
     "the default one), or None."},
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
