/* gpuarrays._dlpack: DLPack capsules built and parsed in C (docs/decisions.md, "DLPack").
 *
 * Its own extension, beside the core: it calls nothing of src/native/core/ and reads
 * the core's State only as a Python object (gpuarrays._state.state.shutting_down).
 *
 * Export: capsule(handle, ptr, shape, strides, dtype, versioned, flags, device_type, device_id)
 *   builds a DLManagedTensorVersioned ("dltensor_versioned") or a legacy DLManagedTensor
 *   ("dltensor") in one malloc'd block with its shape and strides.  manager_ctx holds a
 *   strong reference to `handle` (a Python object owning one handle on the memory).
 *
 *   The block is shared by the capsule and the consumer (a count of two, changed only with
 *   the GIL held).  The deleter releases the consumer's share; the capsule's destructor
 *   releases the capsule's share, after running the deleter itself when nobody consumed
 *   the capsule (its name is still "dltensor[_versioned]").  The deleter clears
 *   manager_ctx when it runs, so a second call while the capsule still lives -- what
 *   torch.from_dlpack does with a capsule it refuses: it calls the deleter and leaves the
 *   capsule unconsumed -- finds nothing to release and reads memory that is still valid.
 *
 *   The deleter runs from any thread: it takes the GIL (PyGILState_Ensure), saves and
 *   restores any pending exception around the Py_DECREF, and never raises.  After the
 *   interpreter is gone (or while it is finalizing, from a thread that cannot take the
 *   GIL) it leaks instead.
 *
 * Import: take(capsule) checks the name, renames the capsule "used_dltensor[_versioned]"
 *   and returns (owner, dtype, ptr, shape, strides, lo, nbytes, writeable, device_type,
 *   device_id): `owner` is an Owner object whose deallocation calls the producer's deleter
 *   exactly once (GIL held, pending exception saved and restored; skipped once
 *   gpuarrays' interpreter shutdown started), `ptr` the address of element 0, `strides`
 *   in bytes, [lo, lo + nbytes) the byte range the layout touches relative to `ptr`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ DLPack 1.0 ABI */
