/* compute.c -- the elementwise hot path: _core.apply(op, args, out=None), the
 * plans it runs (_core.Plan, one per operation) and the cpu engine's NumPy views
 * (_core.host_view).  docs/compute.md, "How an operation runs", and
 * docs/performance.md, "The elementwise host path".
 *
 * apply() runs the common case here and hands everything else to the Python
 * dispatch (dispatch.apply_slow), which checks and raises: so every refusal, and
 * its message, is the Python path's, and the fast path only has to recognise
 * what it may run.  The fast path takes operands that are live gpuarrays arrays
 * on one device (by identity) whose shapes broadcast, and Python
 * bool/int/float/complex scalars, and an `out` that is live, writeable, on that
 * device, of the broadcast shape and of exactly the result dtype.  Anything else
 * -- shapes that do not broadcast, NumPy scalars, other devices, a freed array,
 * an int the limits refuse, an unexpected dtype -- goes to the slow path before
 * anything is allocated.
 *
 * A plan remembers, per (device, operand dtypes or scalar types), what its typer
 * (Python: promotion and the device's dtype checks) answered: the result dtype,
 * the bounds of Python int operands, the device engine (None: the cpu engine
 * below) and the device's usage gate.  Keys are compared by identity, so an
 * equal but distinct dtype object only costs a typer call.
 *
 * The cpu engine: NumPy's ufunc (or the plan's fn(z, *xs)) on views of the raw
 * memory, writing into the result through out=, with NumPy's floating-point
 * errors ignored for the call (device kernels cannot warn; see quiet_context()).
 * Views come from a direct-mapped table keyed by (address, shape, strides,
 * dtype); a view only describes an address range and is used only while a live
 * array covers it, so an entry left behind by freed memory is harmless.  A miss
 * calls cpu_engine.make_view.
 *
 * The array's operators (_core.binary, reflected, inplace, unary: the hooks of
 * _array/hooks.py) go straight to apply() for arrays and Python scalars, and to
 * operators.py for any other operand.
 *
 * Device engines: a plan's typing on an OpenCL device holds a DeviceEngine
 * (launch.c), which enqueues the kernel of a known layout from C; an `out` that
 * overlaps an operand other than exactly, and every layout it has no compiled launch
 * for, go to its Python engine.
 *
 * May call: alloc.c (ga_core_new_array), array.c (ga_array_free), gate.c, working.c,
 * launch.c.
 */
#include "core.h"

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#else
#include <fenv.h>
#endif
#include <stdint.h>
#include <string.h>


/* ---------------------------------------------------------------- host views */

#define VIEW_SLOTS 4096 /* a power of two */

typedef struct {
    size_t addr;
    PyObject *shape, *strides, *dtype, *view;
} ViewSlot;

static ViewSlot views[VIEW_SLOTS];

/* The address of a's first element (its storage's address plus its offset). */
int ga_array_address(ArrayObject *a, size_t *addr)
{
    size_t p = PyLong_AsSize_t(a->storage->ptr);
    if (p == (size_t)-1 && PyErr_Occurred())
        return -1;
    Py_ssize_t off = PyLong_AsSsize_t(a->offset);
    if (off == -1 && PyErr_Occurred())
        return -1;
    *addr = p + (size_t)off;
    return 0;
}

