/* launch.c -- the compiled enqueue of generated elementwise kernels on OpenCL
 * devices (docs/kernels.md, "The host path").
 *
 * Three types, all made by Python and run by compute.c's apply():
 *   ClKernel      one cl_kernel of a generated kernel, the queue it goes to and
 *                 the OpenCL entry points (their addresses, handed over by the
 *                 OpenCL back-end: this file links no OpenCL library and knows no
 *                 operation), the parameter types and the values last set.  The
 *                 back-end's Python kernel object keeps a cl_kernel of its own, so
 *                 the two never overwrite each other's argument values; the
 *                 back-end releases both at a device reset, after which this one is
 *                 stale (its device state is no longer the back-end's current one)
 *                 and is never used again.
 *   Launch        one layout's launch: the ClKernel, the global and local size and
 *                 where each argument comes from (the result's address, an
 *                 operand's address, a Python scalar operand converted to the
 *                 parameter's C type, or a constant: element count, extents,
 *                 strides).
 *   DeviceEngine  the engine a plan's typing holds for a device: the launches of
 *                 the last few layouts it met (shape, strides and address
 *                 alignment of the result and every array operand, which may
 *                 broadcast), the maker that
 *                 answers a new layout (Python: a Launch, or None for a layout the
 *                 Python engine runs), and that Python engine (`fallback`).
 *
 * Arguments: OpenCL keeps a kernel's argument values between enqueues, so only the
 * values whose bits changed are set again.  Setting arguments and enqueueing run
 * no Python code and keep the GIL, so no other thread's launch of the same
 * ClKernel comes between them.  Any OpenCL error, a value that does not convert
 * exactly, or a stale ClKernel hands the call to the Python engine, which launches
 * its own cl_kernel and raises what is wrong.
 *
 * May call: compute.c (ga_same_ints, ga_array_address), which calls this.
 */
#include "core.h"

#include <stdint.h>
#include <string.h>

typedef int32_t (*set_arg_fn)(void *kernel, uint32_t index, size_t size, const void *value);
typedef int32_t (*set_svm_fn)(void *kernel, uint32_t index, const void *ptr);
typedef int32_t (*enqueue_fn)(void *queue, void *kernel, uint32_t dims, const size_t *offset,
                              const size_t *global, const size_t *local, uint32_t nevents,
                              const void *events, void *event);
typedef int32_t (*flush_fn)(void *queue);

#define MAX_PARAMS 64
#define MAX_OPERANDS 3 /* compute.c's MAX_IN */

static unsigned long long launches; /* compiled launches made (tests read it) */

/* ---------------------------------------------------------------- ClKernel */

typedef struct {
    PyObject_HEAD
    void *kernel, *queue;
    set_arg_fn set_arg;
    set_svm_fn set_svm;
    enqueue_fn enqueue;
    flush_fn flush; /* NULL: the device starts commands without one */
    PyObject *state, *states, *index;
    int nparams;
    char types[MAX_PARAMS];     /* 'p' address, '?' bool, b B h H i I q Q f d */
    uint64_t last[MAX_PARAMS];  /* the bits last set */
    char set[MAX_PARAMS];       /* whether last[i] is known */
} ClKernelObject;

static size_t type_size(char t)
{
    switch (t) {
    case '?': case 'b': case 'B': return 1;
    case 'h': case 'H': return 2;
    case 'i': case 'I': case 'f': return 4;
    default: return 8; /* p q Q d */
    }
}