typedef struct {
    int32_t device_type;
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_MAJOR 1
#define DLPACK_MINOR 0
#define FLAG_READ_ONLY ((uint64_t)1 << 0)
#define MAX_NDIM 64

static const char NAME[] = "dltensor";
static const char NAME_V[] = "dltensor_versioned";
/* Consumers rename a capsule they took; PyCapsule_SetName keeps the pointer, and these
 * static strings live as long as the process (extension modules are never unloaded). */
static const char USED[] = "used_dltensor";
static const char USED_V[] = "used_dltensor_versioned";

/* ------------------------------------------------------------------ module state */
static PyObject *g_state;        /* gpuarrays._state.state (reads .shutting_down) */
static PyObject *g_str_shutting; /* "shutting_down" */
static PyObject *g_export_codes; /* {np.dtype: code | bits << 8} */
#define N_CODES 8
#define N_BYTES 17
static PyObject *g_import_dtypes[N_CODES][N_BYTES]; /* [code][bits / 8] -> np.dtype */

/* Whether gpuarrays' interpreter shutdown started (state.shutting_down); never raises. */
static int
shutting_down(void)
{
    if (g_state == NULL) {
        return 0;
    }
    PyObject *v = PyObject_GetAttr(g_state, g_str_shutting);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

/* Pending exception saved and restored around code that may run Python. */
#if PY_VERSION_HEX >= 0x030C0000
typedef struct { PyObject *exc; } SavedError;
static inline void save_error(SavedError *s) { s->exc = PyErr_GetRaisedException(); }
static inline void restore_error(SavedError *s)
{
    if (PyErr_Occurred()) {   /* never raise: a stray error is reported, not propagated */
        PyErr_WriteUnraisable(NULL);
    }
    PyErr_SetRaisedException(s->exc);
}
#else
typedef struct { PyObject *type, *value, *tb; } SavedError;
static inline void save_error(SavedError *s) { PyErr_Fetch(&s->type, &s->value, &s->tb); }
static inline void restore_error(SavedError *s)
{
    if (PyErr_Occurred()) {
        PyErr_WriteUnraisable(NULL);
    }
    PyErr_Restore(s->type, s->value, s->tb);
}
#endif

/* Whether Python code may run from this thread now (the deleter may come from anywhere,
 * even from a C++ destructor after Py_Finalize). */
static int
python_usable(void)
{
    if (!Py_IsInitialized()) {
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing() && !PyGILState_Check()) {
        return 0;
    }
#else
    if (_Py_IsFinalizing() && !PyGILState_Check()) {
        return 0;
    }
#endif
    return 1;
}

/* ------------------------------------------------------------------ export */
typedef struct {
    union {
        DLManagedTensorVersioned v; /* first: the block's address is the tensor's */
        DLManagedTensor l;
    } m;
    int refs;      /* the capsule's share and the consumer's (changed with the GIL held) */
    int versioned;
    int64_t dims[]; /* shape[ndim], then strides[ndim] (in elements) */
} Block;

static void
block_unref(Block *b)
{
    if (--b->refs == 0) {
        free(b);
    }
}

/* The consumer's release; GIL held.  Idempotent: the first call clears manager_ctx. */
static void
block_release(Block *b)
{
    void **ctx_slot = b->versioned ? &b->m.v.manager_ctx : &b->m.l.manager_ctx;
    PyObject *handle = (PyObject *)*ctx_slot;
    if (handle == NULL) {
        return; /* released already (a consumer calling the deleter twice) */
    }
    *ctx_slot = NULL;
    SavedError saved;
    save_error(&saved);
    Py_DECREF(handle);
    restore_error(&saved);
    block_unref(b);
}

static void
deleter_any(Block *b)
{
    if (b == NULL || !python_usable()) {
        return; /* nothing to release, or too late to: leak */
    }
    PyGILState_STATE g = PyGILState_Ensure();
    block_release(b);
    PyGILState_Release(g);
}

static void
deleter_v(DLManagedTensorVersioned *self)
{
    deleter_any((Block *)self);
}

static void
deleter_l(DLManagedTensor *self)
{
    deleter_any((Block *)self);
}

/* Capsule destructor: GIL held, possibly with an exception pending (a consumer that
 * refused the capsule and is unwinding). */
static void
capsule_destructor(PyObject *capsule)
{
    SavedError saved;
    save_error(&saved);
    const char *name = PyCapsule_GetName(capsule);
    Block *b = (Block *)PyCapsule_GetPointer(capsule, name);
    if (b == NULL) {
        PyErr_Clear();
    }
    else {
        if (name != NULL && (strcmp(name, NAME_V) == 0 || strcmp(name, NAME) == 0)) {
            block_release(b); /* nobody consumed it: the deleter's work is ours */
        }
        block_unref(b);
    }
    restore_error(&saved);
}

static int
as_i64(PyObject *o, int64_t *out)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/* capsule(handle, ptr, shape, strides, dtype, versioned, flags, device_type, device_id) */
static PyObject *
dl_capsule(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError,
                        "capsule(handle, ptr, shape, strides, dtype, versioned, flags, "
                        "device_type, device_id) takes 9 arguments");
        return NULL;
    }
    PyObject *handle = args[0], *shape = args[2], *strides = args[3], *dtype = args[4];
    if (!PyTuple_Check(shape) || !PyTuple_Check(strides)) {
        PyErr_SetString(PyExc_TypeError, "shape and strides must be tuples");
        return NULL;
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (PyTuple_GET_SIZE(strides) != ndim || ndim > MAX_NDIM) {
        PyErr_SetString(PyExc_ValueError, "strides do not match shape (or too many dimensions)");
        return NULL;
    }
    unsigned long long ptr = PyLong_AsUnsignedLongLong(args[1]);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    int versioned = PyObject_IsTrue(args[5]);
    if (versioned < 0) {
        return NULL;
    }
    unsigned long long flags = PyLong_AsUnsignedLongLong(args[6]);
    if (flags == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    long dev_type = PyLong_AsLong(args[7]);
    if (dev_type == -1 && PyErr_Occurred()) {
        return NULL;
    }
    long dev_id = PyLong_AsLong(args[8]);
    if (dev_id == -1 && PyErr_Occurred()) {
        return NULL;
    }

    /* dtype -> (code, bits) */
    PyObject *packed = g_export_codes ? PyDict_GetItemWithError(g_export_codes, dtype) : NULL;
    if (packed == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_BufferError,
                         "DLPack cannot describe dtype %R: only bool, int/uint 8-64, "
                         "float 16-64 and complex 64/128 in native byte order are exported",
                         dtype);
        }
        return NULL;
    }
    long code_bits = PyLong_AsLong(packed);
    if (code_bits == -1 && PyErr_Occurred()) {
        return NULL;
    }
    uint8_t code = (uint8_t)(code_bits & 0xff), bits = (uint8_t)((code_bits >> 8) & 0xff);
    int64_t itemsize = bits / 8;

    Block *b = (Block *)malloc(sizeof(Block) + 2 * (size_t)ndim * sizeof(int64_t));
    if (b == NULL) {
        return PyErr_NoMemory();
    }
    int64_t *sh = b->dims, *st = b->dims + ndim;
    for (Py_ssize_t i = 0; i < ndim; i++) {
        int64_t n, s;
        if (as_i64(PyTuple_GET_ITEM(shape, i), &n) < 0
                || as_i64(PyTuple_GET_ITEM(strides, i), &s) < 0) {
            free(b);
            return NULL;
        }
        if (s % itemsize != 0 && n > 1) {
            free(b);
            PyErr_Format(PyExc_BufferError,
                         "DLPack strides are in elements: byte stride %lld of axis %zd is not "
                         "a multiple of the item size %lld",
                         (long long)s, i, (long long)itemsize);
            return NULL;
        }
        sh[i] = n;
        st[i] = s / itemsize;
    }

    DLTensor *t;
    if (versioned) {
        DLManagedTensorVersioned *m = &b->m.v;
        m->version.major = DLPACK_MAJOR;
        m->version.minor = DLPACK_MINOR;
        m->manager_ctx = handle;
        m->deleter = deleter_v;
        m->flags = (uint64_t)flags;
        t = &m->dl_tensor;
    }
    else {
        DLManagedTensor *m = &b->m.l;
        m->manager_ctx = handle;
        m->deleter = deleter_l;
        t = &m->dl_tensor;
    }
    t->data = (void *)(uintptr_t)ptr;
    t->device.device_type = (int32_t)dev_type;
    t->device.device_id = (int32_t)dev_id;
    t->ndim = (int32_t)ndim;
    t->dtype.code = code;
    t->dtype.bits = bits;
    t->dtype.lanes = 1;
    t->shape = sh;
    t->strides = st;
    t->byte_offset = 0;
    b->refs = 2;
    b->versioned = versioned;

    PyObject *capsule = PyCapsule_New(b, versioned ? NAME_V : NAME, capsule_destructor);
    if (capsule == NULL) {
        free(b);
        return NULL;
    }
    Py_INCREF(handle); /* only now: the capsule's destructor owns it from here on */
    return capsule;
}

