/* fill.c -- creation at allocation speed: Writer, Filler, Uploader (docs/design.md,
 * "Performance"; the figures: docs/performance.md, "Creation").
 *
 *   Writer    how the compiled core writes a device's new memory without Python, made by
 *             the array layer from the back-end's writer_handles():
 *               "host"    the memory is the process's own (the cpu back-end): written in
 *                         place, a memset or a repeated pattern, a memcpy;
 *               "opencl"  clEnqueueSVMMemFill for a repeated pattern (any size), and for
 *                         small host data a non-blocking clEnqueueSVMMemcpy from a private
 *                         copy, appended to the device state's `kept` list: the back-end
 *                         lets it go once a blocking command or a synchronize shows the
 *                         in-order queue has passed it (_DeviceState.let_go, opencl.py).
 *                         Neither waits for the device.
 *                         The entry points are addresses handed over by the back-end (this
 *                         file links no OpenCL library); after a device reset the writer
 *                         is stale (its state is no longer the back-end's current one) and
 *                         the factory makes a new one.
 *   Filler    zeros, ones, full and the _like functions, and eye:
 *                 filler.array(shape, dtype, device, kind, value)
 *                 filler.eye(n_rows, n_cols, k, dtype, device, kind, value)
 *             resolves the device and shape as ga.empty does, asks its Python
 *             `spec(device, dtype, value)` for (dtype, pattern, cacheable) -- the pattern
 *             being the value's bytes as one element of dtype, or None for a value only
 *             the slow path writes (an array-like, one that does not convert); it raises
 *             the errors the general path raises before allocating -- and remembers
 *             cacheable answers (a few, by device, dtype argument and value: same object,
 *             or same exact int/float/complex type and bits).
 *   Uploader  asarray of host data, arange and linspace:
 *                 uploader.array(host, dtype, device, kind)
 *                 uploader.arange(start, stop, step, dtype, device, kind)
 *                 uploader.linspace(start, stop, num, endpoint, dtype, device, kind)
 *             array: a new array of host's shape and `device`'s dtype for `dtype` (None:
 *             host's) holding host's bytes.
 * arange, linspace and eye generate their values here, exactly as NumPy computes them, in
 * place on cpu or into the staged copy on OpenCL; where that is not one write (a device
 * without a writer, a result past the staged size) or NumPy would do more (huge values,
 * its special cases, warnings), they answer NotImplemented before allocating anything and
 * the caller takes its general path.
 * They all allocate (alloc.c) and write through the device's writer.  Anything else --
 * a device without a writer (cuda), a pattern the platform cannot fill, data that is not
 * C-contiguous or must be converted, an upload past max_staged bytes or while max_kept
 * copies wait, a freed or reset array, a platform error -- goes to the object's Python
 * `slow(array, value)`, which writes the new array as the general path does (and frees
 * it when it raises); generated values reach it as bytes.
 *
 * The write runs inside the device's usage gate (no reset under it), after a liveness
 * check, with the GIL held and no Python code in between: no other thread can free the
 * fresh array before the write is done ("host") or enqueued ("opencl"), so it takes no
 * hold (docs/design.md, "Work in flight holds its memory"); work still queued is ordered
 * before any later user of the memory by the device's one in-order queue.  A host write
 * of a MiB or more lets the GIL go, and holds the storage meanwhile.
 *
 * May call: alloc.c (ga_resolve_*, ga_core_new_array), array.c (ga_array_free), gate.c,
 * working.c (ga_work_live), compute.c (ga_array_address).
 */
#include "core.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- Writer */

typedef int32_t (*memfill_fn)(void *queue, void *ptr, const void *pattern, size_t pattern_size,
                              size_t size, uint32_t nevents, const void *events, void *event);
typedef int32_t (*memcpy_fn)(void *queue, uint32_t blocking, void *dst, const void *src,
                             size_t size, uint32_t nevents, const void *events, void *event);
typedef int32_t (*flush_fn)(void *queue);

#define MAX_PATTERN 128 /* clEnqueueSVMMemFill's largest pattern */

typedef struct {
    PyObject_HEAD
    PyObject *gate;
    char opencl; /* 0: "host" */
    void *queue;
    memfill_fn fill;
    memcpy_fn copy;
    flush_fn flush; /* NULL: the device starts commands without one */
    PyObject *state, *states, *index, *kept;
    Py_ssize_t max_staged, max_kept;
} WriterObject;