/* Whether two tuples of ints are equal (no error: anything odd is "not equal"). */
int ga_same_ints(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (!PyTuple_CheckExact(a) || !PyTuple_CheckExact(b))
        return 0;
    Py_ssize_t n = PyTuple_GET_SIZE(a);
    if (n != PyTuple_GET_SIZE(b))
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(a, i), *y = PyTuple_GET_ITEM(b, i);
        if (x == y)
            continue;
        int r = PyObject_RichCompareBool(x, y, Py_EQ);
        if (r != 1) {
            if (r < 0)
                PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* A NumPy array over a's memory (a live, on the cpu back-end): new reference. */
static PyObject *host_view(ArrayObject *a)
{
    size_t addr;
    if (ga_array_address(a, &addr) < 0)
        return NULL;
    size_t h = (addr >> 4) ^ (addr >> 16) ^ ((size_t)a->dtype >> 4);
    ViewSlot *s = &views[(h + (size_t)PyTuple_GET_SIZE(a->shape)) & (VIEW_SLOTS - 1)];
    if (s->view != NULL && s->addr == addr && s->dtype == a->dtype
            && ga_same_ints(s->shape, a->shape) && ga_same_ints(s->strides, a->strides))
        return Py_NewRef(s->view);
    if (ga_make_view == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the cpu engine is not configured (make_view)");
        return NULL;
    }
    PyObject *at = PyLong_FromSize_t(addr);
    if (at == NULL)
        return NULL;
    PyObject *v = PyObject_CallFunctionObjArgs(ga_make_view, at, a->shape, a->strides,
                                               a->dtype, NULL);
    Py_DECREF(at);
    if (v == NULL)
        return NULL;
    /* take the old entry out first: its release runs no code of ours, but stay tidy */
    PyObject *old[4] = {s->shape, s->strides, s->dtype, s->view};
    s->addr = addr;
    s->shape = Py_NewRef(a->shape);
    s->strides = Py_NewRef(a->strides);
    s->dtype = Py_NewRef(a->dtype);
    s->view = Py_NewRef(v);
    for (int i = 0; i < 4; i++)
        Py_XDECREF(old[i]);
    return v;
}

PyObject *ga_core_host_view(PyObject *mod, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &ga_ArrayType)) {
        PyErr_Format(PyExc_TypeError, "host_view() needs a gpuarrays array, got %.200s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    return host_view((ArrayObject *)arg);
}

static PyObject *core_clear_views(PyObject *mod, PyObject *Py_UNUSED(ignored))
{
    for (size_t i = 0; i < VIEW_SLOTS; i++) {
        ViewSlot *s = &views[i];
        PyObject *old[4] = {s->shape, s->strides, s->dtype, s->view};
        s->shape = s->strides = s->dtype = s->view = NULL;
        s->addr = 0;
        for (int k = 0; k < 4; k++)
            Py_XDECREF(old[k]);
    }
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------- plans */

#define MAX_IN 3 /* operands of the widest operation (where, clip) */
#define MEMO 8   /* typings a plan remembers */

/* NumPy's own strided loop for one typing (cpu_engine.direct_loop): the capsule of
 * ufunc._resolve_dtypes_and_context, filled by ufunc._get_strided_loop, is NumPy's
 * documented "numpy_1.24_ufunc_call_info" struct; its loop returns 0, or -1 with an
 * exception. */
typedef int (*StridedLoop)(void *context, char *const *data, const Py_ssize_t *dims,
                           const Py_ssize_t *strides, void *auxdata);

typedef struct {
    StridedLoop loop;
    void *context;
    void *auxdata;
    unsigned char requires_pyapi, no_floatingpoint_errors; /* npy_bool */
} UfuncCallInfo;

#define CALL_INFO_NAME "numpy_1.24_ufunc_call_info"

typedef struct {
    StridedLoop loop; /* NULL: call the ufunc */
    void *context, *auxdata;
    char fpe;                       /* the loop may set floating-point flags */
    char finite_only;               /* run only when every operand is finite (a standard fix
                                     * that only differs from NumPy at infinities and NaN) */
    Py_ssize_t itemsize[MAX_IN + 1]; /* the operands', then the result's */
    char pack[MAX_IN];              /* 0: an array operand; else a scalar's kind (b i u f c) */
    char complex_[MAX_IN];          /* an array operand of a complex dtype */
} DirectLoop;

typedef struct {
    PyObject *device; /* NULL: an empty entry */
    PyObject *keys[MAX_IN];
    PyObject *dtype, *limits, *engine, *gate;
    PyObject *direct_info; /* what keeps direct's loop alive (NULL: none) */
    DirectLoop direct;
} Typing;

/* How a plan calls its fn with the output view z and the operands xs. */
enum { CALL_POSITIONAL, /* fn(*xs, z): a ufunc (NumPy parses a positional out fastest) */
       CALL_OUT_FIRST,  /* fn(z, *xs): the cpu engine's own kernels */
       CALL_KEYWORD };  /* fn(*xs, out=z): ufuncs that deprecate a positional out */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *typer; /* typer(keys, device) -> (dtype, limits, engine, gate) */
    int nin, mode, next;
    Typing memo[MEMO];
} PlanObject;

static PyObject *str_out, *kwnames_out;

static void typing_clear(Typing *t)
{
    PyObject *old[6 + MAX_IN] = {t->device, t->dtype, t->limits, t->engine, t->gate,
                                 t->direct_info};
    for (int i = 0; i < MAX_IN; i++) {
        old[6 + i] = t->keys[i];
        t->keys[i] = NULL;
    }
    t->device = t->dtype = t->limits = t->engine = t->gate = t->direct_info = NULL;
    memset(&t->direct, 0, sizeof t->direct);
    for (int i = 0; i < 6 + MAX_IN; i++)
        Py_XDECREF(old[i]);
}

/* The direct loop a typer described ((call_info, itemsizes, packs[, finite_only]), see
 * cpu_engine.direct_loop), or none (d->loop NULL) for None or anything else: a NumPy
 * whose capsule is not the documented one is simply called through its ufunc. */
static void direct_parse(PyObject *desc, int nin, DirectLoop *d)
{
    memset(d, 0, sizeof *d);
    if (!PyTuple_CheckExact(desc) || PyTuple_GET_SIZE(desc) < 3 || PyTuple_GET_SIZE(desc) > 4)
        return;
    int finite_only = PyTuple_GET_SIZE(desc) == 4 && PyObject_IsTrue(PyTuple_GET_ITEM(desc, 3)) == 1;
    PyObject *cap = PyTuple_GET_ITEM(desc, 0), *sizes = PyTuple_GET_ITEM(desc, 1),
             *packs = PyTuple_GET_ITEM(desc, 2);
    if (!PyCapsule_IsValid(cap, CALL_INFO_NAME) || !PyTuple_CheckExact(sizes)
            || PyTuple_GET_SIZE(sizes) != nin + 1 || !PyTuple_CheckExact(packs)
            || PyTuple_GET_SIZE(packs) != nin)
        return;
    UfuncCallInfo *info = PyCapsule_GetPointer(cap, CALL_INFO_NAME);
    if (info == NULL || info->loop == NULL || info->requires_pyapi) {
        PyErr_Clear();
        return;
    }
    for (int k = 0; k <= nin; k++) {
        Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(sizes, k));
        if (size <= 0 || size > 16) {
            PyErr_Clear();
            return;
        }
        d->itemsize[k] = size;
    }
    for (int k = 0; k < nin; k++) {
        const char *p = PyUnicode_Check(PyTuple_GET_ITEM(packs, k))
                            ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(packs, k)) : NULL;
        if (p == NULL || p[0] == 0 || (p[0] != '-' && strchr("biufc", p[0]) == NULL)) {
            PyErr_Clear();
            return;
        }
        d->pack[k] = p[0] == '-' ? 0 : p[0];
        d->complex_[k] = p[0] == '-' && p[1] == 'c';
    }
    d->context = info->context;
    d->auxdata = info->auxdata;
    d->fpe = !info->no_floatingpoint_errors;
    d->finite_only = (char)finite_only;
    d->loop = info->loop;
}