/* ------------------------------------------------------------------ import: the owner */
typedef struct {
    PyObject_HEAD
    void *managed;
    void (*deleter)(void *);
} Owner;

/* Call the producer's deleter exactly once; GIL held; never raises. */
static void
owner_release(Owner *self)
{
    void *managed = self->managed;
    void (*deleter)(void *) = self->deleter;
    self->managed = NULL;
    self->deleter = NULL;
    if (managed == NULL || deleter == NULL) {
        return;
    }
    SavedError saved;
    save_error(&saved);
    if (!shutting_down()) { /* after shutdown starts: leak rather than call the producer */
        deleter(managed);
    }
    restore_error(&saved);
}

static void
owner_dealloc(PyObject *self)
{
    owner_release((Owner *)self);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *
owner_release_method(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    owner_release((Owner *)self);
    Py_RETURN_NONE;
}

static PyObject *
owner_get_ptr(PyObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr(((Owner *)self)->managed);
}

/* The handle our own export put in manager_ctx (a GPUArray, or the NumPy array of a host
 * copy), when the consumed capsule is one of ours and not released yet; else None. */
static PyObject *
owner_get_handle(PyObject *self, void *Py_UNUSED(closure))
{
    Owner *o = (Owner *)self;
    if (o->managed != NULL && (o->deleter == (void (*)(void *))deleter_v
                               || o->deleter == (void (*)(void *))deleter_l)) {
        Block *b = (Block *)o->managed;
        PyObject *handle = (PyObject *)(b->versioned ? b->m.v.manager_ctx : b->m.l.manager_ctx);
        if (handle != NULL) {
            return Py_NewRef(handle);
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef owner_methods[] = {
    {"release", owner_release_method, METH_NOARGS,
     "Call the producer's deleter now (once; later calls and the deallocation do nothing)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef owner_getset[] = {
    {"ptr", owner_get_ptr, NULL, "Address of the managed tensor (0 once released).", NULL},
    {"handle", owner_get_handle, NULL,
     "What a gpuarrays export keeps alive in the capsule (None for other producers).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject OwnerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "gpuarrays._dlpack.Owner",
    .tp_basicsize = sizeof(Owner),
    .tp_dealloc = owner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Owner of a consumed DLPack capsule: calls the producer's deleter when it dies.",
    .tp_methods = owner_methods,
    .tp_getset = owner_getset,
};

/* ------------------------------------------------------------------ import: take() */
static int
extent_add(int64_t n, int64_t s, int64_t *lo, int64_t *hi)
{
    /* (n - 1) * |s| must not overflow; addresses are < 2**63 anyway */
    int64_t a = s < 0 ? -s : s;
    if (s == INT64_MIN || (a != 0 && n - 1 > INT64_MAX / a)) {
        return -1;
    }
    int64_t d = (n - 1) * a;
    if (s < 0) {
        if (*lo < INT64_MIN + d) {
            return -1;
        }
        *lo -= d;
    }
    else {
        if (*hi > INT64_MAX - d) {
            return -1;
        }
        *hi += d;
    }
    return 0;
}

static PyObject *
dl_take(PyObject *module, PyObject *capsule)
{
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_SetString(PyExc_TypeError,
                        "expected a DLPack capsule named 'dltensor' or 'dltensor_versioned'");
        return NULL;
    }
    const char *name = PyCapsule_GetName(capsule);
    int versioned;
    if (name != NULL && strcmp(name, NAME_V) == 0) {
        versioned = 1;
    }
    else if (name != NULL && strcmp(name, NAME) == 0) {
        versioned = 0;
    }
    else if (name != NULL && (strcmp(name, USED_V) == 0 || strcmp(name, USED) == 0)) {
        PyErr_SetString(PyExc_BufferError,
                        "this DLPack capsule was already consumed; a capsule can be imported "
                        "only once (call __dlpack__ again for a new one)");
        return NULL;
    }
    else {
        PyErr_SetString(PyExc_TypeError,
                        "expected a DLPack capsule named 'dltensor' or 'dltensor_versioned'");
        return NULL;
    }
    void *managed = PyCapsule_GetPointer(capsule, name);
    if (managed == NULL) {
        return NULL;
    }
    Owner *owner = PyObject_New(Owner, &OwnerType);
    if (owner == NULL) {
        return NULL;
    }
    if (PyCapsule_SetName(capsule, versioned ? USED_V : USED) < 0) {
        owner->managed = NULL;
        owner->deleter = NULL;
        Py_DECREF(owner);
        return NULL;
    }
    /* From here on the deleter runs exactly once: when `owner` dies. */
    DLTensor *t;
    uint64_t flags = 0;
    owner->managed = managed;
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
        owner->deleter = (void (*)(void *))m->deleter;
        if (m->version.major != DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError,
                         "the producer returned a DLPack %u.%u capsule; gpuarrays reads "
                         "DLPack %d.x", (unsigned)m->version.major, (unsigned)m->version.minor,
                         DLPACK_MAJOR);
            goto fail;
        }
        flags = m->flags;
        t = &m->dl_tensor;
    }
    else {
        DLManagedTensor *m = (DLManagedTensor *)managed;
        owner->deleter = (void (*)(void *))m->deleter;
        t = &m->dl_tensor;
    }

    unsigned code = t->dtype.code, bits = t->dtype.bits, lanes = t->dtype.lanes;
    PyObject *dtype = NULL;
    if (lanes == 1 && code < N_CODES && bits % 8 == 0 && bits / 8 < N_BYTES) {
        dtype = g_import_dtypes[code][bits / 8];
    }
    if (dtype == NULL) {
        PyErr_Format(PyExc_BufferError,
                     "DLPack data type (code=%u, bits=%u, lanes=%u) has no GPUArray "
                     "equivalent; supported: bool, int/uint 8-64, float 16-64, complex 64/128 "
                     "with one lane", code, bits, lanes);
        goto fail;
    }
    int64_t itemsize = bits / 8;
    int32_t ndim = t->ndim;
    if (ndim < 0 || ndim > MAX_NDIM) {
        PyErr_Format(PyExc_BufferError, "DLPack tensor with an unsupported ndim (%d)", (int)ndim);
        goto fail;
    }
    if (ndim > 0 && t->shape == NULL) {
        PyErr_SetString(PyExc_BufferError, "DLPack tensor with ndim > 0 and no shape");
        goto fail;
    }
    int64_t lo = 0, hi = 0;
    int empty = 0;
    int64_t bstrides[MAX_NDIM];
    for (int32_t i = 0; i < ndim; i++) {
        if (t->shape[i] < 0) {
            PyObject *shape_repr = PyList_New(ndim);
            if (shape_repr != NULL) {
                for (int32_t j = 0; j < ndim; j++) {
                    PyList_SET_ITEM(shape_repr, j, PyLong_FromLongLong(t->shape[j]));
                }
                PyErr_Format(PyExc_BufferError, "DLPack tensor with a negative extent: shape %R",
                             shape_repr);
                Py_DECREF(shape_repr);
            }
            goto fail;
        }
        if (t->shape[i] == 0) {
            empty = 1;
        }
    }
    if (ndim > 0 && t->strides != NULL) {
        for (int32_t i = 0; i < ndim; i++) {
            int64_t s = t->strides[i];
            if ((s > 0 && s > INT64_MAX / itemsize) || (s < 0 && s < INT64_MIN / itemsize)) {
                PyErr_SetString(PyExc_BufferError, "DLPack tensor with a stride too large");
                goto fail;
            }
            bstrides[i] = s * itemsize;
        }
    }
    else { /* C order */
        int64_t step = itemsize;
        for (int32_t i = ndim - 1; i >= 0; i--) {
            bstrides[i] = step;
            int64_t n = t->shape[i] > 0 ? t->shape[i] : 1;
            if (step > INT64_MAX / n) {
                PyErr_SetString(PyExc_BufferError, "DLPack tensor too large");
                goto fail;
            }
            step *= n;
        }
    }
    if (!empty) {
        for (int32_t i = 0; i < ndim; i++) {
            if (extent_add(t->shape[i], bstrides[i], &lo, &hi) < 0) {
                PyErr_SetString(PyExc_BufferError, "DLPack tensor layout too large");
                goto fail;
            }
        }
        hi += itemsize;
    }
    PyObject *shape = PyTuple_New(ndim), *strides = PyTuple_New(ndim);
    if (shape == NULL || strides == NULL) {
        Py_XDECREF(shape);
        Py_XDECREF(strides);
        goto fail;
    }
    for (int32_t i = 0; i < ndim; i++) {
        PyObject *n = PyLong_FromLongLong(t->shape[i]);
        PyObject *s = PyLong_FromLongLong(bstrides[i]);
        if (n == NULL || s == NULL) {
            Py_XDECREF(n);
            Py_XDECREF(s);
            Py_DECREF(shape);
            Py_DECREF(strides);
            goto fail;
        }
        PyTuple_SET_ITEM(shape, i, n);
        PyTuple_SET_ITEM(strides, i, s);
    }
    uintptr_t ptr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    int writeable = !(versioned && (flags & FLAG_READ_ONLY));
    /* (owner, dtype, ptr, shape, strides, lo, nbytes, writeable, device_type, device_id) */
    PyObject *out = PyTuple_New(10);
    if (out == NULL) {
        Py_DECREF(shape);
        Py_DECREF(strides);
        goto fail;
    }
    PyTuple_SET_ITEM(out, 0, (PyObject *)owner);
    Py_INCREF(dtype);
    PyTuple_SET_ITEM(out, 1, dtype);
    PyTuple_SET_ITEM(out, 3, shape);
    PyTuple_SET_ITEM(out, 4, strides);
    PyObject *rest[5] = {
        PyLong_FromUnsignedLongLong((unsigned long long)ptr),
        PyLong_FromLongLong(lo),
        PyLong_FromLongLong(hi - lo),
        PyLong_FromLong(t->device.device_type),
        PyLong_FromLong(t->device.device_id),
    };
    PyTuple_SET_ITEM(out, 2, rest[0]);
    PyTuple_SET_ITEM(out, 5, rest[1]);
    PyTuple_SET_ITEM(out, 6, rest[2]);
    PyTuple_SET_ITEM(out, 7, PyBool_FromLong(writeable));
    PyTuple_SET_ITEM(out, 8, rest[3]);
    PyTuple_SET_ITEM(out, 9, rest[4]);
    for (int i = 0; i < 5; i++) {
        if (rest[i] == NULL) {
            Py_DECREF(out); /* drops the owner too: the producer's deleter runs */
            return NULL;
        }
    }
    return out;

fail:
    Py_DECREF(owner); /* calls the producer's deleter (the error stays pending) */
    return NULL;
}

/* ------------------------------------------------------------------ setup */
/* setup(state, export_codes: {dtype: code | bits << 8}, import_dtypes: {(code, bits): dtype}) */
static PyObject *
dl_setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyDict_Check(args[1]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "setup(state, export_codes: dict, import_dtypes: dict)");
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    PyObject *table[N_CODES][N_BYTES] = {{NULL}};
    while (PyDict_Next(args[2], &pos, &key, &value)) {
        int code, bits;
        if (!PyArg_ParseTuple(key, "ii", &code, &bits)) {
            return NULL;
        }
        if (code < 0 || code >= N_CODES || bits <= 0 || bits % 8 || bits / 8 >= N_BYTES) {
            PyErr_Format(PyExc_ValueError, "unsupported DLPack type (%d, %d)", code, bits);
            return NULL;
        }
        table[code][bits / 8] = value;
    }
    for (int c = 0; c < N_CODES; c++) {
        for (int b = 0; b < N_BYTES; b++) {
            Py_XINCREF(table[c][b]);
            Py_XSETREF(g_import_dtypes[c][b], table[c][b]);
        }
    }
    Py_INCREF(args[0]);
    Py_XSETREF(g_state, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(g_export_codes, args[1]);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))dl_setup, METH_FASTCALL,
     "setup(state, export_codes, import_dtypes): the tables and the shutdown switch."},
    {"capsule", (PyCFunction)(void (*)(void))dl_capsule, METH_FASTCALL,
     "capsule(handle, ptr, shape, strides, dtype, versioned, flags, device_type, device_id)"
     " -> a DLPack capsule owning a reference to handle until the consumer's deleter runs."},
    {"take", dl_take, METH_O,
     "take(capsule) -> (owner, dtype, ptr, shape, strides, lo, nbytes, writeable, "
     "device_type, device_id); the capsule is renamed used_dltensor[_versioned]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gpuarrays._dlpack",
    .m_doc = "DLPack capsules built and parsed in C (see gpuarrays.interop.dlpack).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__dlpack(void)
{
    if (PyType_Ready(&OwnerType) < 0) {
        return NULL;
    }
    g_str_shutting = PyUnicode_InternFromString("shutting_down");
    if (g_str_shutting == NULL) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    Py_INCREF(&OwnerType);
    if (PyModule_AddObject(m, "Owner", (PyObject *)&OwnerType) < 0) {
        Py_DECREF(&OwnerType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "VERSION_MAJOR", DLPACK_MAJOR) < 0
            || PyModule_AddIntConstant(m, "VERSION_MINOR", DLPACK_MINOR) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