static PyObject *Writer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *names[] = {"gate", "mode", "queue", "fill", "copy", "flush", "state",
                            "states", "index", "kept", "max_staged", "max_kept", NULL};
    PyObject *gate, *state = Py_None, *states = Py_None, *index = Py_None, *kept = Py_None;
    const char *mode;
    unsigned long long queue = 0, fill = 0, copy = 0, flush = 0;
    Py_ssize_t max_staged = 0, max_kept = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Os|$KKKKOOOOnn:Writer", names, &gate, &mode,
                                     &queue, &fill, &copy, &flush, &state, &states, &index,
                                     &kept, &max_staged, &max_kept))
        return NULL;
    if (ga_gate_check(gate) < 0)
        return NULL;
    int opencl = strcmp(mode, "opencl") == 0;
    if (!opencl && strcmp(mode, "host") != 0) {
        PyErr_Format(PyExc_ValueError, "Writer: mode must be 'host' or 'opencl', got '%s'", mode);
        return NULL;
    }
    if (opencl && (!queue || !fill || !copy || !PyDict_CheckExact(states)
                   || !PyList_CheckExact(kept))) {
        PyErr_SetString(PyExc_ValueError, "Writer('opencl'): the queue and the entry points "
                        "must be non-null addresses, states a dict and kept a list");
        return NULL;
    }
    WriterObject *w = (WriterObject *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    w->gate = Py_NewRef(gate);
    w->opencl = (char)opencl;
    w->queue = (void *)(uintptr_t)queue;
    w->fill = (memfill_fn)(uintptr_t)fill;
    w->copy = (memcpy_fn)(uintptr_t)copy;
    w->flush = flush ? (flush_fn)(uintptr_t)flush : NULL;
    w->state = Py_NewRef(state);
    w->states = Py_NewRef(states);
    w->index = Py_NewRef(index);
    w->kept = Py_NewRef(kept);
    w->max_staged = max_staged;
    w->max_kept = max_kept;
    return (PyObject *)w;
}