static PyObject *Plan_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"fn", "nin", "typer", "call", NULL};
    PyObject *fn, *typer;
    const char *call = "positional";
    int nin, mode;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OiO|s:Plan", names, &fn, &nin, &typer, &call))
        return NULL;
    if (strcmp(call, "positional") == 0)
        mode = CALL_POSITIONAL;
    else if (strcmp(call, "out_first") == 0)
        mode = CALL_OUT_FIRST;
    else if (strcmp(call, "keyword") == 0)
        mode = CALL_KEYWORD;
    else {
        PyErr_Format(PyExc_ValueError, "call must be 'positional', 'out_first' or 'keyword', "
                     "not '%s'", call);
        return NULL;
    }
    if (nin < 1 || nin > MAX_IN) {
        PyErr_Format(PyExc_ValueError, "a plan takes 1 to %d operands, not %d", MAX_IN, nin);
        return NULL;
    }
    if (!PyCallable_Check(fn) || !PyCallable_Check(typer)) {
        PyErr_SetString(PyExc_TypeError, "Plan(fn, nin, typer): fn and typer must be callable");
        return NULL;
    }
    PlanObject *p = (PlanObject *)type->tp_alloc(type, 0);
    if (p == NULL)
        return NULL;
    p->fn = Py_NewRef(fn);
    p->typer = Py_NewRef(typer);
    p->nin = nin;
    p->mode = mode;
    return (PyObject *)p;
}

static void Plan_dealloc(PlanObject *self)
{
    for (int i = 0; i < MEMO; i++)
        typing_clear(&self->memo[i]);
    Py_XDECREF(self->fn);
    Py_XDECREF(self->typer);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Plan_forget(PlanObject *self, PyObject *Py_UNUSED(ignored))
{
    for (int i = 0; i < MEMO; i++)
        typing_clear(&self->memo[i]);
    Py_RETURN_NONE;
}

static PyObject *Plan_remembered(PlanObject *self, PyObject *Py_UNUSED(ignored))
{
    int n = 0;
    for (int i = 0; i < MEMO; i++)
        n += self->memo[i].device != NULL;
    return PyLong_FromLong(n);
}

static PyObject *Plan_direct(PlanObject *self, PyObject *Py_UNUSED(ignored))
{
    int n = 0;
    for (int i = 0; i < MEMO; i++)
        n += self->memo[i].device != NULL && self->memo[i].direct.loop != NULL;
    return PyLong_FromLong(n);
}

static PyMethodDef Plan_methods[] = {
    {"direct", (PyCFunction)Plan_direct, METH_NOARGS,
     "How many remembered typings call NumPy's strided loop directly (tests)."},
    {"forget", (PyCFunction)Plan_forget, METH_NOARGS, "Drop every remembered typing."},
    {"remembered", (PyCFunction)Plan_remembered, METH_NOARGS,
     "How many typings the plan remembers (tests)."},
    {NULL}};

PyTypeObject ga_PlanType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Plan",
    .tp_doc = "Plan(fn, nin, typer, call='positional'): how _core.apply runs one elementwise "
              "operation: fn(*xs, z), or fn(z, *xs) ('out_first'), or fn(*xs, out=z) "
              "('keyword') on the cpu engine's views; typer(keys, device) -> (dtype, limits, "
              "engine, gate) on a miss (see compute.c).",
    .tp_basicsize = sizeof(PlanObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Plan_new,
    .tp_dealloc = (destructor)Plan_dealloc,
    .tp_methods = Plan_methods,
};

/* The remembered typing of (device, keys), asking the typer on a miss.  NULL with no
 * error set: the fast path does not apply (the slow path will raise what is wrong). */
static Typing *plan_typing(PlanObject *p, PyObject *device, PyObject **keys)
{
    for (int i = 0; i < MEMO; i++) {
        Typing *t = &p->memo[i];
        if (t->device != device)
            continue;
        int k = 0;
        while (k < p->nin && t->keys[k] == keys[k])
            k++;
        if (k == p->nin)
            return t;
    }
    PyObject *key = PyTuple_New(p->nin);
    if (key == NULL)
        goto refuse;
    for (int k = 0; k < p->nin; k++)
        PyTuple_SET_ITEM(key, k, Py_NewRef(keys[k]));
    PyObject *r = PyObject_CallFunctionObjArgs(p->typer, key, device, NULL);
    Py_DECREF(key);
    if (r == NULL)
        goto refuse;
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) < 4 || PyTuple_GET_SIZE(r) > 5
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(r, 1))
            || ga_gate_check(PyTuple_GET_ITEM(r, 3)) < 0) {
        Py_DECREF(r);
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "a plan's typer must return (dtype, limits tuple, "
                        "engine, gate[, direct loop])");
        return NULL; /* a programming error: raise it */
    }
    Typing *t = &p->memo[p->next];
    p->next = (p->next + 1) % MEMO;
    typing_clear(t);
    t->device = Py_NewRef(device);
    for (int k = 0; k < p->nin; k++)
        t->keys[k] = Py_NewRef(keys[k]);
    t->dtype = Py_NewRef(PyTuple_GET_ITEM(r, 0));
    t->limits = Py_NewRef(PyTuple_GET_ITEM(r, 1));
    t->engine = Py_NewRef(PyTuple_GET_ITEM(r, 2));
    t->gate = Py_NewRef(PyTuple_GET_ITEM(r, 3));
    if (PyTuple_GET_SIZE(r) == 5) { /* the typer gives one for cpu typings only */
        direct_parse(PyTuple_GET_ITEM(r, 4), p->nin, &t->direct);
        if (t->direct.loop != NULL)
            t->direct_info = Py_NewRef(PyTuple_GET_ITEM(r, 4));
    }
    Py_DECREF(r);
    return t;
refuse:
    PyErr_Clear();
    return NULL;
}

