/* working.c -- Working: the block an operation's device work runs in (docs/design.md,
 * "Work in flight holds its memory").
 *
 *   with _core.Working(gate, *arrays):   (None entries are skipped)
 *
 * enters the device's usage gate shared (no reset under the work), takes a hold on each
 * array's storage, then checks that every array is live; on exit lets the holds go and
 * leaves the gate.  A free racing the work -- forced, a cache's, from another thread --
 * quarantines the memory until the last hold goes (storage.c) instead of handing it to
 * another array; a free that came first raises the array's own FreedArrayError (its
 * `_freed_error()`), after the holds are undone.  Device work still queued at the exit is
 * ordered before any later user of the memory by the device's one in-order queue.
 *
 * ga_work_hold / ga_work_unhold are the same holds for compute.c's compiled path.  A hold
 * taken while the storage's device has a current stream in this thread records that
 * stream on the storage (streams.c): its release is ordered after the stream's work.
 *
 * May call: storage.c (ga_storage_hold, ga_storage_unhold), gate.c.
 */
#include "core.h"

#define MAX_HELD 16 /* arrays an operation names (more: TypeError, a programming error) */

typedef struct {
    PyObject_HEAD
    PyObject *gate;
    PyObject *arrays; /* the tuple of arrays (and Nones) */
    int nheld;
    StorageObject *held[MAX_HELD];
} WorkingObject;

static PyObject *str_freed_error;

int ga_work_hold(StorageObject *const *held, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        held[i]->handles++;
        ga_storage_hold(held[i]);
        if (ga_storage_record(held[i]) < 0) /* work on a stream: its release waits for it */
            rc = -1;
    }
    return rc;
}

int ga_work_unhold(StorageObject *const *held, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (ga_storage_unhold(held[i]) < 0)
            rc = -1;
    return rc;
}

int ga_work_live(StorageObject *st)
{
    return st->reason == Py_None && ga_epoch_live(st->epoch);
}

static PyObject *Working_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Working() takes no keyword arguments");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1 || ga_gate_check(PyTuple_GET_ITEM(args, 0)) < 0) {
        if (n < 1)
            PyErr_SetString(PyExc_TypeError, "Working(gate, *arrays) needs the device's gate");
        return NULL;
    }
    if (n - 1 > MAX_HELD) {
        PyErr_Format(PyExc_TypeError, "Working() holds at most %d arrays, got %zd", MAX_HELD,
                     n - 1);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        if (a != Py_None && !ga_is_array(a)) {
            PyErr_Format(PyExc_TypeError, "Working() holds gpuarrays arrays, got %.200s",
                         Py_TYPE(a)->tp_name);
            return NULL;
        }
    }
    WorkingObject *self = (WorkingObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->gate = Py_NewRef(PyTuple_GET_ITEM(args, 0));
    self->arrays = Py_NewRef(args);
    self->nheld = 0;
    return (PyObject *)self;
}

/* Let go of the holds taken so far (their storage references too). */
static int release(WorkingObject *self)
{
    int n = self->nheld;
    self->nheld = 0;
    int rc = ga_work_unhold(self->held, n);
    for (int i = 0; i < n; i++)
        Py_DECREF(self->held[i]);
    return rc;
}

static PyObject *Working_enter(WorkingObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->nheld) {
        PyErr_SetString(PyExc_RuntimeError, "a Working block is not re-entrant");
        return NULL;
    }
    if (ga_gate_enter(self->gate) < 0)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(self->arrays);
    for (Py_ssize_t i = 1; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(self->arrays, i);
        if (a != Py_None)
            self->held[self->nheld++] = (StorageObject *)Py_NewRef(((ArrayObject *)a)->storage);
    }
    if (ga_work_hold(self->held, self->nheld) < 0) {
        release(self);
        ga_gate_exit(self->gate);
        return NULL;
    }
    for (Py_ssize_t i = 1; i < n; i++) {
        ArrayObject *a = (ArrayObject *)PyTuple_GET_ITEM(self->arrays, i);
        if ((PyObject *)a == Py_None || (!a->freed && ga_work_live(a->storage)))
            continue;
        PyObject *err = PyObject_CallMethodNoArgs((PyObject *)a, str_freed_error);
        release(self);
        ga_gate_exit(self->gate);
        if (err != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(err), err);
            Py_DECREF(err);
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *Working_exit(WorkingObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    int rc = release(self);
    if (ga_gate_exit(self->gate) < 0)
        rc = -1;
    if (rc < 0)
        return NULL;
    Py_RETURN_FALSE;
}

static void Working_dealloc(WorkingObject *self)
{
    if (self->nheld) { /* never left (a generator dropped mid-block): no hold outlives it */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (release(self) < 0 || ga_gate_exit(self->gate) < 0)
            PyErr_WriteUnraisable((PyObject *)self);
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(self->gate);
    Py_XDECREF(self->arrays);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef Working_methods[] = {
    {"__enter__", (PyCFunction)Working_enter, METH_NOARGS,
     "Enter the gate shared, hold every array's storage, check they are live."},
    {"__exit__", (PyCFunction)(void (*)(void))Working_exit, METH_FASTCALL,
     "Let the holds go and leave the gate."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject ga_WorkingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Working",
    .tp_basicsize = sizeof(WorkingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Working(gate, *arrays): the block an operation's device work runs in -- the "
              "gate shared, a hold on each array's storage, liveness checked (see working.c).",
    .tp_new = Working_new,
    .tp_dealloc = (destructor)Working_dealloc,
    .tp_methods = Working_methods,
};

int ga_working_init(void)
{
    return (str_freed_error = PyUnicode_InternFromString("_freed_error")) == NULL ? -1 : 0;
}