static PyObject *ClKernel_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kernel", "queue", "set_arg", "set_svm", "enqueue", "flush",
                            "types", "state", "states", "index", NULL};
    unsigned long long kernel, queue, set_arg, set_svm, enqueue, flush;
    const char *types;
    PyObject *state, *states, *index;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "KKKKKKsOO!O:ClKernel", names, &kernel, &queue,
                                     &set_arg, &set_svm, &enqueue, &flush, &types, &state,
                                     &PyDict_Type, &states, &index))
        return NULL;
    size_t n = strlen(types);
    if (n > MAX_PARAMS || strspn(types, "p?bBhHiIqQfd") != n) {
        PyErr_Format(PyExc_ValueError, "ClKernel: types must be at most %d of 'p?bBhHiIqQfd', "
                     "got '%s'", MAX_PARAMS, types);
        return NULL;
    }
    if (!kernel || !queue || !set_arg || !set_svm || !enqueue) {
        PyErr_SetString(PyExc_ValueError, "ClKernel: the kernel, the queue and the entry points "
                        "must be non-null addresses");
        return NULL;
    }
    ClKernelObject *k = (ClKernelObject *)type->tp_alloc(type, 0);
    if (k == NULL)
        return NULL;
    k->kernel = (void *)(uintptr_t)kernel;
    k->queue = (void *)(uintptr_t)queue;
    k->set_arg = (set_arg_fn)(uintptr_t)set_arg;
    k->set_svm = (set_svm_fn)(uintptr_t)set_svm;
    k->enqueue = (enqueue_fn)(uintptr_t)enqueue;
    k->flush = flush ? (flush_fn)(uintptr_t)flush : NULL;
    k->state = Py_NewRef(state);
    k->states = Py_NewRef(states);
    k->index = Py_NewRef(index);
    k->nparams = (int)n;
    memcpy(k->types, types, n);
    return (PyObject *)k;
}

