/* module.c -- the module gpuarrays._core: its function table, configure() (the
 * Python classes and hooks the hot paths use), PyInit__core, and the definitions
 * of the globals core.h declares (all but ga_memo, which alloc.c defines).
 *
 * May call: every other core file (the types, ga_core_make, ga_core_new_array,
 * ga_core_empty, the init functions).
 */
#include "core.h"

/* configured by the Python modules at import (configure()) */
PyTypeObject *ga_storage_type;
PyTypeObject *ga_array_type;
PyObject *ga_cache_var;
PyObject *ga_slow_new_storage;
PyObject *ga_slow_new_array;
PyObject *ga_warning;
PyObject *ga_device_var;
PyObject *ga_default_devices;
PyObject *ga_get_device;
PyObject *ga_device_type;
PyObject *ga_normalize_shape;
PyObject *ga_float64;
PyObject *ga_make_view;
PyObject *ga_plans;
PyObject *ga_apply_slow;
PyObject *ga_errstate_var;
PyObject *ga_errstate_quiet;
PyObject *ga_ops;
PyObject *ga_operators_slow;

/* made at init */
StateObject *ga_state;
PyObject *ga_zero;
PyObject *ga_str_give_ordered;
PyObject *ga_str_local, *ga_str_forced, *ga_str_release_storage, *ga_str_take_block,
    *ga_str_note_taken, *ga_str_note_put, *ga_str_apply_pending, *ga_str_bad_kind,
    *ga_str_memory, *ga_str_itemsize, *ga_str_note_reuse, *ga_str_storage,
    *ga_str_new_storage, *ga_str_accepts, *ga_str_dtype_of, *ga_str_device;

