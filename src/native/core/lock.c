/* lock.c -- Lock, State and Epoch: the core's primitives.
 *
 *   Lock   a plain, non-reentrant lock with threading.Lock's interface whose
 *          non-blocking try C code can take (ga_lock_try, ga_lock_release in
 *          core.h) and whose wait releases the GIL (ga_lock_wait);
 *   State  the process-wide switches read on every allocation (the one
 *          instance, ga_state, is made by module.c);
 *   Epoch  one generation of a device; a reset kills it, and storages of a
 *          dead epoch predate the reset (docs/design.md, "Reset, fork and exit").
 *
 * May call: Python only -- nothing of the other core files.
 */
#include "core.h"

#include <errno.h>
#include <time.h>

/* ---------------------------------------------------------------- Lock */

/* Wait for the lock with the GIL released.  1: acquired, 0: timed out, -1: error
 * (a signal handler raised while waiting). */
int ga_lock_wait(LockObject *l, PY_TIMEOUT_T timeout_us)
{
    if (ga_lock_try(l))
        return 1;
    if (timeout_us == 0)
        return 0;
#ifdef GA_SEM_LOCK
    struct timespec deadline;
    if (timeout_us > 0) {
        clock_gettime(CLOCK_REALTIME, &deadline);
        long long ns = deadline.tv_nsec + (long long)(timeout_us % 1000000) * 1000;
        deadline.tv_sec += (time_t)(timeout_us / 1000000 + ns / 1000000000);
        deadline.tv_nsec = (long)(ns % 1000000000);
    }
    for (;;) {
        int r, err;
        Py_BEGIN_ALLOW_THREADS
        r = timeout_us < 0 ? sem_wait(&l->sem) : sem_timedwait(&l->sem, &deadline);
        err = errno;
        Py_END_ALLOW_THREADS
        if (r == 0) {
            l->locked = 1;
            return 1;
        }
        if (err == ETIMEDOUT)
            return 0;
        if (err != EINTR) {
            errno = err;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (Py_MakePendingCalls() < 0) /* interrupted: run signal handlers */
            return -1;
    }
#else
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
#endif
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
#ifdef GA_SEM_LOCK
    if (sem_init(&self->sem, 0, 1) != 0) {
        Py_DECREF(self);
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->ready = 1;
#else
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
#endif
    return (PyObject *)self;
}

static void Lock_dealloc(LockObject *self)
{
#ifdef GA_SEM_LOCK
    if (self->ready)
        sem_destroy(&self->sem);
#else
    if (self->lock) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
#endif
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
    int r = ga_lock_wait(self, us);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *Lock_enter(LockObject *self, PyObject *Py_UNUSED(ignored))
{
    int r = ga_lock_wait(self, -1);
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
    ga_lock_release(self);
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

PyTypeObject ga_LockType = {
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

static PyMemberDef State_members[] = {
    {"shutting_down", T_BOOL, offsetof(StateObject, shutting_down), 0,
     "Set when interpreter shutdown starts: from then on nothing reaches the platform."},
    {"recorders", T_OBJECT_EX, offsetof(StateObject, recorders), READONLY,
     "Active record_allocations() blocks."},
    {"history", T_OBJECT, offsetof(StateObject, history), 0,
     "The active history recorder or None."},
    {NULL}};

PyTypeObject ga_StateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.State",
    .tp_doc = "Process-wide switches read on hot paths (one instance: _core.state).",
    .tp_basicsize = sizeof(StateObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_members = State_members,
};

/* ---------------------------------------------------------------- Epoch */

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

PyTypeObject ga_EpochType = {
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