static void ClKernel_dealloc(ClKernelObject *self)
{
    Py_XDECREF(self->state);
    Py_XDECREF(self->states);
    Py_XDECREF(self->index);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* 1: the back-end's current state of the device is this kernel's; 0: stale; -1: error. */
static int kernel_current(ClKernelObject *k)
{
    PyObject *now = PyDict_GetItemWithError(k->states, k->index);
    if (now == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return now == k->state;
}

static PyObject *ClKernel_stale(ClKernelObject *self, PyObject *Py_UNUSED(ignored))
{
    int r = kernel_current(self);
    return r < 0 ? NULL : PyBool_FromLong(!r);
}

static PyMethodDef ClKernel_methods[] = {
    {"stale", (PyCFunction)ClKernel_stale, METH_NOARGS,
     "Whether the device was reset since this kernel was made (then it is never launched)."},
    {NULL}};

PyTypeObject ga_ClKernelType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.ClKernel",
    .tp_doc = "ClKernel(kernel, queue, set_arg, set_svm, enqueue, flush, types, state, states, "
              "index): a cl_kernel the compiled launches own (see launch.c); the addresses are "
              "the cl_kernel, the cl_command_queue and clSetKernelArg, "
              "clSetKernelArgSVMPointer, clEnqueueNDRangeKernel, clFlush (0: none).  It is "
              "stale once states[index] is no longer state.  Never releases the cl_kernel: its "
              "back-end does.",
    .tp_basicsize = sizeof(ClKernelObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = ClKernel_new,
    .tp_dealloc = (destructor)ClKernel_dealloc,
    .tp_methods = ClKernel_methods,
};

/* ---------------------------------------------------------------- Launch */

enum { SRC_OUT, SRC_ARRAY, SRC_REAL, SRC_IMAG, SRC_CONST };

typedef struct {
    char what;        /* SRC_* */
    char operand;     /* SRC_ARRAY, SRC_REAL, SRC_IMAG: which operand */
    uint64_t bits;    /* SRC_CONST: the value's bits */
} Source;

typedef struct {
    PyObject_HEAD
    ClKernelObject *kernel;
    ClKernelObject *rest; /* NULL, or the bounds-checked kernel of one more group from gsize */
    size_t gsize, lsize;
    int nargs;
    Source src[MAX_PARAMS];
} LaunchObject;

/* The bits of `x` as the C type `t`; 1 when x does not convert exactly (the Python path
 * then converts it), -1 on error.  Only exact bool/int/float/complex objects: nothing
 * here runs Python code. */
static int to_bits(PyObject *x, char t, int imag, uint64_t *bits)
{
    PyTypeObject *tp = Py_TYPE(x);
    if (t == 'f' || t == 'd') {
        double v;
        if (tp == &PyComplex_Type) {
            Py_complex z = PyComplex_AsCComplex(x);
            v = imag ? z.imag : z.real;
        } else if (imag) {
            v = 0.0;
        } else if (tp == &PyFloat_Type) {
            v = PyFloat_AS_DOUBLE(x);
        } else if (tp == &PyLong_Type || tp == &PyBool_Type) {
            int overflow;
            long long i = PyLong_AsLongLongAndOverflow(x, &overflow);
            /* beyond 2**53 a double rounds first and a float would round twice */
            if (overflow || i > (1LL << 53) || i < -(1LL << 53))
                return 1;
            v = (double)i;
        } else {
            return 1;
        }
        if (t == 'f') {
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            *bits = u;
        } else {
            memcpy(bits, &v, 8);
        }
        return 0;
    }
    if (imag)
        return 1;
    if (t == '?') {
        if (tp != &PyBool_Type && tp != &PyLong_Type)
            return 1;
        int r = PyObject_IsTrue(x);
        if (r < 0)
            return -1;
        *bits = (uint64_t)r;
        return 0;
    }
    if (tp != &PyLong_Type && tp != &PyBool_Type)
        return 1;
    int overflow;
    long long i = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow > 0 && t == 'Q') {
        unsigned long long u = PyLong_AsUnsignedLongLong(x);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        *bits = u;
        return 0;
    }
    if (overflow)
        return 1;
    if (i == -1 && PyErr_Occurred())
        return -1;
    *bits = (uint64_t)i; /* the low bytes are the C type's value: the limits were checked */
    return 0;
}

static PyObject *Launch_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"kernel", "gsize", "lsize", "sources", "rest", NULL};
    PyObject *kernel, *sources, *rest = Py_None;
    Py_ssize_t gsize, lsize;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!nnO!|O:Launch", names, &ga_ClKernelType,
                                     &kernel, &gsize, &lsize, &PyTuple_Type, &sources, &rest))
        return NULL;
    ClKernelObject *k = (ClKernelObject *)kernel;
    if (rest != Py_None && (!Py_IS_TYPE(rest, &ga_ClKernelType) || lsize == 0
                            || ((ClKernelObject *)rest)->nparams != k->nparams
                            || memcmp(((ClKernelObject *)rest)->types, k->types,
                                      (size_t)k->nparams) != 0)) {
        PyErr_SetString(PyExc_ValueError, "Launch: rest must be None or a ClKernel of the "
                        "kernel's parameter types, with a nonzero local size");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(sources);
    if (gsize <= 0 || lsize < 0 || (lsize && gsize % lsize)) {
        PyErr_Format(PyExc_ValueError, "Launch: global size %zd is not a positive multiple of "
                     "the local size %zd", gsize, lsize);
        return NULL;
    }
    if (n != k->nparams) {
        PyErr_Format(PyExc_ValueError, "Launch: %zd sources for a kernel of %d parameters", n,
                     k->nparams);
        return NULL;
    }
    LaunchObject *l = (LaunchObject *)type->tp_alloc(type, 0);
    if (l == NULL)
        return NULL;
    l->kernel = (ClKernelObject *)Py_NewRef(kernel);
    l->rest = rest == Py_None ? NULL : (ClKernelObject *)Py_NewRef(rest);
    l->gsize = (size_t)gsize;
    l->lsize = (size_t)lsize;
    l->nargs = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyTuple_GET_ITEM(sources, i);
        int what;
        PyObject *value;
        if (!PyTuple_Check(s) || !PyArg_ParseTuple(s, "iO", &what, &value)
                || what < SRC_OUT || what > SRC_CONST) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "Launch: source %zd must be (0..4, value), got %R",
                         i, s);
            goto fail;
        }
        Source *src = &l->src[i];
        src->what = (char)what;
        char t = k->types[i];
        if ((what == SRC_OUT || what == SRC_ARRAY) != (t == 'p')) {
            PyErr_Format(PyExc_ValueError, "Launch: source %zd (%d) does not suit parameter "
                         "type '%c'", i, what, t);
            goto fail;
        }
        if (what == SRC_CONST) {
            int r = to_bits(value, t, 0, &src->bits);
            if (r != 0) {
                if (r > 0)
                    PyErr_Format(PyExc_ValueError, "Launch: constant %R does not convert to "
                                 "'%c'", value, t);
                goto fail;
            }
        } else if (what != SRC_OUT) {
            long op = PyLong_AsLong(value);
            if (op < 0 || op >= MAX_OPERANDS) {
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "Launch: operand %R out of range", value);
                goto fail;
            }
            src->operand = (char)op;
        }
    }
    return (PyObject *)l;
