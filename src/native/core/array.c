/* array.c -- Array: the fields and lifetime of GPUArray (array.GPUArray
 * subclasses it): its one handle on a storage, free(force=False) and the
 * finalizer, which never raises (docs/design.md, "Release").  Also _core.make().
 *
 * The `freed` flag is set before the handle goes, so an array never uses memory
 * its own release gave back.  An array can be a *hold* (_as_hold(): the handle a
 * host view or a DLPack capsule owns): its release also lets go of the hold, which
 * may end a quarantine (storage.c).
 *
 * May call: storage.c (ga_storage_decref, ga_storage_release, ga_storage_hold,
 * ga_storage_unhold).
 */
#include "core.h"

/* Release a's handle (its freed flag is set): a hold's goes with the hold. */
static int array_drop_handle(ArrayObject *a)
{
    if (a->hold) {
        a->hold = 0;
        return ga_storage_unhold(a->storage);
    }
    return ga_storage_decref(a->storage);
}

/* A new array taking one handle on `st` (steals nothing). */
PyObject *ga_array_make(StorageObject *st, PyObject *shape, PyObject *strides,
                        PyObject *offset, PyObject *dtype, int writeable, PyObject *contig)
{
    PyTypeObject *type = ga_array_type ? ga_array_type : &ga_ArrayType;
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

PyObject *ga_core_make(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5 || nargs > 7) {
        PyErr_Format(PyExc_TypeError, "make() takes 5 to 7 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &ga_StorageType)) {
        PyErr_Format(PyExc_TypeError, "make() needs a Storage, got %.200s",
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    int writeable = 1;
    if (nargs > 5 && (writeable = PyObject_IsTrue(args[5])) < 0)
        return NULL;
    return ga_array_make((StorageObject *)args[0], args[1], args[2], args[3], args[4], writeable,
                         nargs > 6 ? args[6] : Py_None);
}

static void array_release_quietly(ArrayObject *a)
{
    if (a->freed || a->storage == NULL)
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    a->freed = 1; /* set before the handle goes (GPUArrays.jl's lesson) */
    if (array_drop_handle(a) < 0) {
        /* a finalizer never raises: report as a warning (or drop it) */
        PyObject *t, *v, *b;
        PyErr_Fetch(&t, &v, &b);
        PyErr_NormalizeException(&t, &v, &b);
        if (PyErr_WarnFormat(ga_warning ? ga_warning : PyExc_RuntimeWarning, 1,
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
    int was_live = !self->freed;
    self->freed = 1; /* set before the handle goes */
    if (!force) {
        if (was_live && array_drop_handle(self) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    int was_hold = was_live && self->hold;
    if (was_live && !was_hold && st->handles > 0)
        st->handles--;
    /* The memory goes back now, or is quarantined while holds remain; this array's
     * own hold, if it is one, goes after the claim so that it can end the quarantine. */
    if (ga_storage_release(st, ga_str_forced) < 0)
        return NULL;
    if (was_hold && array_drop_handle(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

int ga_array_free(PyObject *self)
{
    ArrayObject *a = (ArrayObject *)self;
    int was_live = !a->freed;
    a->freed = 1; /* set before the handle goes */
    return was_live ? array_drop_handle(a) : 0;
}

static PyObject *Array_as_hold(ArrayObject *self, PyObject *Py_UNUSED(ignored))
{
    StorageObject *st = self->storage;
    if (self->freed || st->reason != Py_None || !ga_epoch_live(st->epoch))
        Py_RETURN_FALSE;
    if (!self->hold) {
        self->hold = 1;
        ga_storage_hold(st);
    }
    Py_RETURN_TRUE;
}

static PyMethodDef Array_methods[] = {
    {"free", (PyCFunction)(void (*)(void))Array_free, METH_FASTCALL | METH_KEYWORDS,
     "free(force=False)\n--\n\n"
     "Release this array's handle now (idempotent).\n\n"
     "``force=True`` releases the memory itself: every array sharing the storage becomes "
     "freed (``FreedArrayError`` on use)."},
    {"_as_hold", (PyCFunction)Array_as_hold, METH_NOARGS,
     "Make this array's handle a hold (owned by a host view or a DLPack capsule, which "
     "gpuarrays cannot revoke): False if its storage is freed already."},
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

PyTypeObject ga_ArrayType = {
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