static void Writer_dealloc(WriterObject *self)
{
    Py_XDECREF(self->gate);
    Py_XDECREF(self->state);
    Py_XDECREF(self->states);
    Py_XDECREF(self->index);
    Py_XDECREF(self->kept);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether the writer still belongs to its device's current state (a reset makes a new one). */
static int writer_current(WriterObject *w)
{
    if (!w->opencl)
        return 1;
    PyObject *now = PyDict_GetItemWithError(w->states, w->index); /* borrowed */
    if (now == NULL)
        PyErr_Clear();
    return now == w->state;
}

/* ---------------------------------------------------------------- sources */

/* What a new array is written from: a fill value's bytes, host data, or values generated
 * here exactly as NumPy computes them (the Uploader's arange and linspace, the Filler's
 * eye). */
enum { FILL, COPY, RANGE, LINSPACE, EYE };

typedef struct {
    int how;
    const char *data; /* FILL, EYE: one element's bytes (the fill value, the one); COPY: all */
    Py_ssize_t size;  /* FILL, EYE: the element's size */
    int64_t start, step;          /* RANGE: int64 start + i * step */
    double first, delta, last;    /* LINSPACE: fl(fl(i * delta) + first), float64 or float32, */
    char endpoint, single;        /* the last one `last` when endpoint */
    Py_ssize_t cols;              /* EYE: rows of cols elements, the one at column row + k */
    int64_t k;
} Source;

/* `nbytes` (a multiple of `size`) at `dst` set to the repeated `size`-byte pattern. */
static void fill_host(char *dst, const char *pattern, Py_ssize_t size, Py_ssize_t nbytes)
{
    Py_ssize_t i = 1;
    while (i < size && pattern[i] == pattern[0])
        i++;
    if (i == size) { /* zeros, and every pattern of one repeated byte */
        memset(dst, (unsigned char)pattern[0], (size_t)nbytes);
        return;
    }
    memcpy(dst, pattern, (size_t)size);
    for (Py_ssize_t done = size; done < nbytes; done *= 2) /* doubling copies */
        memcpy(dst + done, dst, (size_t)(done < nbytes - done ? done : nbytes - done));
}

/* The whole content of the new array, `nbytes`, written at `dst` (host memory). */
static void produce(const Source *s, char *dst, Py_ssize_t nbytes)
{
    switch (s->how) {
    case FILL:
        fill_host(dst, s->data, s->size, nbytes);
        return;
    case COPY:
        memcpy(dst, s->data, (size_t)nbytes);
        return;
    case RANGE: { /* NumPy's int64 fill: start + i * (next - start), modulo 2**64 */
        uint64_t v = (uint64_t)s->start;
        for (Py_ssize_t i = 0; i < nbytes / 8; i++, v += (uint64_t)s->step)
            memcpy(dst + 8 * i, &v, 8);
        return;
    }
    case LINSPACE: { /* NumPy's: y = arange(num) * step; y += start; y[-1] = stop */
        /* two roundings, as NumPy's two passes (never contracted: no FMA in the baseline
         * x86-64 or in C's default for separate statements); loops without branches, which
         * the compiler vectorizes */
        const double delta = s->delta, first = s->first;
        if (s->single) { /* astype(float32) */
            Py_ssize_t n = nbytes / 4;
            float *out = (float *)dst;
            for (Py_ssize_t i = 0; i < n; i++) {
                double y = (double)i * delta;
                y = y + first;
                out[i] = (float)y;
            }
            if (s->endpoint && n > 0)
                out[n - 1] = (float)s->last;
        } else {
            Py_ssize_t n = nbytes / 8;
            double *out = (double *)dst;
            for (Py_ssize_t i = 0; i < n; i++) {
                double y = (double)i * delta;
                out[i] = y + first;
            }
            if (s->endpoint && n > 0)
                out[n - 1] = s->last;
        }
        return;
    }
    case EYE: { /* NumPy's eye: zeros, then the one along the k-th diagonal */
        memset(dst, 0, (size_t)nbytes);
        Py_ssize_t rows = nbytes / (s->size * s->cols);
        for (Py_ssize_t r = 0; r < rows; r++) {
            int64_t c = (int64_t)r + s->k;
            if (c >= 0 && c < s->cols)
                memcpy(dst + ((Py_ssize_t)r * s->cols + (Py_ssize_t)c) * s->size, s->data,
                       (size_t)s->size);
        }
        return;
    }
    }
}

/* The source as the slow path takes it: the fill value or host array as given (`value`),
 * or the generated values as bytes (C order).  New reference. */
static PyObject *slow_value(const Source *s, Py_ssize_t nbytes, PyObject *value)
{
    if (s->how == FILL || s->how == COPY)
        return Py_NewRef(value);
    PyObject *b = PyBytes_FromStringAndSize(NULL, nbytes);
    if (b != NULL)
        produce(s, PyBytes_AS_STRING(b), nbytes);
    return b;
}

/* ---------------------------------------------------------------- the write */

/* Write `src`'s `nbytes` at `dst` through the writer.  0: done or enqueued; 1: the slow
 * path's turn; -1: error. */
static int writer_write(WriterObject *w, char *dst, const Source *src, Py_ssize_t nbytes)
{
    if (!w->opencl) {
        produce(src, dst, nbytes);
        return 0;
    }
    if (ga_in_stream())
        return 1; /* this thread is inside a stream: Python enqueues on the current one */
    int32_t code;
    if (src->how == FILL) {
        Py_ssize_t size = src->size;
        if (size > MAX_PATTERN || (size & (size - 1)) || (uintptr_t)dst % (uintptr_t)size)
            return 1;
        code = w->fill(w->queue, dst, src->data, (size_t)size, (size_t)nbytes, 0, NULL, NULL);
    } else {
        Py_ssize_t n = PyList_GET_SIZE(w->kept);
        if (nbytes > w->max_staged || n >= w->max_kept)
            return 1; /* the slow path's blocking upload also lets the kept copies go */
        PyObject *staged = PyBytes_FromStringAndSize(NULL, nbytes);
        if (staged == NULL)
            return -1;
        produce(src, PyBytes_AS_STRING(staged), nbytes);
        int appended = PyList_Append(w->kept, staged);
        Py_DECREF(staged); /* the list keeps it */
        if (appended < 0)
            return -1;
        code = w->copy(w->queue, 0, dst, PyBytes_AS_STRING(staged), (size_t)nbytes, 0, NULL,
                       NULL);
        if (code) /* not enqueued: nothing reads the copy; the entry stays (the back-end
                   * counts the entries ever kept) */
            PyList_SetItem(w->kept, n, Py_NewRef(Py_None));
    }
    if (code == 0 && w->flush != NULL)
        code = w->flush(w->queue); /* on failure the slow path writes again and raises */
    return code ? 1 : 0;
}

#define LET_GO_FROM (1 << 20) /* bytes from which a host write lets the GIL go */

/* Write the fresh array `a` (`nbytes` > 0) from `src` inside its device's gate (see
 * writer_write).  A large host write lets other threads run meanwhile, as NumPy's and
 * memmove's would, the array's storage held (docs/design.md, "Work in flight holds its
 * memory"). */
static int write_array(WriterObject *w, ArrayObject *a, const Source *src, Py_ssize_t nbytes)
{
    if (ga_gate_enter(w->gate) < 0) /* waits (in Python) only while a reset holds it */
        return -1;
    int rc = 1;
    size_t addr;
    /* a reset while the gate was awaited kills the array's epoch and the writer's state */
    if (!a->freed && ga_work_live(a->storage) && writer_current(w)) {
        if (ga_array_address(a, &addr) < 0) {
            PyErr_Clear(); /* not an int: the slow path says what is wrong */
        } else if (!w->opencl && nbytes >= LET_GO_FROM) {
            StorageObject *held = a->storage;
            ga_work_hold(&held, 1);
            Py_BEGIN_ALLOW_THREADS
            produce(src, (char *)addr, nbytes);
            Py_END_ALLOW_THREADS
            rc = ga_work_unhold(&held, 1) < 0 ? -1 : 0;
        } else {
            rc = writer_write(w, (char *)addr, src, nbytes);
        }
    }
    if (ga_gate_exit(w->gate) < 0)
        rc = -1;
    return rc;
}

PyTypeObject ga_WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Writer",
    .tp_doc = "Writer(gate, mode, *, queue=0, fill=0, copy=0, flush=0, state=None, "
              "states=None, index=None, kept=None, max_staged=0, max_kept=0)\n--\n\n"
              "How the compiled creation functions write a device's new memory: mode 'host' "
              "(the process's own memory, written in place) or 'opencl' (the queue and the "
              "addresses of clEnqueueSVMMemFill, clEnqueueSVMMemcpy and clFlush (0: none); "
              "stale once states[index] is not state; host data of at most max_staged bytes "
              "is copied to a private buffer kept on `kept` while at most max_kept are).  "
              "See src/native/core/fill.c.",
    .tp_basicsize = sizeof(WriterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Writer_new,
    .tp_dealloc = (destructor)Writer_dealloc,
};

/* ---------------------------------------------------------------- Filler and Uploader */

#define WRITERS 8 /* devices remembered per object (more: the factory is asked each time) */
#define SPECS 8   /* Filler answers remembered */

typedef struct {
    PyObject *dev, *writer;
} WriterSlot;

typedef struct {
    PyObject *dev, *dtype_arg, *value, *dt, *pattern;
} SpecSlot;

/* What a Filler and an Uploader share: the Python slow path, the writer factory and the
 * writers it made, by device (identity; devices are singletons). */
typedef struct {
    PyObject_HEAD
    PyObject *slow, *writer_of, *spec; /* spec: the Filler's only */
    WriterSlot writers[WRITERS];
    SpecSlot specs[SPECS];
    int next_spec;
} MakerObject;

static PyObject *maker_new(PyTypeObject *type, PyObject *args, PyObject *kw, int filler)
{
    static char *filler_names[] = {"spec", "slow", "writer_of", NULL};
    static char *uploader_names[] = {"slow", "writer_of", NULL};
    PyObject *spec = NULL, *slow, *writer_of;
    int ok = filler ? PyArg_ParseTupleAndKeywords(args, kw, "OOO:Filler", filler_names, &spec,
                                                  &slow, &writer_of)
                    : PyArg_ParseTupleAndKeywords(args, kw, "OO:Uploader", uploader_names,
                                                  &slow, &writer_of);
    if (!ok)
        return NULL;
    if (!PyCallable_Check(slow) || !PyCallable_Check(writer_of)
            || (spec != NULL && !PyCallable_Check(spec))) {
        PyErr_Format(PyExc_TypeError, "%s: spec, slow and writer_of must be callables",
                     type->tp_name);
        return NULL;
    }
    MakerObject *m = (MakerObject *)type->tp_alloc(type, 0); /* zeroed */
    if (m == NULL)
        return NULL;
    m->spec = Py_XNewRef(spec);
    m->slow = Py_NewRef(slow);
    m->writer_of = Py_NewRef(writer_of);
    return (PyObject *)m;
}

static PyObject *Filler_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return maker_new(type, args, kw, 1);
}

