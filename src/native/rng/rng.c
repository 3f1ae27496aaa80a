/*
 * rng.c -- gpuarrays._rng, the cpu engine of the random numbers (docs/random.md, "The cpu
 * engine").
 *
 * rng_kernels.h is the one kernel template of gpuarrays/_compute/rng/kernels.py written in
 * plain C (kernels.c_source; a test keeps the committed copy current): the same Philox
 * rounds and transforms as the OpenCL and CUDA kernels, so the same bits; the floating
 * kernels run their whole lane groups through loops of the same statements that gcc
 * vectorizes, compiled per instruction set and picked at run time.  This module is
 * compiled with -ffp-contract=off (setup.py), so every floating-point operation rounds
 * once, as in the kernels' other dialects.
 *
 *   launch(name, values, items)  runs kernel `name` for work-items 0 .. items - 1 on
 *       the calling thread, without the GIL.  `values` is a tuple of the kernel's arguments
 *       (ints: addresses and unsigned values; floats), converted per its parameter codes.
 *       The caller owns the memory the addresses name and keeps it alive for the call.
 *       Raises ValueError for an unknown kernel, TypeError for a wrong argument count,
 *       and what int()/float() conversion raises; nothing runs then.
 *   isa()  the code that computes the floating kernels' whole lane groups now: "x86-64-v4",
 *       "x86-64-v3" or "baseline" (the lane-group loops compiled for that instruction set:
 *       rng_kernels.h), or "scalar" (the scalar kernel alone, as before those loops).
 *   use_isa(name)  makes `name` (one of isa()'s, or "best": the best this CPU runs, the
 *       default) the code used from now on and returns the previous setting; ValueError for a
 *       name this CPU cannot run.  For tests and measurements: every choice gives the same
 *       bits.  Not while other threads launch kernels.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "rng_kernels.h"

#define RNG_MAX_ARGS 16

static const rng_kernel *rng_find(const char *name)
{
    for (size_t i = 0; i < sizeof(rng_kernels) / sizeof(rng_kernels[0]); i++) {
        if (strcmp(rng_kernels[i].name, name) == 0)
            return &rng_kernels[i];
    }
    return NULL;
}

static int rng_value_from(PyObject *v, char code, rng_value *out)
{
    if (code == 'f' || code == 'd') {
        out->f = PyFloat_AsDouble(v);
        return out->f == -1.0 && PyErr_Occurred() ? -1 : 0;
    }
    PyObject *index = PyNumber_Index(v);
    if (index == NULL)
        return -1;
    unsigned long long u = PyLong_AsUnsignedLongLong(index);
    Py_DECREF(index);
    if (u == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (code == 'p')
        out->p = (void *)(uintptr_t)u;
    else
        out->u = u;
    return 0;
}

static PyObject *rng_launch(PyObject *self, PyObject *args)
{
    const char *name;
    PyObject *values;
    unsigned long long items;
    if (!PyArg_ParseTuple(args, "sO!K:launch", &name, &PyTuple_Type, &values, &items))
        return NULL;
    const rng_kernel *k = rng_find(name);
    if (k == NULL) {
        PyErr_Format(PyExc_ValueError, "launch: the cpu engine has no kernel %s "
                     "(kernels.names('c') lists those it has)", name);
        return NULL;
    }
    Py_ssize_t n = (Py_ssize_t)strlen(k->params);
    if (PyTuple_GET_SIZE(values) != n) {
        PyErr_Format(PyExc_TypeError, "launch: kernel %s takes %zd arguments, got %zd",
                     name, n, PyTuple_GET_SIZE(values));
        return NULL;
    }
    rng_value a[RNG_MAX_ARGS];
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rng_value_from(PyTuple_GET_ITEM(values, i), k->params[i], &a[i]) < 0)
            return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    k->run(a, (u64)items);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static const char *const rng_isas[] = {"scalar", "baseline", "x86-64-v3", "x86-64-v4"};

static PyObject *rng_isa(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(rng_isas[rng_level >= 0 ? rng_level : rng_best()]);
}

static PyObject *rng_use_isa(PyObject *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s:use_isa", &name))
        return NULL;
    int level = -1;
    if (strcmp(name, "best") != 0) {
        for (int i = 0; i < (int)(sizeof(rng_isas) / sizeof(rng_isas[0])); i++) {
            if (strcmp(rng_isas[i], name) == 0)
                level = i;
        }
        if (level < 0 || level > rng_best()) {
            PyErr_Format(PyExc_ValueError, "use_isa: %s is not one this CPU runs (it runs "
                         "\"scalar\" up to \"%s\", and \"best\")", name, rng_isas[rng_best()]);
            return NULL;
        }
    }
    int old = rng_level;
    rng_level = level;
    return PyUnicode_FromString(old >= 0 ? rng_isas[old] : "best");
}

static PyMethodDef rng_functions[] = {
    {"launch", rng_launch, METH_VARARGS,
     "launch(name, values, items): run the cpu engine's random-number kernel name for "
     "work-items 0 .. items - 1 (see rng.c)."},
    {"isa", rng_isa, METH_NOARGS,
     "isa(): the code computing the floating kernels' whole lane groups now (see rng.c)."},
    {"use_isa", rng_use_isa, METH_VARARGS,
     "use_isa(name): use that code from now on ('best': the default); returns the previous "
     "setting (see rng.c)."},
    {NULL}};

static struct PyModuleDef rng_module = {
    PyModuleDef_HEAD_INIT, "gpuarrays._rng",
    "The cpu engine of gpuarrays.random: the random-number kernels in C (see rng.c).", -1,
    rng_functions};

PyMODINIT_FUNC PyInit__rng(void)
{
    for (size_t i = 0; i < sizeof(rng_kernels) / sizeof(rng_kernels[0]); i++) {
        if (strlen(rng_kernels[i].params) > RNG_MAX_ARGS) {
            PyErr_Format(PyExc_SystemError, "rng kernel %s has more than %d parameters",
                         rng_kernels[i].name, RNG_MAX_ARGS);
            return NULL;
        }
    }
    return PyModule_Create(&rng_module);
}