fail:
    Py_DECREF(l);
    return NULL;
}

static void Launch_dealloc(LaunchObject *self)
{
    Py_XDECREF(self->kernel);
    Py_XDECREF(self->rest);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject ga_LaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Launch",
    .tp_doc = "Launch(kernel, gsize, lsize, sources, rest=None): one layout's compiled launch "
              "of a ClKernel; sources[i] is (0, None) the result's address, (1, k) operand k's "
              "address, (2, k) / (3, k) the real / imaginary part of scalar operand k, or "
              "(4, value) a constant.  rest: a ClKernel of the same parameters launched after "
              "it with the same values for one group of lsize items from index gsize (the "
              "bounds-checked last group of a split launch, launcher._shaped_plan).",
    .tp_basicsize = sizeof(LaunchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Launch_new,
    .tp_dealloc = (destructor)Launch_dealloc,
};

/* Set the arguments of `k` whose bits changed; 0, or 1 after an OpenCL error (everything
 * is set again next time). */
static int set_args(ClKernelObject *k, int nargs, const uint64_t *bits)
{
    for (int i = 0; i < nargs; i++) {
        if (k->set[i] && k->last[i] == bits[i])
            continue;
        char t = k->types[i];
        int32_t code = t == 'p' ? k->set_svm(k->kernel, (uint32_t)i, (void *)(uintptr_t)bits[i])
                                : k->set_arg(k->kernel, (uint32_t)i, type_size(t), &bits[i]);
        if (code != 0) {
            memset(k->set, 0, sizeof(k->set));
            return 1;
        }
        k->last[i] = bits[i];
        k->set[i] = 1;
    }
    return 0;
}

/* gpuarrays.BackendError for the failed enqueue of a split launch's last group. */
static void rest_failed(int32_t code)
{
    PyObject *mod = PyImport_ImportModule("gpuarrays._common.errors");
    PyObject *cls = mod == NULL ? NULL : PyObject_GetAttrString(mod, "BackendError");
    Py_XDECREF(mod);
    if (cls == NULL)
        return;
    PyErr_Format(cls, "clEnqueueNDRangeKernel failed (OpenCL error %d) for the last work-group "
                 "of an elementwise launch whose other groups were enqueued; the result is "
                 "incomplete: synchronize, check the device (gpuarrays info) and run again",
                 (int)code);
    Py_DECREF(cls);
}

/* Set what changed and enqueue.  0: launched; 1: the Python engine must run it (stale
 * kernel, a value that does not convert, an OpenCL error); 2: stale (drop the launch);
 * -1: error. */
static int launch_run(LaunchObject *l, size_t out, const size_t *addr, PyObject *const *xs)
{
    ClKernelObject *k = l->kernel;
    if (ga_in_stream())
        return 1; /* this thread is inside a stream: Python enqueues on the current one */
    int current = kernel_current(k);
    if (current > 0 && l->rest != NULL)
        current = kernel_current(l->rest);
    if (current <= 0)
        return current < 0 ? -1 : 2;
    uint64_t bits[MAX_PARAMS];
    for (int i = 0; i < l->nargs; i++) {
        Source *s = &l->src[i];
        switch (s->what) {
        case SRC_OUT: bits[i] = out; break;
        case SRC_ARRAY: bits[i] = addr[(int)s->operand]; break;
        case SRC_CONST: bits[i] = s->bits; break;
        default: {
            int r = to_bits(xs[(int)s->operand], k->types[i], s->what == SRC_IMAG, &bits[i]);
            if (r != 0)
                return r;
        }
        }
    }
    if (set_args(k, l->nargs, bits) != 0 || (l->rest != NULL
                                               && set_args(l->rest, l->nargs, bits) != 0))
        return 1;
    size_t g = l->gsize, lo = l->lsize;
    if (k->enqueue(k->queue, k->kernel, 1, NULL, &g, lo ? &lo : NULL, 0, NULL, NULL) != 0)
        return 1;
    if (l->rest != NULL) {
        /* the last group, from index gsize; the first part is enqueued already, so running
           the whole launch again from Python is no remedy (an in-place operation would
           apply twice): a failure here is the platform's */
        int32_t code = l->rest->enqueue(l->rest->queue, l->rest->kernel, 1, &g, &lo, &lo, 0,
                                        NULL, NULL);
        if (code != 0) {
            rest_failed(code);
            return -1;
        }
    }
    if (k->flush != NULL)
        k->flush(k->queue);
    launches++;
    return 0;
}

/* ---------------------------------------------------------------- DeviceEngine */

#define LAYOUTS 4 /* layouts an engine remembers, most recent first */

typedef struct {
    PyObject *shape;                     /* the result's; NULL: an empty entry */
    PyObject *shapes[MAX_OPERANDS];      /* each array operand's (broadcasting) */
    PyObject *strides[MAX_OPERANDS + 1]; /* the result's, then each array operand's */
    unsigned char align[MAX_OPERANDS + 1];
    int narrays;
    PyObject *launch; /* a Launch, or None: the Python engine runs this layout */
} Layout;

typedef struct {
    PyObject_HEAD
    PyObject *fallback, *make;
    Layout layouts[LAYOUTS];
} DeviceEngineObject;

static void layout_clear(Layout *y)
{
    PyObject *old[2 * MAX_OPERANDS + 3] = {y->shape, y->launch};
    for (int i = 0; i <= MAX_OPERANDS; i++) {
        old[2 + i] = y->strides[i];
        y->strides[i] = NULL;
    }
    for (int i = 0; i < MAX_OPERANDS; i++) {
        old[3 + MAX_OPERANDS + i] = y->shapes[i];
        y->shapes[i] = NULL;
    }
    y->shape = y->launch = NULL;
    y->narrays = 0;
    for (int i = 0; i < 2 * MAX_OPERANDS + 3; i++)
        Py_XDECREF(old[i]);
}

static PyObject *DeviceEngine_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"fallback", "make", NULL};
    PyObject *fallback, *make;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:DeviceEngine", names, &fallback, &make))
        return NULL;
    if (!PyCallable_Check(fallback) || !PyCallable_Check(make)) {
        PyErr_SetString(PyExc_TypeError, "DeviceEngine(fallback, make): both must be callable");
        return NULL;
    }
    DeviceEngineObject *e = (DeviceEngineObject *)type->tp_alloc(type, 0);
    if (e == NULL)
        return NULL;
    e->fallback = Py_NewRef(fallback);
    e->make = Py_NewRef(make);
    return (PyObject *)e;
}