static PyObject *Uploader_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    return maker_new(type, args, kw, 0);
}

static void spec_clear(SpecSlot *s)
{
    Py_CLEAR(s->dev);
    Py_CLEAR(s->dtype_arg);
    Py_CLEAR(s->value);
    Py_CLEAR(s->dt);
    Py_CLEAR(s->pattern);
}

static void Maker_dealloc(MakerObject *self)
{
    Py_XDECREF(self->spec);
    Py_XDECREF(self->slow);
    Py_XDECREF(self->writer_of);
    for (int i = 0; i < WRITERS; i++) {
        Py_XDECREF(self->writers[i].dev);
        Py_XDECREF(self->writers[i].writer);
    }
    for (int i = 0; i < SPECS; i++)
        spec_clear(&self->specs[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The device's current writer, or None (new references); NULL with an error. */
static PyObject *writer_for(MakerObject *m, PyObject *dev)
{
    WriterSlot *free_slot = NULL;
    for (int i = 0; i < WRITERS; i++) {
        WriterSlot *s = &m->writers[i];
        if (s->dev == dev) {
            if (s->writer == Py_None || writer_current((WriterObject *)s->writer))
                return Py_NewRef(s->writer);
            free_slot = s; /* stale: replaced below */
            break;
        }
        if (s->dev == NULL && free_slot == NULL)
            free_slot = s;
    }
    PyObject *w = PyObject_CallOneArg(m->writer_of, dev);
    if (w == NULL)
        return NULL;
    if (w != Py_None && !PyObject_TypeCheck(w, &ga_WriterType)) {
        PyErr_Format(PyExc_TypeError, "writer_of() must return a _core.Writer or None, got "
                     "%.200s", Py_TYPE(w)->tp_name);
        Py_DECREF(w);
        return NULL;
    }
    if (free_slot != NULL) {
        /* the factory ran Python: the slot may have been filled meanwhile; replace it */
        PyObject *old_dev = free_slot->dev, *old_writer = free_slot->writer;
        free_slot->dev = Py_NewRef(dev);
        free_slot->writer = Py_NewRef(w);
        Py_XDECREF(old_dev);
        Py_XDECREF(old_writer);
    }
    return w;
}

/* Whether two fill values give the same pattern: one object, or the same exact int, or
 * the same bits of an exact float or complex (0.0 and -0.0 differ, a NaN is itself). */
static int same_value(PyObject *a, PyObject *b)
{
    if (a == b)
        return 1;
    if (Py_TYPE(a) != Py_TYPE(b))
        return 0;
    if (PyFloat_CheckExact(a)) {
        double x = PyFloat_AS_DOUBLE(a), y = PyFloat_AS_DOUBLE(b);
        return memcmp(&x, &y, sizeof x) == 0;
    }
    if (PyComplex_CheckExact(a)) {
        Py_complex x = PyComplex_AsCComplex(a), y = PyComplex_AsCComplex(b);
        return memcmp(&x, &y, sizeof x) == 0;
    }
    if (PyLong_CheckExact(a)) {
        int r = PyObject_RichCompareBool(a, b, Py_EQ);
        if (r < 0)
            PyErr_Clear();
        return r == 1;
    }
    return 0;
}

/* (dtype, pattern) for a fill: remembered, else the spec's answer (new references in
 * *dt and *pattern); -1 with the spec's error. */
static int fill_spec(MakerObject *m, PyObject *dev, PyObject *dtype, PyObject *value,
                     PyObject **dt, PyObject **pattern)
{
    for (int i = 0; i < SPECS; i++) {
        SpecSlot *s = &m->specs[i];
        if (s->dev == dev && s->dtype_arg == dtype && s->value != NULL
                && same_value(s->value, value)) {
            *dt = Py_NewRef(s->dt);
            *pattern = Py_NewRef(s->pattern);
            return 0;
        }
    }
    PyObject *r = PyObject_CallFunctionObjArgs(m->spec, dev, dtype, value, NULL);
    if (r == NULL)
        return -1;
    PyObject *p = PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) == 3 ? PyTuple_GET_ITEM(r, 1)
                                                                       : NULL;
    if (p == NULL || (p != Py_None && (!PyBytes_CheckExact(p) || PyBytes_GET_SIZE(p) == 0))) {
        PyErr_SetString(PyExc_TypeError, "a Filler's spec must return (dtype, pattern bytes "
                        "or None, cacheable)");
        Py_DECREF(r);
        return -1;
    }
    *dt = Py_NewRef(PyTuple_GET_ITEM(r, 0));
    *pattern = Py_NewRef(PyTuple_GET_ITEM(r, 1));
    int cacheable = PyObject_IsTrue(PyTuple_GET_ITEM(r, 2));
    Py_DECREF(r);
    if (cacheable < 0)
        goto fail;
    if (cacheable && *pattern != Py_None && dtype != Py_None && PyObject_Hash(dtype) == -1) {
        PyErr_Clear(); /* a list describing a structured dtype may change: never remember */
        cacheable = 0;
    }
    if (cacheable && *pattern != Py_None) {
        SpecSlot *s = &m->specs[m->next_spec];
        m->next_spec = (m->next_spec + 1) % SPECS;
        SpecSlot old = *s;
        s->dev = Py_NewRef(dev);
        s->dtype_arg = Py_NewRef(dtype);
        s->value = Py_NewRef(value);
        s->dt = Py_NewRef(*dt);
        s->pattern = Py_NewRef(*pattern);
        spec_clear(&old);
    }
    return 0;
fail:
    Py_CLEAR(*dt);
    Py_CLEAR(*pattern);
    return -1;
}

/* The new array `a` written from `src`, else (no source, no writer, not now) by the slow
 * path, which gets `value` or, for generated values, their bytes (slow_value); steals `a`. */
static PyObject *finish(MakerObject *m, PyObject *writer, PyObject *a, const Source *src,
                        PyObject *value)
{
    ArrayObject *arr = (ArrayObject *)a;
    Py_ssize_t nbytes = PyLong_AsSsize_t(arr->storage->nbytes);
    int rc = nbytes < 0 ? -1 : 1;
    if (src != NULL && nbytes == 0)
        return a; /* nothing to write (a NULL storage) */
    if (src != NULL && nbytes > 0 && writer != Py_None)
        rc = write_array((WriterObject *)writer, arr, src, nbytes);
    if (rc == 0)
        return a;
    if (rc == 1) {
        PyObject *v = src == NULL ? Py_NewRef(value) : slow_value(src, nbytes, value);
        if (v != NULL) {
            PyObject *r = PyObject_CallFunctionObjArgs(m->slow, a, v, NULL);
            Py_DECREF(v);
            Py_DECREF(a);
            return r;
        }
    }
    PyObject *et, *ev, *tb; /* the array goes back now, even if a traceback keeps it */
    PyErr_Fetch(&et, &ev, &tb);
    if (ga_array_free(a) < 0)
        PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    Py_DECREF(a);
    return NULL;
}

/* A new array of dims and dt on dev written from `src` (NULL: by the slow path with
 * `value`) through `writer` (a Writer or None). */
static PyObject *make(MakerObject *m, PyObject *writer, PyObject *dims, PyObject *dt,
                      PyObject *dev, PyObject *kind, const Source *src, PyObject *value)
{
    PyObject *call[4] = {dims, dt, dev, kind};
    PyObject *a = ga_core_new_array(NULL, call, 4);
    return a == NULL ? NULL : finish(m, writer, a, src, value);
}

/* make() through the device's writer. */
static PyObject *make_on(MakerObject *m, PyObject *dims, PyObject *dt, PyObject *dev,
                         PyObject *kind, const Source *src, PyObject *value)
{
    PyObject *writer = writer_for(m, dev);
    if (writer == NULL)
        return NULL;
    PyObject *a = make(m, writer, dims, dt, dev, kind, src, value);
    Py_DECREF(writer);
    return a;
}

static PyObject *Filler_array(MakerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "Filler.array(shape, dtype, device, kind, value)");
        return NULL;
    }
    PyObject *shape = args[0], *dtype = args[1], *kind = args[3], *value = args[4];
    PyObject *dev = ga_resolve_device(args[2]);
    if (dev == NULL)
        return NULL;
    PyObject *dt = NULL, *pattern = NULL, *dims = NULL, *a = NULL;
    /* in the general path's order: the device, the dtype and value, then the shape */
    if (fill_spec(self, dev, dtype, value, &dt, &pattern) == 0
            && (dims = ga_resolve_shape(shape)) != NULL) {
        Source s = {.how = FILL};
        if (pattern != Py_None) { /* None: the value is for the slow path */
            s.data = PyBytes_AS_STRING(pattern);
            s.size = PyBytes_GET_SIZE(pattern);
        }
        a = make_on(self, dims, dt, dev, kind, pattern != Py_None ? &s : NULL, value);
    }
    Py_XDECREF(dims);
    Py_XDECREF(pattern);
    Py_XDECREF(dt);
    Py_DECREF(dev);
    return a;
}