/* Whether every Python int operand lies within its bounds ((k, lo, hi) triples). */
static int within_limits(PyObject *limits, PyObject *const *xs)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(limits); i++) {
        PyObject *lim = PyTuple_GET_ITEM(limits, i);
        Py_ssize_t k = PyLong_AsSsize_t(PyTuple_GET_ITEM(lim, 0));
        PyObject *x = xs[k];
        if (PyObject_RichCompareBool(PyTuple_GET_ITEM(lim, 1), x, Py_LE) != 1
                || PyObject_RichCompareBool(x, PyTuple_GET_ITEM(lim, 2), Py_LE) != 1) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

/* The thread's quiet context: a context holding nothing but NumPy's error state
 * "ignore".  A bare ufunc call runs inside it instead of setting the variable in the
 * caller's context: a set and its reset build two HAMT nodes and a token (~0.1 us),
 * entering and leaving a context swap a pointer.  Only NumPy's ufunc machinery runs in
 * it (no Python code: the operands are plain ndarrays), and that reads no other context
 * variable.  It lives in the thread's state dict, so it goes with the thread.  NULL with
 * no error set: use the set and reset instead. */
static PyObject *str_quiet_key;

static PyObject *quiet_context(void)
{
    PyObject *dict = PyThreadState_GetDict(); /* borrowed */
    if (dict == NULL)
        return NULL;
    PyObject *ctx = PyDict_GetItemWithError(dict, str_quiet_key);
    if (ctx != NULL && PyContext_CheckExact(ctx))
        return Py_NewRef(ctx);
    if ((ctx = PyContext_New()) == NULL)
        goto fail;
    if (PyContext_Enter(ctx) < 0)
        goto fail;
    PyObject *token = PyContextVar_Set(ga_errstate_var, ga_errstate_quiet);
    if (PyContext_Exit(ctx) < 0 || token == NULL) {
        Py_XDECREF(token);
        goto fail;
    }
    Py_DECREF(token);
    if (PyDict_SetItem(dict, str_quiet_key, ctx) < 0)
        goto fail;
    return ctx;
fail:
    PyErr_Clear();
    Py_XDECREF(ctx);
    return NULL;
}

/* out[...] = op(*xs) with NumPy on views, floating-point errors ignored. */
static int run_cpu(PlanObject *p, ArrayObject *result, PyObject *const *xs)
{
    PyObject *stack[MAX_IN + 1] = {NULL};
    PyObject *z = host_view(result);
    int rc = -1, n = p->nin;
    if (z == NULL)
        return -1;
    PyObject **operands = p->mode == CALL_OUT_FIRST ? stack + 1 : stack;
    for (int i = 0; i < n; i++) {
        if (ga_is_array(xs[i])) {
            if ((operands[i] = host_view((ArrayObject *)xs[i])) == NULL)
                goto done;
        } else {
            operands[i] = Py_NewRef(xs[i]);
        }
    }
    /* a bare ufunc runs in the quiet context; the cpu engine's own kernels run Python, so
     * they (and a call nested in one, which finds the context entered) set the variable */
    PyObject *quiet = p->mode == CALL_OUT_FIRST ? NULL : quiet_context(), *token = NULL;
    if (quiet != NULL && PyContext_Enter(quiet) < 0) {
        PyErr_Clear();
        Py_CLEAR(quiet);
    }
    if (quiet == NULL && (token = PyContextVar_Set(ga_errstate_var, ga_errstate_quiet)) == NULL)
        goto done;
    PyObject *r;
    if (p->mode == CALL_OUT_FIRST) {
        stack[0] = z;
        r = PyObject_Vectorcall(p->fn, stack, n + 1, NULL);
        stack[0] = NULL;
    } else {
        stack[n] = z;
        r = PyObject_Vectorcall(p->fn, stack, p->mode == CALL_KEYWORD ? n : n + 1,
                                p->mode == CALL_KEYWORD ? kwnames_out : NULL);
        stack[n] = NULL;
    }
    if (quiet != NULL ? PyContext_Exit(quiet) < 0
                      : PyContextVar_Reset(ga_errstate_var, token) < 0) {
        Py_XDECREF(r);
        r = NULL;
    }
    Py_XDECREF(quiet);
    Py_XDECREF(token);
    if (r != NULL) {
        Py_DECREF(r);
        rc = 0;
    }
done:
    for (int i = 0; i <= n; i++)
        Py_XDECREF(stack[i]);
    Py_DECREF(z);
    return rc;
}

/* ---------------------------------------------------------------- direct loops */

/* Elements from which a direct loop runs with the GIL released (a shorter loop takes
 * about as long as the release and the retake). */
#define DIRECT_NOGIL (1 << 13)

/* Clear the floating-point flags a loop may have raised: the engine ignores them (as the
 * ufunc call does in the quiet context), and no later reader should find them. */
static inline void clear_fpe(void)
{
#if defined(__SSE__) || defined(__x86_64__)
    unsigned int csr = _mm_getcsr();
    if (csr & 0x3f)
        _mm_setcsr(csr & ~0x3fu);
#else
    feclearexcept(FE_ALL_EXCEPT);
#endif
}

/* The number of elements of a shape (-1: something odd in it). */
static Py_ssize_t shape_size(PyObject *shape)
{
    Py_ssize_t n = 1;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); d++) {
        Py_ssize_t e = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (e < 0) {
            PyErr_Clear();
            return -1;
        }
        n *= e;
    }
    return n;
}

/* Whether a's elements lie in C order with no gaps (the array's flag when it knows). */
static int c_contiguous(ArrayObject *a, Py_ssize_t itemsize)
{
    if (a->contig == Py_True || a->contig == Py_False)
        return a->contig == Py_True;
    PyObject *shape = a->shape, *strides = a->strides;
    Py_ssize_t nd = PyTuple_GET_SIZE(shape), expect = itemsize;
    if (!PyTuple_CheckExact(strides) || PyTuple_GET_SIZE(strides) != nd)
        return 0;
    for (Py_ssize_t d = nd - 1; d >= 0; d--) {
        Py_ssize_t e = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
        if (e == 1)
            continue;
        if (e <= 0) {
            PyErr_Clear();
            return e == 0;
        }
        if (PyLong_AsSsize_t(PyTuple_GET_ITEM(strides, d)) != expect) {
            PyErr_Clear();
            return 0;
        }
        expect *= e;
    }
    return 1;
}

/* A Python scalar as one element of the loop's operand type (kind b/i/u/f/c, `size`
 * bytes), as NumPy converts a weak scalar; 1: not packable here (call the ufunc). */