static void DeviceEngine_dealloc(DeviceEngineObject *self)
{
    for (int i = 0; i < LAYOUTS; i++)
        layout_clear(&self->layouts[i]);
    Py_XDECREF(self->fallback);
    Py_XDECREF(self->make);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *DeviceEngine_call(DeviceEngineObject *self, PyObject *args, PyObject *kw)
{
    return PyObject_Call(self->fallback, args, kw);
}

static PyObject *DeviceEngine_layouts(DeviceEngineObject *self, PyObject *Py_UNUSED(ignored))
{
    int n = 0, fast = 0;
    for (int i = 0; i < LAYOUTS; i++) {
        n += self->layouts[i].shape != NULL;
        fast += self->layouts[i].launch != NULL && self->layouts[i].launch != Py_None;
    }
    return Py_BuildValue("ii", n, fast);
}

static PyMethodDef DeviceEngine_methods[] = {
    {"layouts", (PyCFunction)DeviceEngine_layouts, METH_NOARGS,
     "(layouts remembered, of which compiled launches) (tests)."},
    {NULL}};

PyTypeObject ga_DeviceEngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.DeviceEngine",
    .tp_doc = "DeviceEngine(fallback, make): a plan's device engine (see launch.c); calling it "
              "calls fallback(result, args, given); apply() launches the layouts for which "
              "make(result, args) gave a Launch from C.",
    .tp_basicsize = sizeof(DeviceEngineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = DeviceEngine_new,
    .tp_dealloc = (destructor)DeviceEngine_dealloc,
    .tp_call = (ternaryfunc)DeviceEngine_call,
    .tp_methods = DeviceEngine_methods,
};

int ga_device_engine_check(PyObject *engine)
{
    return Py_IS_TYPE(engine, &ga_DeviceEngineType);
}

PyObject *ga_device_engine_fallback(PyObject *engine)
{
    return ((DeviceEngineObject *)engine)->fallback;
}

/* 1: the storages' memory ranges overlap (or cannot be read); 0: they are apart. */
static int storages_overlap(StorageObject *a, StorageObject *b)
{
    size_t pa = PyLong_AsSize_t(a->ptr), na = PyLong_AsSize_t(a->nbytes);
    size_t pb = PyLong_AsSize_t(b->ptr), nb = PyLong_AsSize_t(b->nbytes);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 1;
    }
    return pa < pb + (nb ? nb : 1) && pb < pa + (na ? na : 1);
}

