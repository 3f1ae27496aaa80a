/* gate.c -- Gate: the per-device usage gate's counters and its fast paths (the
 * base of gate.UsageGate, which adds the condition variable the slow paths wait on).
 *
 * Data movement and kernels hold the gate *shared* (re-entrantly, many threads at
 * once); device_reset holds it *exclusively*.  Readers are preferred: a shared
 * entry waits only while a reset holds the gate, never for a reset that waits.
 * Under the GIL the counters change without a lock, so the shared entry and exit
 * cost two C branches (docs/design.md, "Performance"); only when a reset holds
 * the gate, or waits for it, does Python run:
 *   UsageGate._enter_slow()  wait (on the condition) until _try_shared() succeeds;
 *   UsageGate._wake()        notify the condition's waiters.
 * Every decision that must be atomic with a change is one C call
 * (_try_shared, _try_exclusive), so no thread switch falls between a test and a set.
 *
 * May call: nothing of the other core files.
 */
#include "core.h"

static PyObject *str_enter_slow, *str_wake;

int ga_gate_check(PyObject *gate)
{
    if (!PyObject_TypeCheck(gate, &ga_GateType)) {
        PyErr_Format(PyExc_TypeError, "a device gate must be a gpuarrays._core.Gate, got %.200s",
                     Py_TYPE(gate)->tp_name);
        return -1;
    }
    return 0;
}

int ga_gate_enter(PyObject *gate)
{
    GateObject *g = (GateObject *)gate;
    if (!g->writer) {
        g->readers++;
        return 0;
    }
    PyObject *r = PyObject_CallMethodNoArgs(gate, str_enter_slow);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

int ga_gate_exit(PyObject *gate)
{
    GateObject *g = (GateObject *)gate;
    if (g->readers <= 0) {
        if (g->forked) /* a hold taken before the fork, forgotten by _forget_holds */
            return 0;
        PyErr_SetString(PyExc_RuntimeError, "the usage gate was left more often than entered");
        return -1;
    }
    if (--g->readers == 0 && g->waiting) {
        /* a reset waits for the last reader; keep any exception being propagated */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *r = PyObject_CallMethodNoArgs(gate, str_wake);
        if (r == NULL) {
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            return -1;
        }
        Py_DECREF(r);
        PyErr_Restore(et, ev, tb);
    }
    return 0;
}

static PyObject *Gate_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (ga_gate_enter(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Gate_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (ga_gate_exit(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Gate_try_shared(GateObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->writer)
        Py_RETURN_FALSE;
    self->readers++;
    Py_RETURN_TRUE;
}

static PyObject *Gate_try_exclusive(GateObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->writer || self->readers)
        Py_RETURN_FALSE;
    self->writer = 1;
    Py_RETURN_TRUE;
}

static PyObject *Gate_end_exclusive(GateObject *self, PyObject *Py_UNUSED(ignored))
{
    self->writer = 0;
    Py_RETURN_NONE;
}

static PyObject *Gate_forget_holds(GateObject *self, PyObject *Py_UNUSED(ignored))
{
    self->readers = 0;
    self->waiting = 0;
    self->writer = 0;
    self->forked = 1;
    Py_RETURN_NONE;
}

static PyMethodDef Gate_methods[] = {
    {"__enter__", (PyCFunction)Gate_enter, METH_NOARGS,
     "Hold the gate shared (waits only while a reset holds it)."},
    {"__exit__", (PyCFunction)(void (*)(void))Gate_exit, METH_FASTCALL,
     "Let go of a shared hold; the last one wakes a waiting reset."},
    {"_try_shared", (PyCFunction)Gate_try_shared, METH_NOARGS,
     "Take a shared hold unless a reset holds the gate: whether it was taken."},
    {"_try_exclusive", (PyCFunction)Gate_try_exclusive, METH_NOARGS,
     "Take the gate exclusively if nobody holds it: whether it was taken."},
    {"_end_exclusive", (PyCFunction)Gate_end_exclusive, METH_NOARGS,
     "Let go of the exclusive hold (the caller then wakes the waiters)."},
    {"_forget_holds", (PyCFunction)Gate_forget_holds, METH_NOARGS,
     "In a fork's child: no holds, no waiters (their threads are gone); a later exit of a "
     "hold taken before the fork is ignored."},
    {NULL}};

static PyMemberDef Gate_members[] = {
    {"_readers", T_PYSSIZET, offsetof(GateObject, readers), READONLY,
     "Shared holds now."},
    {"_writer", T_BOOL, offsetof(GateObject, writer), READONLY,
     "Whether a reset holds the gate."},
    {"_waiting", T_PYSSIZET, offsetof(GateObject, waiting), 0,
     "Threads waiting on the condition (changed only under it, by the slow paths)."},
    {NULL}};

PyTypeObject ga_GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Gate",
    .tp_doc = "The usage gate's counters and fast paths (see gate.UsageGate).",
    .tp_basicsize = sizeof(GateObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_methods = Gate_methods,
    .tp_members = Gate_members,
};

int ga_gate_init(void)
{
    if ((str_enter_slow = PyUnicode_InternFromString("_enter_slow")) == NULL
            || (str_wake = PyUnicode_InternFromString("_wake")) == NULL)
        return -1;
    return 0;
}