static int pack_scalar(PyObject *x, char kind, Py_ssize_t size, void *buf)
{
    if (kind == 'b' && size == 1) {
        int v = PyObject_IsTrue(x);
        *(unsigned char *)buf = (unsigned char)(v > 0);
        return v < 0 ? (PyErr_Clear(), 1) : 0;
    }
    if (kind == 'i' || kind == 'u') {
        long long v = 0;
        unsigned long long u = 0;
        if (kind == 'i')
            u = (unsigned long long)(v = PyLong_AsLongLong(x));
        else
            u = PyLong_AsUnsignedLongLong(x);
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        switch (size) { /* the limits checked the value fits */
        case 1: *(uint8_t *)buf = (uint8_t)u; return 0;
        case 2: *(uint16_t *)buf = (uint16_t)u; return 0;
        case 4: *(uint32_t *)buf = (uint32_t)u; return 0;
        case 8: *(uint64_t *)buf = (uint64_t)u; return 0;
        }
        return 1;
    }
    if (kind == 'f' && (size == 4 || size == 8)) {
        double v = PyFloat_AsDouble(x);
        if (v == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        if (size == 4)
            *(float *)buf = (float)v;
        else
            *(double *)buf = v;
        return 0;
    }
    if (kind == 'c' && (size == 8 || size == 16)) {
        Py_complex v = PyComplex_AsCComplex(x);
        if (v.real == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            return 1;
        }
        if (size == 8) {
            ((float *)buf)[0] = (float)v.real;
            ((float *)buf)[1] = (float)v.imag;
        } else {
            ((double *)buf)[0] = v.real;
            ((double *)buf)[1] = v.imag;
        }
        return 0;
    }
    return 1;
}

/* Whether n floating-point items of `size` bytes (2, 4, 8; a complex item is two) at p, `step`
 * bytes apart, are all finite: no exponent of all ones. */
static int all_finite(const char *p, Py_ssize_t n, Py_ssize_t step, Py_ssize_t size)
{
    int bad = 0;
    if (size == 4) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, p + i * step, 4);
            bad |= (v & 0x7f800000u) == 0x7f800000u;
        }
    } else if (size == 8) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, p + i * step, 8);
            bad |= (v & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
        }
    } else if (size == 2) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + i * step, 2);
            bad |= (v & 0x7c00u) == 0x7c00u;
        }
    } else {
        return 0;
    }
    return !bad;
}

/* all_finite over one operand of the loop: `size`-byte items (real, or complex of two
 * halves) read `step` bytes apart (0: one item). */
static int operand_finite(const char *p, Py_ssize_t n, Py_ssize_t step, Py_ssize_t size,
                          int complex_)
{
    if (step == 0)
        n = 1;
    if (!complex_)
        return all_finite(p, n, step ? step : size, size);
    Py_ssize_t half = size / 2; /* contiguous complex items are 2n contiguous halves */
    if (step == size || n == 1)
        return all_finite(p, 2 * n, half, half);
    return 0;
}

/* result[...] = op(*xs) by NumPy's own strided loop, with no ufunc call around it, when
 * the layout is one run of elements: the result C-contiguous, each array operand
 * C-contiguous of the result's shape or of one element (read with a zero step), scalars
 * packed, every address aligned, and an output given by the caller either apart from
 * each operand or exactly on it.  0: done; 1: not this layout (the ufunc runs it); -1:
 * the loop raised. */
static int run_direct(const DirectLoop *d, int nin, ArrayObject *result, PyObject *const *xs)
{
    _Alignas(16) char scalars[MAX_IN][16];
    char *data[MAX_IN + 1];
    Py_ssize_t steps[MAX_IN + 1];
    Py_ssize_t zsize = d->itemsize[nin], n = shape_size(result->shape);
    size_t zaddr;
    if (n < 0 || !c_contiguous(result, zsize) || ga_array_address(result, &zaddr) < 0) {
        PyErr_Clear();
        return 1;
    }
    if (n == 0)
        return 0;
    if (zaddr % (zsize < 8 ? zsize : 8))
        return 1;
    for (int k = 0; k < nin; k++) {
        Py_ssize_t size = d->itemsize[k];
        if (d->pack[k]) {
            if (ga_is_array(xs[k]) || pack_scalar(xs[k], d->pack[k], size, scalars[k]))
                return 1;
            data[k] = scalars[k];
            steps[k] = 0;
            continue;
        }
        if (!ga_is_array(xs[k]))
            return 1;
        ArrayObject *a = (ArrayObject *)xs[k];
        size_t addr;
        if (ga_array_address(a, &addr) < 0) {
            PyErr_Clear();
            return 1;
        }
        if (ga_same_ints(a->shape, result->shape) && c_contiguous(a, size))
            steps[k] = size;
        else if (shape_size(a->shape) == 1)
            steps[k] = 0;
        else
            return 1;
        if (addr % (size < 8 ? size : 8))
            return 1;
        size_t end = addr + (steps[k] ? (size_t)n * (size_t)size : (size_t)size);
        if (addr < zaddr + (size_t)n * (size_t)zsize && zaddr < end
                && !(addr == zaddr && steps[k] == zsize && size == zsize))
            return 1; /* overlapping the output other than exactly: NumPy copies */
        data[k] = (char *)addr;
    }
    if (d->finite_only) { /* an infinity or NaN anywhere: the standard's fix runs instead */
        for (int k = 0; k < nin; k++)
            if (!operand_finite(data[k], n, steps[k], d->itemsize[k], d->pack[k] == 'c'
                                || (d->pack[k] == 0 && d->complex_[k])))
                return 1;
    }
    data[nin] = (char *)zaddr;
    steps[nin] = zsize;
    Py_ssize_t dims[1] = {n};
    int r;
    if (n >= DIRECT_NOGIL) {
        Py_BEGIN_ALLOW_THREADS
        r = d->loop(d->context, data, dims, steps, d->auxdata);
        Py_END_ALLOW_THREADS
    } else {
        r = d->loop(d->context, data, dims, steps, d->auxdata);
    }
    if (d->fpe)
        clear_fpe();
    if (PyErr_Occurred()) /* a legacy loop raises by setting the error and returning */
        return -1;
    if (r < 0) {
        PyErr_SetString(PyExc_RuntimeError, "NumPy's strided loop failed");
        return -1;
    }
    return 0;
}