static PyObject *str_shape, *str_dtype;

static PyObject *Uploader_array(MakerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "Uploader.array(host, dtype, device, kind)");
        return NULL;
    }
    PyObject *host = args[0], *dtype = args[1], *kind = args[3];
    PyObject *dev = ga_resolve_device(args[2]);
    if (dev == NULL)
        return NULL;
    PyObject *host_dtype = NULL, *dt = NULL, *shape = NULL, *dims = NULL, *a = NULL;
    if ((host_dtype = PyObject_GetAttr(host, str_dtype)) != NULL
            && (dt = ga_resolve_dtype(dev, dtype == Py_None ? host_dtype : dtype)) != NULL
            && (shape = PyObject_GetAttr(host, str_shape)) != NULL
            && (dims = ga_resolve_shape(shape)) != NULL) {
        /* host's bytes as they are when they are dt's and C-contiguous (so exactly the
         * array's bytes); else the slow path converts */
        int same = dt == host_dtype;
        if (!same && (same = PyObject_RichCompareBool(dt, host_dtype, Py_EQ)) < 0) {
            PyErr_Clear();
            same = 0;
        }
        Py_buffer view;
        if (same && PyObject_GetBuffer(host, &view, PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();
            same = 0;
        }
        Source s = {.how = COPY};
        if (same)
            s.data = view.buf;
        a = make_on(self, dims, dt, dev, kind, same ? &s : NULL, host);
        if (same)
            PyBuffer_Release(&view);
    }
    Py_XDECREF(dims);
    Py_XDECREF(shape);
    Py_XDECREF(dt);
    Py_XDECREF(host_dtype);
    Py_DECREF(dev);
    return a;
}