static int set_global(PyObject **slot, PyObject *value)
{
    Py_XINCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static PyObject *core_configure(PyObject *mod, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args)) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments only");
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (kw && PyDict_Next(kw, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (name == NULL)
            return NULL;
        if (strcmp(name, "storage_type") == 0 || strcmp(name, "array_type") == 0) {
            PyTypeObject *base = name[0] == 's' ? &ga_StorageType : &ga_ArrayType;
            if (!PyType_Check(value) || !PyType_IsSubtype((PyTypeObject *)value, base)) {
                PyErr_Format(PyExc_TypeError, "%s must be a subclass of %s", name,
                             base->tp_name);
                return NULL;
            }
            set_global((PyObject **)(name[0] == 's' ? &ga_storage_type : &ga_array_type), value);
        } else if (strcmp(name, "cache_var") == 0) {
            if (!PyContextVar_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "cache_var must be a ContextVar");
                return NULL;
            }
            set_global(&ga_cache_var, value);
        } else if (strcmp(name, "slow_new_storage") == 0) {
            set_global(&ga_slow_new_storage, value);
        } else if (strcmp(name, "slow_new_array") == 0) {
            set_global(&ga_slow_new_array, value);
        } else if (strcmp(name, "warning") == 0) {
            set_global(&ga_warning, value);
        } else if (strcmp(name, "device_var") == 0) {
            if (!PyContextVar_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "device_var must be a ContextVar");
                return NULL;
            }
            set_global(&ga_device_var, value);
        } else if (strcmp(name, "default_devices") == 0) {
            if (!PyList_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "default_devices must be a list");
                return NULL;
            }
            set_global(&ga_default_devices, value);
        } else if (strcmp(name, "get_device") == 0) {
            set_global(&ga_get_device, value);
        } else if (strcmp(name, "device_type") == 0) {
            set_global(&ga_device_type, value);
        } else if (strcmp(name, "normalize_shape") == 0) {
            set_global(&ga_normalize_shape, value);
        } else if (strcmp(name, "float64") == 0) {
            set_global(&ga_float64, value);
        } else if (strcmp(name, "make_view") == 0) {
            set_global(&ga_make_view, value);
        } else if (strcmp(name, "plans") == 0) {
            if (!PyDict_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "plans must be a dict");
                return NULL;
            }
            set_global(&ga_plans, value);
        } else if (strcmp(name, "ops") == 0) {
            if (!PyDict_CheckExact(value)) {
                PyErr_SetString(PyExc_TypeError, "ops must be a dict");
                return NULL;
            }
            set_global(&ga_ops, value);
        } else if (strcmp(name, "operators_slow") == 0) {
            /* (binary, reflected, inplace, unary): operators.py, for other operands */
            if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 4) {
                PyErr_SetString(PyExc_TypeError, "operators_slow must be a 4-tuple");
                return NULL;
            }
            set_global(&ga_operators_slow, value);
        } else if (strcmp(name, "apply_slow") == 0) {
            set_global(&ga_apply_slow, value);
        } else if (strcmp(name, "errstate") == 0) {
            /* (ContextVar, value) or None: NumPy's floating-point error state */
            if (value == Py_None) {
                Py_CLEAR(ga_errstate_var);
                Py_CLEAR(ga_errstate_quiet);
                continue;
            }
            if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 2
                    || !PyContextVar_CheckExact(PyTuple_GET_ITEM(value, 0))) {
                PyErr_SetString(PyExc_TypeError, "errstate must be (ContextVar, value) or None");
                return NULL;
            }
            set_global(&ga_errstate_quiet, PyTuple_GET_ITEM(value, 1));
            set_global(&ga_errstate_var, PyTuple_GET_ITEM(value, 0));
        } else {
            PyErr_Format(PyExc_TypeError, "configure() got an unexpected keyword %R", key);
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

/* Whether seq is a list or tuple of Python bool, int, float and complex objects only (their
   exact types): asarray's check that a sequence holds no GPUArray, a type test per item
   where the Python form built a set of types (2 us for 100 floats). */
static PyObject *
ga_core_scalars_only(PyObject *Py_UNUSED(module), PyObject *seq)
{
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq))
        Py_RETURN_FALSE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTypeObject *t = Py_TYPE(items[i]);
        if (t != &PyFloat_Type && t != &PyLong_Type && t != &PyBool_Type
                && t != &PyComplex_Type)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef core_functions[] = {
    {"scalars_only", (PyCFunction)ga_core_scalars_only, METH_O,
     "scalars_only(seq) -> whether seq is a list or tuple of Python bool, int, float and "
     "complex objects only (exact types; anything else, nested sequences included: False)."},
    {"make", (PyCFunction)(void (*)(void))ga_core_make, METH_FASTCALL,
     "make(storage, shape, strides, offset, dtype, writeable=True, contiguous=None) -> "
     "GPUArray taking one handle on storage."},
    {"new_array", (PyCFunction)(void (*)(void))ga_core_new_array, METH_FASTCALL,
     "new_array(shape, dtype, device, kind) -> a C-contiguous, uninitialised GPUArray "
     "(shape and dtype already normalised)."},
    {"empty", (PyCFunction)(void (*)(void))ga_core_empty, METH_FASTCALL | METH_KEYWORDS,
     "empty($module, shape, dtype=None, *, device=None, kind='device')\n--\n\n"
     "An uninitialised C-contiguous array.\n\n"
     "``shape``: int or tuple of non-negative ints; ``dtype``: anything ``numpy.dtype`` "
     "takes (None: the device's default floating type -- float64, or float32 on a device "
     "without float64); ``device``: a Device, a name such as ``'cpu:0'`` or "
     "None (the current device); ``kind``: ``'device'``, ``'host'`` or ``'unified'``.  "
     "Raises ``ValueError``/``TypeError`` for bad shapes, kinds and devices, "
     "``UnsupportedDTypeError`` for bad dtypes, ``OutOfMemoryError`` when memory cannot be "
     "found.  Compiled: a warm-pool or cache hit never leaves C."},
    {"apply", (PyCFunction)(void (*)(void))ga_core_apply, METH_FASTCALL | METH_KEYWORDS,
     "apply(op, args, out=None) -> the result of the elementwise operation op on args "
     "(gpuarrays arrays and Python scalars), written into out when given.  The common case "
     "runs compiled; everything else, every refusal included, in dispatch.apply_slow."},
    {"host_view", (PyCFunction)ga_core_host_view, METH_O,
     "host_view(a) -> a writeable NumPy array over the memory of a (live, on the cpu "
     "back-end), remembered by (address, shape, strides, dtype)."},
    {"set_thread_stream", (PyCFunction)(void (*)(void))ga_core_set_thread_stream, METH_FASTCALL,
     "set_thread_stream(device, stream): `stream` is the calling thread's current stream "
     "of `device` (None: its default stream again)."},
    {"add_streams", (PyCFunction)ga_core_add_streams, METH_O,
     "add_streams(delta) -> the live non-default streams of every device, after adding "
     "delta (streams.py counts them; while any, storages record default-stream use)."},
    {"thread_stream", (PyCFunction)ga_core_thread_stream, METH_O,
     "thread_stream(device) -> the calling thread's current stream of device, or None."},
    {"configure", (PyCFunction)(void (*)(void))core_configure, METH_VARARGS | METH_KEYWORDS,
     "configure(**kw): the Python classes and hooks the hot paths use."},
    {NULL}};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "gpuarrays._core",
    "The compiled hot paths of gpuarrays: storage handles, array lifetime, pool and cache "
    "hits (see the source's header for what lives here and why).",
    -1, core_functions};