static int same_kind(PyObject *a, PyObject *b)
{
    return a == b || (PyUnicode_CheckExact(a) && PyUnicode_CheckExact(b)
                      && PyUnicode_Compare(a, b) == 0);
}

/* `tuple` itself, or a new tuple of the n operands when the caller had none. */
static PyObject *operands_tuple(PyObject *tuple, PyObject *const *xs, Py_ssize_t n)
{
    if (tuple != NULL)
        return Py_NewRef(tuple);
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t != NULL && i < n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(xs[i]));
    return t;
}

static PyObject *apply_plan(PyObject *mod, PlanObject *p, PyObject *op, PyObject *tuple,
                            PyObject *const *xs, Py_ssize_t n, PyObject *out);

/* op(*xs) into out (Py_None: a new array); `tuple` holds xs, or is NULL (the operators). */
static PyObject *apply(PyObject *mod, PyObject *op, PyObject *tuple, PyObject *const *xs,
                       Py_ssize_t n, PyObject *out)
{
    if (ga_plans == NULL || ga_apply_slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the elementwise dispatch is not configured");
        return NULL;
    }
    PyObject *p = PyDict_GetItemWithError(ga_plans, op);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    if (p != NULL && !Py_IS_TYPE(p, &ga_PlanType))
        p = NULL;
    Py_XINCREF(p); /* held: the engine may run Python that changes the plans */
    PyObject *r = apply_plan(mod, (PlanObject *)p, op, tuple, xs, n, out);
    Py_XDECREF(p);
    return r;
}

/* The shape the operands' shapes broadcast to: a new reference (one of theirs when it is
 * one of theirs), or NULL with no error set when they do not broadcast (the slow path
 * raises) or hold something odd. */
static PyObject *broadcast_shape(ArrayObject *const *arrays, int n)
{
    Py_ssize_t ndim = 0;
    for (int i = 0; i < n; i++)
        if (PyTuple_GET_SIZE(arrays[i]->shape) > ndim)
            ndim = PyTuple_GET_SIZE(arrays[i]->shape);
    if (ndim > 64)
        return NULL;
    Py_ssize_t dims[64];
    for (Py_ssize_t d = 0; d < ndim; d++)
        dims[d] = 1;
    for (int i = 0; i < n; i++) {
        PyObject *shape = arrays[i]->shape;
        Py_ssize_t k = PyTuple_GET_SIZE(shape), lead = ndim - k;
        for (Py_ssize_t d = 0; d < k; d++) {
            Py_ssize_t e = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
            if (e < 0) {
                PyErr_Clear();
                return NULL;
            }
            if (e == dims[lead + d] || e == 1)
                continue;
            if (dims[lead + d] != 1)
                return NULL;
            dims[lead + d] = e;
        }
    }
    for (int i = 0; i < n; i++) { /* most often the result has an operand's shape */
        PyObject *shape = arrays[i]->shape;
        if (PyTuple_GET_SIZE(shape) != ndim)
            continue;
        Py_ssize_t d = 0;
        while (d < ndim && PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d)) == dims[d])
            d++;
        if (d == ndim)
            return Py_NewRef(shape);
    }
    PyObject *shape = PyTuple_New(ndim);
    for (Py_ssize_t d = 0; shape != NULL && d < ndim; d++) {
        PyObject *e = PyLong_FromSsize_t(dims[d]);
        if (e == NULL)
            Py_CLEAR(shape);
        else
            PyTuple_SET_ITEM(shape, d, e);
    }
    if (shape == NULL)
        PyErr_Clear();
    return shape;
}

