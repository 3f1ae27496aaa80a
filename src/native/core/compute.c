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

typedef struct {
    PyObject *device; /* NULL: an empty entry */
    PyObject *keys[MAX_IN];
    PyObject *dtype, *limits, *engine, *gate;
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
    PyObject *old[5 + MAX_IN] = {t->device, t->dtype, t->limits, t->engine, t->gate};
    for (int i = 0; i < MAX_IN; i++) {
        old[5 + i] = t->keys[i];
        t->keys[i] = NULL;
    }
    t->device = t->dtype = t->limits = t->engine = t->gate = NULL;
    for (int i = 0; i < 5 + MAX_IN; i++)
        Py_XDECREF(old[i]);
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

static PyMethodDef Plan_methods[] = {
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
    if (!PyTuple_CheckExact(r) || PyTuple_GET_SIZE(r) != 4
            || !PyTuple_CheckExact(PyTuple_GET_ITEM(r, 1))
            || ga_gate_check(PyTuple_GET_ITEM(r, 3)) < 0) {
        Py_DECREF(r);
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError,
                        "a plan's typer must return (dtype, limits tuple, engine, gate)");
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
             *gate = Py_NewRef(t->gate);
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
        if (engine == Py_None) {
            rc = run_cpu(p, result, xs);
        } else {
            /* a compiled launch (launch.c) where it has one, else the Python engine */
            PyObject *fn = engine;
            rc = 1;
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
    if ((str_out = PyUnicode_InternFromString("out")) == NULL
            || (str_quiet_key = PyUnicode_InternFromString("gpuarrays._core.quiet")) == NULL
            || (kwnames_out = PyTuple_Pack(1, str_out)) == NULL)
        return -1;
    return PyModule_AddFunctions(m, compute_functions);
}
