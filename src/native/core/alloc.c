/* alloc.c -- the allocation path: _core.empty() (ga.empty), _core.new_array()
 * and the hot path of alloc.new_storage (docs/design.md, "Performance").
 *
 * empty() resolves the device, shape and dtype (remembering the last answers in
 * ga_memo, defined here), new_array() computes the strides and the size, and the
 * storage comes from the current cache, else the device's pool; anything unusual
 * (zero size, recording, sizes past 2**63, foreign managers) goes to Python.  The
 * resolvers of empty()'s arguments (ga_resolve_device, _shape, _dtype) serve fill.c's
 * creation functions too.
 *
 * May call: storage.c (ga_storage_claim, ga_storage_give_back), array.c
 * (ga_array_make), pool.c (ga_pool_new_storage), cache.c (ga_cache_storage).
 */
#include "core.h"

struct ga_memo ga_memo;

/* A fresh storage of `nbytes` on `device`: alloc.new_storage's hot path. */
static PyObject *storage_for(PyObject *device, PyObject *kind, Py_ssize_t nbytes,
                             PyObject *nbytes_obj)
{
    if (nbytes == 0 || PyList_GET_SIZE(ga_state->recorders) || ga_cache_var == NULL)
        return PyObject_CallFunctionObjArgs(ga_slow_new_storage, device, kind, nbytes_obj, NULL);
    PyObject *cache, *st;
    if (PyContextVar_Get(ga_cache_var, Py_None, &cache) < 0)
        return NULL;
    if (cache != Py_None) {
        if (PyObject_TypeCheck(cache, &ga_CacheType))
            st = ga_cache_storage(cache, device, kind, nbytes_obj);
        else
            st = PyObject_CallMethodObjArgs(cache, ga_str_storage, device, kind, nbytes_obj, NULL);
        Py_DECREF(cache);
        return st;
    }
    Py_DECREF(cache);
    PyObject *mgr;
    if (device == ga_memo.mgr_dev) {
        mgr = Py_NewRef(ga_memo.mgr);
    } else {
        if ((mgr = PyObject_GetAttr(device, ga_str_memory)) == NULL)
            return NULL;
        ga_memo_set(&ga_memo.mgr, mgr);
        ga_memo_set(&ga_memo.mgr_dev, device);
    }
    if (PyObject_TypeCheck(mgr, &ga_PoolType))
        st = ga_pool_new_storage(mgr, kind, nbytes, nbytes_obj);
    else
        st = PyObject_CallMethodObjArgs(mgr, ga_str_new_storage, kind, nbytes_obj, NULL);
    Py_DECREF(mgr);
    return st;
}

/* new_array(shape, dtype, device, kind): a C-contiguous, uninitialised array. */
PyObject *ga_core_new_array(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "new_array(shape, dtype, device, kind)");
        return NULL;
    }
    PyObject *shape = args[0], *dtype = args[1], *device = args[2], *kind = args[3];
    if (!PyTuple_CheckExact(shape)) {
        PyErr_SetString(PyExc_TypeError, "new_array needs a normalised shape tuple");
        return NULL;
    }
    Py_ssize_t itemsize;
    if (dtype == ga_memo.item_dtype) {
        itemsize = ga_memo.itemsize;
    } else {
        PyObject *item = PyObject_GetAttr(dtype, ga_str_itemsize);
        if (item == NULL)
            return NULL;
        itemsize = PyLong_AsSsize_t(item);
        Py_DECREF(item);
        if (itemsize == -1 && PyErr_Occurred())
            return NULL;
        PyObject *strides1 = Py_BuildValue("(n)", itemsize);
        if (strides1 == NULL)
            return NULL;
        ga_memo_set(&ga_memo.item_dtype, dtype);
        ga_memo.itemsize = itemsize;
        Py_XSETREF(ga_memo.strides1, strides1);
    }
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    PyObject *strides;
    Py_ssize_t nbytes = itemsize;
    int overflow = 0;
    if (ndim == 1) { /* the common case: the remembered (itemsize,) */
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 0));
        if (n < 0) { /* past a Py_ssize_t, or negative: Python says which */
            if (PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                    return NULL;
                PyErr_Clear();
            }
            overflow = 1;
        }
        overflow |= __builtin_mul_overflow(nbytes, n, &nbytes);
        strides = Py_NewRef(ga_memo.strides1);
    } else if ((strides = PyTuple_New(ndim)) == NULL) {
        return NULL;
    }
    Py_ssize_t step = itemsize;
    for (Py_ssize_t i = ndim - 1; ndim != 1 && i >= 0; i--) {
        Py_ssize_t n = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (n < 0) {
            if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_OverflowError)) {
                Py_DECREF(strides);
                return NULL;
            }
            PyErr_Clear();
            overflow = 1;
            break;
        }
        PyObject *s = PyLong_FromSsize_t(step);
        if (s == NULL) {
            Py_DECREF(strides);
            return NULL;
        }
        PyTuple_SET_ITEM(strides, i, s);
        overflow |= __builtin_mul_overflow(nbytes, n, &nbytes);
        if (n > 1)
            overflow |= __builtin_mul_overflow(step, n, &step);
    }
    if (overflow) { /* sizes past what a Py_ssize_t holds: Python's integers do it */
        Py_DECREF(strides);
        return PyObject_Vectorcall(ga_slow_new_array, args, 4, NULL);
    }
    PyObject *nbytes_obj = ga_memo_int(nbytes, &ga_memo.nbytes, &ga_memo.nbytes_obj);
    if (nbytes_obj == NULL) {
        Py_DECREF(strides);
        return NULL;
    }
    PyObject *st = storage_for(device, kind, nbytes, nbytes_obj);
    Py_DECREF(nbytes_obj);
    if (st == NULL) {
        Py_DECREF(strides);
        return NULL;
    }
    PyObject *a = NULL;
    if (!PyObject_TypeCheck(st, &ga_StorageType))
        PyErr_SetString(PyExc_TypeError, "an allocator returned something not a Storage");
    else
        a = ga_array_make((StorageObject *)st, shape, strides, ga_zero, dtype, 1, Py_True);
    Py_DECREF(strides);
    if (a == NULL && PyObject_TypeCheck(st, &ga_StorageType)) {
        /* never lose the memory: a storage without handles gives it back */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        StorageObject *s = (StorageObject *)st;
        if (ga_storage_claim(s, ga_str_local) && ga_storage_give_back(s) < 0)
            PyErr_Clear();
        PyErr_Restore(et, ev, tb);
    }
    Py_DECREF(st);
    return a;
}