/* apply() with its plan (NULL: none, the Python path). */
static PyObject *apply_plan(PyObject *mod, PlanObject *p, PyObject *op, PyObject *tuple,
                            PyObject *const *xs, Py_ssize_t n, PyObject *out)
{
    if (p == NULL || n != p->nin)
        goto slow;
    PyObject *keys[MAX_IN];
    ArrayObject *first = NULL, *arrays[MAX_IN];
    PyObject *kind = NULL;
    int narrays = 0, broadcast = 0;
    for (int i = 0; i < p->nin; i++) {
        PyObject *x = xs[i];
        if (ga_is_array(x)) {
            ArrayObject *a = (ArrayObject *)x;
            StorageObject *st = a->storage;
            if (a->freed || st->reason != Py_None || !ga_epoch_live(st->epoch))
                goto slow;
            if (first == NULL) {
                first = a;
                kind = st->kind;
            } else {
                if (st->device != first->storage->device)
                    goto slow;
                if (!broadcast && !ga_same_ints(a->shape, first->shape))
                    broadcast = 1;
                if (kind != ga_str_device && !same_kind(kind, st->kind))
                    kind = ga_str_device;
            }
            arrays[narrays++] = a;
            keys[i] = a->dtype;
        } else {
            PyTypeObject *t = Py_TYPE(x);
            if (t != &PyLong_Type && t != &PyFloat_Type && t != &PyBool_Type
                    && t != &PyComplex_Type)
                goto slow;
            keys[i] = (PyObject *)t;
        }
    }
    if (first == NULL)
        goto slow;
    PyObject *device = first->storage->device;
    Typing *t = plan_typing(p, device, keys);
    if (t == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto slow;
    }
    if ((PyTuple_GET_SIZE(t->limits) && !within_limits(t->limits, xs))
            || (t->engine == Py_None && ga_errstate_var == NULL))
        goto slow; /* (no NumPy error state to set: the slow path silences errors itself) */
    PyObject *shape = broadcast ? broadcast_shape(arrays, narrays) : Py_NewRef(first->shape);
    if (shape == NULL)
        goto slow; /* shapes that do not broadcast: the slow path raises */
    /* Own what the run needs: allocating may run Python, and another thread may then
     * replace this memo entry. */
    PyObject *dtype = Py_NewRef(t->dtype), *engine = Py_NewRef(t->engine),
             *gate = Py_NewRef(t->gate), *direct_info = Py_XNewRef(t->direct_info);
    DirectLoop direct = t->direct;
    int given = out != Py_None, rc = -1;
    ArrayObject *result = NULL;
    if (given) {
        result = (ArrayObject *)out;
        if (!ga_is_array(out) || result->freed
                || result->storage->reason != Py_None || !ga_epoch_live(result->storage->epoch)
                || !result->writeable || result->storage->device != device
                || result->dtype != dtype || !ga_same_ints(result->shape, shape)) {
            rc = 1;
            result = NULL;
            goto done;
        }
        Py_INCREF(result);
    } else {
        PyObject *call[4] = {shape, dtype, device, kind};
        if ((result = (ArrayObject *)ga_core_new_array(mod, call, 4)) == NULL)
            goto done;
    }
    if (ga_gate_enter(gate) < 0)
        goto done;
    /* Work in flight holds its memory: a hold on the result's and every operand's storage
     * until the run is over, so a free racing it (forced, a cache's, from another thread
     * while NumPy or a launch runs without the GIL) quarantines the memory instead of
     * handing it to another array (docs/design.md, "Release").  Device work still queued
     * after the run is ordered before any later user of the memory by the device's one
     * in-order queue. */
    StorageObject *held[MAX_IN + 1];
    int nheld = 0;
    held[nheld++] = result->storage;
    for (int i = 0; i < p->nin; i++)
        if (ga_is_array(xs[i]))
            held[nheld++] = ((ArrayObject *)xs[i])->storage;
    /* a free or a reset between the checks above and the holds: the slow path raises */
    rc = ga_work_hold(held, nheld); /* -1: the streams could not be recorded (no memory) */
    for (int i = 0; !rc && i < nheld; i++)
        rc = !ga_work_live(held[i]);
    if (rc == 0) {
        /* NumPy's loop directly where the typing has one and the layout (and, for a
         * standard fix, every operand's finiteness) allows; else the engine */
        rc = direct.loop != NULL ? run_direct(&direct, p->nin, result, xs) : 1;
        if (rc == 1 && engine == Py_None) {
            rc = run_cpu(p, result, xs);
        } else if (rc == 1) {
            /* a compiled launch (launch.c) where it has one, else the Python engine */
            PyObject *fn = engine;
            if (ga_device_engine_check(engine)) {
                rc = ga_device_engine_run(engine, (PyObject *)result, xs, (int)n, tuple, given);
                fn = ga_device_engine_fallback(engine);
            }
            if (rc == 1) {
                PyObject *r = NULL, *args = operands_tuple(tuple, xs, n);
                if (args != NULL)
                    r = PyObject_CallFunctionObjArgs(fn, (PyObject *)result, args,
                                                     given ? Py_True : Py_False, NULL);
                Py_XDECREF(args);
                Py_XDECREF(r);
                rc = r == NULL ? -1 : 0;
            }
        }
    }
    if (ga_work_unhold(held, nheld) < 0)
        rc = -1;
    if (ga_gate_exit(gate) < 0)
        rc = -1;
done:
    Py_DECREF(shape);
    Py_XDECREF(direct_info);
    Py_DECREF(dtype);
    Py_DECREF(engine);
    Py_DECREF(gate);
    if (rc == 0)
        return (PyObject *)result;
    if (result != NULL && !given) {
        /* the result goes back now, even if a traceback keeps the object */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (ga_array_free((PyObject *)result) < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_XDECREF(result);
    if (rc < 0)
        return NULL;
slow:;
    PyObject *args = operands_tuple(tuple, xs, n);
    if (args == NULL)
        return NULL;
    PyObject *call[3] = {op, args, out};
    PyObject *r = PyObject_Vectorcall(ga_apply_slow, call, 3, NULL);
    Py_DECREF(args);
    return r;
}

/* _core.apply(op, args, out=None) */
PyObject *ga_core_apply(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *out = Py_None;
    if (nargs + nkw > 3 || nargs < 2 || (nkw && (nargs == 3 || PyUnicode_Compare(
            PyTuple_GET_ITEM(kwnames, 0), str_out) != 0))) {
        PyErr_SetString(PyExc_TypeError, "apply(op, args, out=None)");
        return NULL;
    }
    if (nargs + nkw == 3)
        out = args[2];
    PyObject *tuple = args[1];
    if (!PyTuple_CheckExact(tuple)) { /* a list or another sequence: the slow path copes */
        if (ga_apply_slow == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "the elementwise dispatch is not configured");
            return NULL;
        }
        PyObject *call[3] = {args[0], tuple, out};
        return PyObject_Vectorcall(ga_apply_slow, call, 3, NULL);
    }
    return apply(mod, args[0], tuple, &PyTuple_GET_ITEM(tuple, 0), PyTuple_GET_SIZE(tuple), out);
}

/* ---------------------------------------------------------------- operators */

/* Whether the operators take `x` without the Python hooks: an array or a plain
 * Python scalar.  Anything else (NumPy scalars, lists, NumPy arrays) goes to
 * operators.py, which decides between a result and NotImplemented. */
static inline int plain_operand(PyObject *x)
{
    PyTypeObject *t = Py_TYPE(x);
    return t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type
           || t == &PyComplex_Type || ga_is_array(x);
}

enum { OP_BINARY, OP_REFLECTED, OP_INPLACE, OP_UNARY };

/* The array's operators: the hooks of _array/hooks.py, compiled for plain operands. */
static PyObject *operate(PyObject *mod, int how, PyObject *const *args, Py_ssize_t nargs)
{
    int nin = how == OP_UNARY ? 1 : 2;
    if (nargs != nin + 1) {
        PyErr_SetString(PyExc_TypeError, nin == 1 ? "unary(name, a)" : "operator(name, a, b)");
        return NULL;
    }
    if (ga_ops == NULL || ga_operators_slow == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the operators are not configured");
        return NULL;
    }
    PyObject *op = NULL;
    if (nin == 1 || plain_operand(args[2])) {
        if ((op = PyDict_GetItemWithError(ga_ops, args[0])) == NULL && PyErr_Occurred())
            return NULL;
    }
    if (op == NULL || !ga_is_array(args[1])
            || (how == OP_INPLACE && !((ArrayObject *)args[1])->writeable)) {
        PyObject *slow = PyTuple_GET_ITEM(ga_operators_slow, how);
        return PyObject_Vectorcall(slow, args, nargs, NULL);
    }
    PyObject *xs[2] = {args[1], nin == 2 ? args[2] : NULL};
    if (how == OP_REFLECTED) {
        xs[0] = args[2];
        xs[1] = args[1];
    }
    return apply(mod, op, NULL, xs, nin, how == OP_INPLACE ? args[1] : Py_None);
}

static PyObject *core_binary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return operate(mod, OP_BINARY, args, nargs);
}

