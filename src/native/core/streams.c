/* streams.c -- each thread's current stream of each device, and the record of the streams
 * a storage was used on (docs/streams.md, "Memory is stream-ordered without user calls").
 *
 *   _core.set_thread_stream(device, stream)   (stream None: the default again)
 *   _core.thread_stream(device) -> the stream, or None for the default
 *   _core.add_streams(delta) -> live non-default streams of every device, counted
 *
 * The table is thread-local and small (a thread is rarely inside streams of more than a
 * few devices at once); it holds strong references, replaced on every set.  An empty
 * table -- every thread that never entered a stream -- costs the hot paths one
 * thread-local read:
 *   - ga_storage_record: a storage allocated or held for work while its device has a
 *     current stream in this thread remembers that stream (st->streams, a list without
 *     repeats; None for the default stream, recorded only while its device has streams);
 *     its release is then ordered after those streams' work (pool.py);
 *   - ga_in_stream: the compiled enqueues (launch.c, fill.c) hand the work to their
 *     Python paths, which enqueue on the current stream (or refuse a stale one), while
 *     the thread is inside any stream: they know their queue, not their device.
 *
 * May call: nothing of the other files (reads PoolObject.streams of a storage's home).
 */
#include "core.h"

#define MAX_CURRENT 8 /* devices with a current stream in one thread */

typedef struct {
    PyObject *device, *stream; /* strong */
} Current;

static _Thread_local Current current[MAX_CURRENT];
_Thread_local int ga_current_count;
Py_ssize_t ga_streams_alive; /* live non-default streams of every device (streams.py) */

/* The calling thread's current stream of `device` (borrowed), or NULL. */
PyObject *ga_thread_stream(PyObject *device)
{
    for (int i = 0; i < ga_current_count; i++)
        if (current[i].device == device)
            return current[i].stream;
    return NULL;
}

int ga_storage_record_slow(StorageObject *st)
{
    PyObject *stream = ga_current_count ? ga_thread_stream(st->device) : NULL;
    if (stream == NULL) {
        /* the default stream: recorded (as None) only while the device has streams, so a
         * block used on one stream alone can be reused by it with no event (pool.py) */
        if (st->home == NULL || !PyObject_TypeCheck(st->home, &ga_PoolType)
                || ((PoolObject *)st->home)->streams <= 0)
            return 0;
        stream = Py_None;
    }
    if (st->streams == NULL) {
        if ((st->streams = PyList_New(1)) == NULL)
            return -1;
        PyList_SET_ITEM(st->streams, 0, Py_NewRef(stream));
        return 0;
    }
    Py_ssize_t n = PyList_GET_SIZE(st->streams);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyList_GET_ITEM(st->streams, i) == stream)
            return 0;
    return PyList_Append(st->streams, stream);
}

PyObject *ga_core_set_thread_stream(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_thread_stream(device, stream) takes 2 arguments");
        return NULL;
    }
    PyObject *device = args[0], *stream = args[1];
    int i = 0;
    while (i < ga_current_count && current[i].device != device)
        i++;
    if (stream == Py_None) {
        if (i < ga_current_count) { /* the last entry takes its place */
            Current gone = current[i];
            current[i] = current[--ga_current_count];
            current[ga_current_count] = (Current){NULL, NULL};
            Py_DECREF(gone.device);
            Py_DECREF(gone.stream);
        }
        Py_RETURN_NONE;
    }
    if (i == ga_current_count) {
        if (ga_current_count == MAX_CURRENT) {
            PyErr_Format(PyExc_RuntimeError, "a thread can be inside streams of at most %d "
                         "devices at once; leave one `with stream:` block first", MAX_CURRENT);
            return NULL;
        }
        current[i].device = Py_NewRef(device);
        current[i].stream = NULL;
        ga_current_count++;
    }
    PyObject *old = current[i].stream;
    current[i].stream = Py_NewRef(stream);
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

PyObject *ga_core_add_streams(PyObject *mod, PyObject *delta)
{
    Py_ssize_t d = PyLong_AsSsize_t(delta);
    if (d == -1 && PyErr_Occurred())
        return NULL;
    ga_streams_alive += d;
    if (ga_streams_alive < 0)
        ga_streams_alive = 0;
    return PyLong_FromSsize_t(ga_streams_alive);
}

PyObject *ga_core_thread_stream(PyObject *mod, PyObject *device)
{
    PyObject *stream = ga_thread_stream(device);
    return Py_NewRef(stream ? stream : Py_None);
}