#define INTERN(var, text)                                 \
    if ((var = PyUnicode_InternFromString(text)) == NULL) \
        return NULL;

PyMODINIT_FUNC PyInit__core(void)
{
    INTERN(ga_str_local, "local");
    INTERN(ga_str_forced, "forced");
    INTERN(ga_str_release_storage, "release_storage");
    INTERN(ga_str_take_block, "take_block");
    INTERN(ga_str_give_ordered, "give_ordered");
    INTERN(ga_str_note_taken, "_note_taken");
    INTERN(ga_str_note_put, "_note_put");
    INTERN(ga_str_apply_pending, "_apply_pending_locked");
    INTERN(ga_str_bad_kind, "_bad_kind");
    INTERN(ga_str_memory, "memory");
    INTERN(ga_str_itemsize, "itemsize");
    INTERN(ga_str_note_reuse, "_note_reuse");
    INTERN(ga_str_storage, "storage");
    INTERN(ga_str_new_storage, "new_storage");
    INTERN(ga_str_accepts, "_accepts");
    INTERN(ga_str_dtype_of, "dtype_of");
    INTERN(ga_str_device, "device");
    if ((ga_zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    PyTypeObject *types[] = {&ga_LockType, &ga_StateType, &ga_EpochType, &ga_StorageType,
                             &ga_ArrayType, &ga_PoolType, &ga_CacheType, &ga_GateType,
                             &ga_PlanType, &ga_WorkingType, &ga_WriterType, &ga_FillerType,
                             &ga_UploaderType, &ga_FunctionType};
    const char *names[] = {"Lock", "State", "Epoch", "Storage", "Array", "Pool", "Cache",
                           "Gate", "Plan", "Working", "Writer", "Filler", "Uploader",
                           "Function"};
    PyObject *m = PyModule_Create(&core_module);
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0 || PyModule_AddObjectRef(m, names[i],
                                                                (PyObject *)types[i]) < 0)
            goto fail;
    }
    if (ga_gate_init() < 0 || ga_working_init() < 0 || ga_compute_init(m) < 0
            || ga_launch_init(m) < 0 || ga_fill_init() < 0)
        goto fail;
    ga_state = PyObject_New(StateObject, &ga_StateType);
    if (ga_state == NULL)
        goto fail;
    ga_state->shutting_down = 0;
    ga_state->recorders = PyList_New(0);
    ga_state->history = Py_NewRef(Py_None);
    if (ga_state->recorders == NULL
            || PyModule_AddObjectRef(m, "state", (PyObject *)ga_state) < 0)
        goto fail;
    if (PyModule_AddIntConstant(m, "GRANULARITY", GRANULARITY) < 0
            || PyModule_AddObjectRef(m, "FREED_LOCAL", ga_str_local) < 0
            || PyModule_AddObjectRef(m, "FREED_FORCED", ga_str_forced) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