/* ---------------------------------------------------------------- generated values */

/* Generated values are made only where the writer takes them in one write (cpu: always;
 * OpenCL: a small staged upload); elsewhere the call answers NotImplemented, before
 * anything is allocated, and the caller's general path computes them (NumPy on the host,
 * or a kernel). */
static int writer_takes(PyObject *writer, Py_ssize_t nbytes)
{
    if (writer == Py_None)
        return 0;
    WriterObject *w = (WriterObject *)writer;
    return !w->opencl || (nbytes <= w->max_staged && PyList_GET_SIZE(w->kept) < w->max_kept);
}

/* A new array of dims and dt on dev (nbytes) from the generator `s`, or NotImplemented. */
static PyObject *generate(MakerObject *self, PyObject *dims, PyObject *dt, PyObject *dev,
                          PyObject *kind, const Source *s, Py_ssize_t nbytes)
{
    PyObject *writer = writer_for(self, dev);
    if (writer == NULL)
        return NULL;
    PyObject *a = writer_takes(writer, nbytes) ? make(self, writer, dims, dt, dev, kind, s,
                                                      Py_None)
                                               : Py_NewRef(Py_NotImplemented);
    Py_DECREF(writer);
    return a;
}

/* The device and its dtype for `dtype`, whose itemsize must be 8 (RANGE) or 4 or 8
 * (LINSPACE: float32 or float64); 0, or -1 with an error (new references). */
static int generated_dtype(PyObject *device, PyObject *dtype, int how, PyObject **dev,
                           PyObject **dt)
{
    *dt = NULL;
    if ((*dev = ga_resolve_device(device)) == NULL)
        return -1;
    PyObject *size = NULL;
    if ((*dt = ga_resolve_dtype(*dev, dtype)) != NULL
            && (size = PyObject_GetAttr(*dt, ga_str_itemsize)) != NULL) {
        Py_ssize_t n = PyLong_AsSsize_t(size);
        Py_DECREF(size);
        if (n == 8 || (n == 4 && how == LINSPACE))
            return 0;
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%R is not the dtype of a generated %s", *dt,
                         how == RANGE ? "int64 range" : "float32/float64 linspace");
    }
    Py_CLEAR(*dt);
    Py_CLEAR(*dev);
    return -1;
}

#define EXACT 9007199254740992.0 /* 2**53: below it, ints and their quotients are exact */