/* The device an allocation goes to: `device`, else the current one, else the default. */
PyObject *ga_resolve_device(PyObject *device)
{
    if (device != Py_None) {
        if ((PyObject *)Py_TYPE(device) == ga_device_type)
            return Py_NewRef(device);
        return PyObject_CallOneArg(ga_get_device, device);
    }
    PyObject *dev;
    if (PyContextVar_Get(ga_device_var, Py_None, &dev) < 0)
        return NULL;
    if (dev != Py_None)
        return dev;
    Py_DECREF(dev);
    if (PyList_GET_SIZE(ga_default_devices))
        return Py_NewRef(PyList_GET_ITEM(ga_default_devices, 0));
    return PyObject_CallOneArg(ga_get_device, Py_None);
}

/* The shape as a tuple of non-negative ints (layout.normalize_shape unless trivial). */
PyObject *ga_resolve_shape(PyObject *shape)
{
    if (PyLong_CheckExact(shape)) {
        Py_ssize_t n = PyLong_AsSsize_t(shape);
        if (n >= 0)
            return PyTuple_Pack(1, shape);
        PyErr_Clear();
    } else if (PyTuple_CheckExact(shape)) {
        Py_ssize_t i, ndim = PyTuple_GET_SIZE(shape);
        for (i = 0; i < ndim; i++) {
            PyObject *n = PyTuple_GET_ITEM(shape, i);
            if (!PyLong_CheckExact(n) || PyLong_AsSsize_t(n) < 0) {
                PyErr_Clear(); /* negative or huge: normalize_shape explains or copes */
                break;
            }
        }
        if (i == ndim)
            return Py_NewRef(shape);
    }
    return PyObject_CallOneArg(ga_normalize_shape, shape);
}

/* The device's checked dtype for `dtype` (its cache, else Device.dtype_of). */
PyObject *ga_resolve_dtype(PyObject *dev, PyObject *dtype)
{
    if (dev == ga_memo.dev && dtype == ga_memo.dtype_arg)
        return Py_NewRef(ga_memo.dt);
    PyObject *accepts = PyObject_GetAttr(dev, ga_str_accepts);
    if (accepts == NULL)
        return NULL;
    PyObject *dt = PyDict_CheckExact(accepts) ? PyDict_GetItemWithError(accepts, dtype) : NULL;
    Py_XINCREF(dt);
    Py_DECREF(accepts);
    if (dt == NULL) {
        PyErr_Clear(); /* unhashable: dtype_of explains or copes */
        if ((dt = PyObject_CallMethodOneArg(dev, ga_str_dtype_of, dtype)) == NULL)
            return NULL;
        if (PyObject_Hash(dtype) == -1) { /* a list describing a structured dtype: it */
            PyErr_Clear();                /* may change, so never remember it */
            return dt;
        }
    }
    ga_memo_set(&ga_memo.dt, dt);
    ga_memo_set(&ga_memo.dev, dev);
    ga_memo_set(&ga_memo.dtype_arg, dtype);
    return dt;
}

PyObject *ga_core_empty(PyObject *mod, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    PyObject *shape = nargs > 0 ? args[0] : NULL, *dtype = nargs > 1 ? args[1] : NULL;
    PyObject *device = Py_None, *kind = ga_str_device;
    if (nargs > 2) {
        PyErr_Format(PyExc_TypeError, "empty() takes from 1 to 2 positional arguments but %zd "
                     "were given (device= and kind= are keywords)", nargs);
        return NULL;
    }
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        PyObject **slot = NULL;
        if (PyUnicode_CompareWithASCIIString(name, "device") == 0)
            slot = &device;
        else if (PyUnicode_CompareWithASCIIString(name, "kind") == 0)
            slot = &kind;
        else if (PyUnicode_CompareWithASCIIString(name, "dtype") == 0 && dtype == NULL)
            slot = &dtype;
        else if (PyUnicode_CompareWithASCIIString(name, "shape") == 0 && shape == NULL)
            slot = &shape;
        if (slot == NULL) {
            PyErr_Format(PyExc_TypeError, "empty() got an unexpected or repeated keyword "
                         "argument %R", name);
            return NULL;
        }
        *slot = value;
    }
    if (shape == NULL) {
        PyErr_SetString(PyExc_TypeError, "empty() missing required argument 'shape'");
        return NULL;
    }
    if (dtype == NULL)
        dtype = ga_float64;
    PyObject *dev = ga_resolve_device(device);
    if (dev == NULL)
        return NULL;
    PyObject *dims = ga_resolve_shape(shape);
    PyObject *dt = dims ? ga_resolve_dtype(dev, dtype) : NULL;
    PyObject *a = NULL;
    if (dt != NULL) {
        PyObject *call[4] = {dims, dt, dev, kind};
        a = ga_core_new_array(mod, call, 4);
    }
    Py_XDECREF(dt);
    Py_XDECREF(dims);
    Py_DECREF(dev);
    return a;
}