/* Whether a given output may be written while the operands are read, element by element:
 * every array operand is exactly the output's view or lies in memory apart from it
 * (NumPy's semantics otherwise need the Python engine's temporary). */
static int output_apart(ArrayObject *out, PyObject *const *xs, int n)
{
    for (int i = 0; i < n; i++) {
        if (!ga_is_array(xs[i]))
            continue;
        ArrayObject *x = (ArrayObject *)xs[i];
        if (x->storage != out->storage) {
            if (storages_overlap(x->storage, out->storage))
                return 0;
            continue;
        }
        if (x->dtype != out->dtype || !ga_same_ints(x->shape, out->shape)
                || !ga_same_ints(x->strides, out->strides))
            return 0;
        int same = PyObject_RichCompareBool(x->offset, out->offset, Py_EQ);
        if (same != 1) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* Run op into `result` (of the shape the operands broadcast to; `given`: the caller's
 * output) from C if this layout has a launch.  0: launched; 1: the caller runs the fallback; -1: error. */
int ga_device_engine_run(PyObject *engine, PyObject *result, PyObject *const *xs, int n,
                         PyObject *tuple, int given)
{
    DeviceEngineObject *e = (DeviceEngineObject *)engine;
    if (given && !output_apart((ArrayObject *)result, xs, n))
        return 1;
    ArrayObject *arrays[MAX_OPERANDS + 1] = {(ArrayObject *)result};
    size_t at[MAX_OPERANDS + 1], addr[MAX_OPERANDS] = {0};
    int na = 1;
    if (n > MAX_OPERANDS || ga_array_address(arrays[0], &at[0]) < 0)
        return n > MAX_OPERANDS ? 1 : -1;
    for (int i = 0; i < n; i++) {
        PyObject *x = xs[i];
        if (ga_is_array(x)) {
            arrays[na] = (ArrayObject *)x;
            if (ga_array_address(arrays[na], &at[na]) < 0)
                return -1;
            addr[i] = at[na];
            na++;
        }
    }
    for (int tries = 0; tries < 2; tries++) {
        Layout *found = NULL;
        int slot = 0;
        for (; slot < LAYOUTS; slot++) {
            Layout *y = &e->layouts[slot];
            if (y->shape == NULL || y->narrays != na
                    || !ga_same_ints(y->shape, arrays[0]->shape))
                continue;
            int j = 0;
            while (j < na && y->align[j] == (at[j] & 15)
                   && ga_same_ints(y->strides[j], arrays[j]->strides)
                   && (j == 0 || ga_same_ints(y->shapes[j - 1], arrays[j]->shape)))
                j++;
            if (j == na) {
                found = y;
                break;
            }
        }
        if (found == NULL) { /* ask Python; the answer goes first, the oldest goes */
            PyObject *args = tuple != NULL ? Py_NewRef(tuple) : PyTuple_New(n);
            if (args == NULL)
                return -1;
            if (tuple == NULL)
                for (int i = 0; i < n; i++)
                    PyTuple_SET_ITEM(args, i, Py_NewRef(xs[i]));
            PyObject *made = PyObject_CallFunctionObjArgs(e->make, result, args, NULL);
            Py_DECREF(args);
            if (made == NULL)
                return -1;
            if (made != Py_None && !Py_IS_TYPE(made, &ga_LaunchType)) {
                Py_DECREF(made);
                PyErr_SetString(PyExc_TypeError, "a DeviceEngine's make() must return a "
                                "Launch or None");
                return -1;
            }
            layout_clear(&e->layouts[LAYOUTS - 1]);
            memmove(&e->layouts[1], &e->layouts[0], sizeof(Layout) * (LAYOUTS - 1));
            found = &e->layouts[0];
            found->shape = Py_NewRef(arrays[0]->shape);
            for (int j = 0; j <= MAX_OPERANDS; j++) {
                found->strides[j] = j < na ? Py_NewRef(arrays[j]->strides) : NULL;
                found->align[j] = j < na ? (unsigned char)(at[j] & 15) : 0;
                if (j > 0)
                    found->shapes[j - 1] = j < na ? Py_NewRef(arrays[j]->shape) : NULL;
            }
            found->narrays = na;
            found->launch = made;
        } else if (slot > 0) { /* most recent first */
            Layout y = *found;
            memmove(&e->layouts[1], &e->layouts[0], sizeof(Layout) * slot);
            e->layouts[0] = y;
            found = &e->layouts[0];
        }
        if (found->launch == Py_None)
            return 1;
        int r = launch_run((LaunchObject *)found->launch, at[0], addr, xs);
        if (r != 2)
            return r;
        layout_clear(found); /* the device was reset: make it again, once */
    }
    return 1;
}

static PyObject *core_launches(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(launches);
}

static PyMethodDef launch_functions[] = {
    {"launches", core_launches, METH_NOARGS,
     "How many elementwise kernels were enqueued from C (tests)."},
    {NULL}};

int ga_launch_init(PyObject *m)
{
    PyTypeObject *types[] = {&ga_ClKernelType, &ga_LaunchType, &ga_DeviceEngineType};
    const char *names[] = {"ClKernel", "Launch", "DeviceEngine"};
    for (size_t i = 0; i < 3; i++) {
        if (PyType_Ready(types[i]) < 0
                || PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            return -1;
    }
    return PyModule_AddFunctions(m, launch_functions);
}