/* arange(start, stop, step, dtype, device, kind): NumPy's arange of Python ints, as int64
 * (dtype: the device's int64). */
static PyObject *Uploader_arange(MakerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "Uploader.arange(start, stop, step, dtype, device, kind)");
        return NULL;
    }
    /* the public form: arange(stop) is arange(0, stop); Python ints only (exact type: a
       bool, a NumPy integer or a float takes the general path) */
    PyObject *const ends[3] = {args[1] == Py_None ? NULL : args[0],
                               args[1] == Py_None ? args[0] : args[1], args[2]};
    long long v[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if (ends[i] == NULL)
            continue;
        if (!PyLong_CheckExact(ends[i]))
            Py_RETURN_NOTIMPLEMENTED;
        int overflow;
        v[i] = PyLong_AsLongLongAndOverflow(ends[i], &overflow);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
        if (overflow || v[i] <= -(long long)EXACT || v[i] >= (long long)EXACT)
            Py_RETURN_NOTIMPLEMENTED; /* NumPy's length, a float quotient, may be inexact */
    }
    long long start = v[0], span = v[1] - v[0], step = v[2];
    if (step == 0)
        Py_RETURN_NOTIMPLEMENTED; /* the general path refuses it */
    long long num = step > 0 ? (span > 0 ? (span + step - 1) / step : 0)
                             : (span < 0 ? (span + step + 1) / step : 0);
    PyObject *dev, *dt, *a = NULL, *dims = NULL;
    if (generated_dtype(args[4], args[3], RANGE, &dev, &dt) < 0)
        return NULL;
    Source s = {.how = RANGE, .start = start, .step = step};
    if ((dims = Py_BuildValue("(L)", num)) != NULL)
        a = generate(self, dims, dt, dev, args[5], &s, (Py_ssize_t)num * 8);
    Py_XDECREF(dims);
    Py_DECREF(dt);
    Py_DECREF(dev);
    return a;
}

/* linspace(start, stop, num, endpoint, dtype, device, kind): NumPy's linspace of Python
 * ints and floats as float64 (then cast, for a float32 dtype): y = arange(num) * step,
 * y += start, y[-1] = stop when endpoint, step = (stop - start) / (num - endpoint).
 * NotImplemented where NumPy does more or may warn: fewer than 2 or 2**53 values or more,
 * a zero step (its denormal case), magnitudes from 2**62 (overflows, NaN, infinities). */
static PyObject *Uploader_linspace(MakerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "Uploader.linspace(start, stop, num, endpoint, dtype, "
                        "device, kind)");
        return NULL;
    }
    /* Python ints and floats only (exact types: a bool, a NumPy scalar or an array takes
       the general path), a Python int num */
    for (int i = 0; i < 2; i++)
        if (!PyLong_CheckExact(args[i]) && !PyFloat_CheckExact(args[i]))
            Py_RETURN_NOTIMPLEMENTED;
    if (!PyLong_CheckExact(args[2]))
        Py_RETURN_NOTIMPLEMENTED;
    double first = PyFloat_AsDouble(args[0]), last = PyFloat_AsDouble(args[1]);
    Py_ssize_t num = PyLong_AsSsize_t(args[2]);
    int endpoint = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear(); /* a num past a Py_ssize_t, an int past a double */
        Py_RETURN_NOTIMPLEMENTED;
    }
    const double below = 4611686018427387904.0; /* 2**62 (a NaN compares false) */
    if (!(fabs(first) < below && fabs(last) < below && num >= 2 && (double)num < EXACT))
        Py_RETURN_NOTIMPLEMENTED;
    double step = (last - first) / (double)(endpoint ? num - 1 : num);
    if (step == 0)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *dev, *dt, *a = NULL, *dims = NULL;
    if (generated_dtype(args[5], args[4], LINSPACE, &dev, &dt) < 0)
        return NULL;
    Source s = {.how = LINSPACE, .first = first, .delta = step, .last = last,
                .endpoint = (char)endpoint};
    PyObject *size = PyObject_GetAttr(dt, ga_str_itemsize); /* 4 or 8: checked */
    s.single = size != NULL && PyLong_AsSsize_t(size) == 4;
    Py_XDECREF(size);
    if (!PyErr_Occurred() && (dims = Py_BuildValue("(n)", num)) != NULL)
        a = generate(self, dims, dt, dev, args[6], &s, num * (s.single ? 4 : 8));
    Py_XDECREF(dims);
    Py_DECREF(dt);
    Py_DECREF(dev);
    return a;
}

/* eye(n_rows, n_cols, k, dtype, device, kind, value): NumPy's eye -- zeros, and `value`
 * (the Filler's spec gives its dtype and bytes) on the k-th diagonal.  NotImplemented for
 * negative or huge sizes (the general path says what is wrong) and where the writer cannot
 * take it in one write. */