static PyObject *core_reflected(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return operate(mod, OP_REFLECTED, args, nargs);
}

static PyObject *core_inplace(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return operate(mod, OP_INPLACE, args, nargs);
}

static PyObject *core_unary(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    return operate(mod, OP_UNARY, args, nargs);
}

/* ---------------------------------------------------------------- functions */

/* _core.Function(op, fn): a namespace function that is one table row (ga.add, ga.exp ...):
 * called with exactly its operands and no keywords it is apply(op, operands) with no
 * Python frame between the caller and the dispatch; any other call is fn's own (so every
 * error of a wrong call is the Python function's).  Its attributes (name, docstring,
 * __wrapped__ and so the signature) are fn's, set by functools.update_wrapper; it pickles by
 * its qualified name, as a function does. */
typedef struct {
    PyObject_HEAD
    PyObject *op, *fn, *dict;
    Py_ssize_t nin;
    vectorcallfunc vectorcall;
} FunctionObject;

static PyObject *compute_module; /* borrowed: _core lives as long as the process */

static PyObject *Function_vectorcall(FunctionObject *self, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (n != self->nin || (kwnames != NULL && PyTuple_GET_SIZE(kwnames)))
        return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    return apply(compute_module, self->op, NULL, args, n, Py_None);
}

static PyObject *Function_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"op", "fn", "nin", NULL};
    PyObject *op, *fn;
    Py_ssize_t nin;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOn:Function", names, &op, &fn, &nin))
        return NULL;
    if (!PyCallable_Check(fn) || nin < 1 || nin > MAX_IN) {
        PyErr_Format(PyExc_ValueError, "Function(op, fn, nin): fn must be callable and nin "
                     "1 to %d, got nin=%zd", MAX_IN, nin);
        return NULL;
    }
    FunctionObject *self = (FunctionObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->op = Py_NewRef(op);
    self->fn = Py_NewRef(fn);
    self->nin = nin;
    self->vectorcall = (vectorcallfunc)Function_vectorcall;
    return (PyObject *)self;
}

static int Function_traverse(FunctionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->op);
    Py_VISIT(self->fn);
    Py_VISIT(self->dict);
    return 0;
}

static int Function_clear(FunctionObject *self)
{
    Py_CLEAR(self->op);
    Py_CLEAR(self->fn);
    Py_CLEAR(self->dict);
    return 0;
}

static void Function_dealloc(FunctionObject *self)
{
    PyObject_GC_UnTrack(self);
    Function_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Function_reduce(FunctionObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyObject_GetAttrString((PyObject *)self, "__qualname__");
}

static PyObject *Function_repr(FunctionObject *self)
{
    PyObject *name = PyObject_GetAttrString((PyObject *)self, "__qualname__");
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromString("<gpuarrays function>");
    }
    PyObject *r = PyUnicode_FromFormat("<gpuarrays function %S>", name);
    Py_DECREF(name);
    return r;
}

static PyMethodDef Function_methods[] = {
    {"__reduce__", (PyCFunction)Function_reduce, METH_NOARGS, NULL},
    {NULL}};

static PyMemberDef Function_members[] = {
    {"_op", T_OBJECT, offsetof(FunctionObject, op), READONLY, "The table row."},
    {NULL}};

static PyGetSetDef Function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL}};

PyTypeObject ga_FunctionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Function",
    .tp_doc = "Function(op, fn, nin): a namespace function that is one elementwise table row "
              "(see compute.c).",
    .tp_basicsize = sizeof(FunctionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = Function_new,
    .tp_dealloc = (destructor)Function_dealloc,
    .tp_traverse = (traverseproc)Function_traverse,
    .tp_clear = (inquiry)Function_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FunctionObject, vectorcall),
    .tp_dictoffset = offsetof(FunctionObject, dict),
    .tp_repr = (reprfunc)Function_repr,
    .tp_methods = Function_methods,
    .tp_members = Function_members,
    .tp_getset = Function_getset,
};

static PyMethodDef compute_functions[] = {
    {"binary", (PyCFunction)(void (*)(void))core_binary, METH_FASTCALL,
     "binary(name, a, b): a <op> b (the hook of _array/hooks.py)."},
    {"reflected", (PyCFunction)(void (*)(void))core_reflected, METH_FASTCALL,
     "reflected(name, a, b): b <op> a."},
    {"inplace", (PyCFunction)(void (*)(void))core_inplace, METH_FASTCALL,
     "inplace(name, a, b): a <op>= b into a's storage; returns a."},
    {"unary", (PyCFunction)(void (*)(void))core_unary, METH_FASTCALL,
     "unary(name, a): <op> a."},
    {"clear_views", core_clear_views, METH_NOARGS,
     "Drop every remembered cpu view (tests; the table never needs clearing)."},
    {NULL}};

int ga_compute_init(PyObject *m)
{
    compute_module = m;
    if ((str_out = PyUnicode_InternFromString("out")) == NULL
            || (str_quiet_key = PyUnicode_InternFromString("gpuarrays._core.quiet")) == NULL
            || (kwnames_out = PyTuple_Pack(1, str_out)) == NULL)
        return -1;
    return PyModule_AddFunctions(m, compute_functions);
}