static PyObject *Filler_eye(MakerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "Filler.eye(n_rows, n_cols, k, dtype, device, kind, "
                        "value)");
        return NULL;
    }
    /* Python ints only (exact type), n_cols None: n_rows */
    PyObject *n_cols = args[1] == Py_None ? args[0] : args[1];
    if (!PyLong_CheckExact(args[0]) || !PyLong_CheckExact(n_cols) || !PyLong_CheckExact(args[2]))
        Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t rows = PyLong_AsSsize_t(args[0]), cols = PyLong_AsSsize_t(n_cols);
    int overflow;
    long long k = PyLong_AsLongLongAndOverflow(args[2], &overflow);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NOTIMPLEMENTED;
    }
    if (rows < 0 || cols < 0)
        Py_RETURN_NOTIMPLEMENTED;
    /* a diagonal beyond the matrix keeps all or nothing */
    if (overflow > 0 || k > (long long)cols + 1)
        k = (long long)cols + 1;
    if (overflow < 0 || k < -(long long)rows - 1)
        k = -(long long)rows - 1;
    PyObject *dev = ga_resolve_device(args[4]);
    if (dev == NULL)
        return NULL;
    PyObject *dt = NULL, *pattern = NULL, *dims = NULL, *a = NULL;
    Py_ssize_t nbytes;
    if (fill_spec(self, dev, args[3], args[6], &dt, &pattern) == 0) {
        if (pattern == Py_None
                || __builtin_mul_overflow(rows, cols, &nbytes)
                || __builtin_mul_overflow(nbytes, PyBytes_GET_SIZE(pattern), &nbytes)) {
            a = Py_NewRef(Py_NotImplemented);
        } else if ((dims = Py_BuildValue("(nn)", rows, cols)) != NULL) {
            Source s = {.how = EYE, .data = PyBytes_AS_STRING(pattern),
                        .size = PyBytes_GET_SIZE(pattern), .cols = cols, .k = k};
            a = generate(self, dims, dt, dev, args[5], &s, nbytes);
        }
    }
    Py_XDECREF(dims);
    Py_XDECREF(pattern);
    Py_XDECREF(dt);
    Py_DECREF(dev);
    return a;
}

static PyMethodDef Filler_methods[] = {
    {"array", (PyCFunction)(void (*)(void))Filler_array, METH_FASTCALL,
     "array(shape, dtype, device, kind, value) -> a new array of shape filled with value "
     "(the dtype the spec answers)."},
    {"eye", (PyCFunction)(void (*)(void))Filler_eye, METH_FASTCALL,
     "eye(n_rows, n_cols, k, dtype, device, kind, value) -> NumPy's eye with value on the "
     "k-th diagonal (n_cols None: n_rows), or NotImplemented (nothing allocated): other "
     "than Python ints, sizes the general path refuses, "
     "or a device that would not take it in one write (src/native/core/fill.c)."},
    {NULL}};

static PyMethodDef Uploader_methods[] = {
    {"array", (PyCFunction)(void (*)(void))Uploader_array, METH_FASTCALL,
     "array(host, dtype, device, kind) -> a new array holding the NumPy array host's "
     "values, of device's dtype for dtype (None: host's)."},
    {"arange", (PyCFunction)(void (*)(void))Uploader_arange, METH_FASTCALL,
     "arange(start, stop, step, dtype, device, kind) -> NumPy's arange of Python ints as "
     "int64 (dtype; stop None: arange(0, start)), or NotImplemented (nothing allocated): "
     "other than Python ints, a value of magnitude 2**53 or more, a zero step, or a device "
     "that would not take it in one write."},
    {"linspace", (PyCFunction)(void (*)(void))Uploader_linspace, METH_FASTCALL,
     "linspace(start, stop, num, endpoint, dtype, device, kind) -> NumPy's linspace of "
     "Python ints and floats (float64, or cast to a float32 dtype), or NotImplemented "
     "(nothing allocated) for other types, or where NumPy does more or may warn "
     "(src/native/core/fill.c)."},
    {NULL}};

PyTypeObject ga_FillerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Filler",
    .tp_doc = "Filler(spec, slow, writer_of)\n--\n\n"
              "Creation functions that fill (array) or fill a diagonal (eye): spec(device, "
              "dtype, value) -> (dtype, pattern bytes or None, cacheable) raises the argument "
              "errors; writer_of(device) -> Writer or None; slow(array, value) fills the new "
              "array the general way and returns it.  See src/native/core/fill.c.",
    .tp_basicsize = sizeof(MakerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Filler_new,
    .tp_dealloc = (destructor)Maker_dealloc,
    .tp_methods = Filler_methods,
};

PyTypeObject ga_UploaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._core.Uploader",
    .tp_doc = "Uploader(slow, writer_of)\n--\n\n"
              "Creation functions from host data (array) and of values generated as NumPy "
              "does (arange, linspace): writer_of(device) -> Writer or None; slow(array, "
              "host) writes the new array the general way and returns it (host: the NumPy "
              "array, or the generated values as bytes).  See src/native/core/fill.c.",
    .tp_basicsize = sizeof(MakerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = Uploader_new,
    .tp_dealloc = (destructor)Maker_dealloc,
    .tp_methods = Uploader_methods,
};

int ga_fill_init(void)
{
    if ((str_shape = PyUnicode_InternFromString("shape")) == NULL
            || (str_dtype = PyUnicode_InternFromString("dtype")) == NULL)
        return -1;
    return 0;
}
