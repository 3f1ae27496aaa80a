"""Fork: a forked child never hangs or crashes on a device the parent initialised.

Each device back-end runs in its own subprocess, which forks; a time limit kills the
whole process group, so a hang fails the test and never blocks the run
(docs/design.md, "Reset, fork and exit").  In the child, a device back-end the parent
initialised raises ``BackendError`` naming the ``spawn``/``forkserver`` remedy, the
arrays inherited from the parent are dropped without a platform call, and the cpu
back-end keeps working.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

SCRIPT = r"""
import gc, os, sys
import numpy as np
import faults
import gpuarrays as ga

spec = sys.argv[1]
dev = ga.get_device(spec)
a = ga.full((100,), 3.0, device=dev)
view = a[10:]
host = ga.asarray(np.arange(10.0), device="cpu:0")
stream = ga.Stream(dev)  # a stream with work on it: the child may not use it (docs/streams.md)
with stream:
    on_stream = a + 1
pid = os.fork()
if pid == 0:
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    try:
        if dev.backend == "cpu":
            check(float(a.get()[0]) == 3.0, "an inherited cpu array reads its data")
            with stream:
                check(float((a + 1).get()[0]) == 4.0, "a cpu stream keeps working")
            del a, view, stream, on_stream
            gc.collect()
        else:
            for call in (lambda: ga.full((4,), 1.0, device=dev), lambda: ga.synchronize(dev)):
                try:
                    call()
                    check(False, "a device call in the child raises BackendError")
                except ga.BackendError as e:
                    check("os.fork()" in str(e) and "'spawn'" in str(e)
                          and "'forkserver'" in str(e), f"the remedy is named: {e}")
            try:
                view.get()
                check(False, "an inherited array raises on use")
            except ga.DeviceResetError as e:
                check("os.fork()" in str(e), f"the error says why: {e}")
            for call in (stream.synchronize, stream.record, stream.__enter__):
                try:
                    call()
                    check(False, "a stream of the parent raises in the child")
                except ga.DeviceResetError as e:
                    check("fork" in str(e), f"the stream's error says why: {e}")
            with faults.inject(dev) as fb:
                del a, view, stream, on_stream
                gc.collect()
                check(sum(fb.calls.values()) == 0, f"dropped without platform calls: {fb.calls}")
        check(host.get().tolist() == list(np.arange(10.0)), "cpu arrays keep working")
        b = ga.full((1000,), 2.0, device="cpu:0")
        check(float(b.get().sum()) == 2000.0, "cpu allocations keep working")
        b.free()
    except BaseException as e:
        failures.append(f"unexpected {e!r}")
    for f in failures:
        print("child:", f, file=sys.stderr)
    sys.stderr.flush()
    os._exit(1 if failures else 0)
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
if code != 0:
    sys.exit(f"the child exited with {code}")
if float(view.get()[0]) != 3.0 or float(ga.full((3,), 1.0, device=dev).get()[0]) != 1.0:
    sys.exit("the parent's device stopped working")
with stream:
    if float(on_stream.get()[0]) != 4.0 or float((a * 2).get()[0]) != 6.0:
        sys.exit("the parent's stream stopped working")
print("ok")
"""

LIMIT_S = 120


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_fork_with_a_live_device_never_hangs_and_names_the_remedy(device):
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "src")
    env["PYTHONPATH"] = os.pathsep.join([src, here, env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(device)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the forked child too
        out, err = proc.communicate()
        pytest.fail(f"fork on {device} hung for {LIMIT_S} s:\n{out}\n{err}")
    assert proc.returncode == 0 and out.strip().endswith("ok"), f"{out}\n{err}"


BUSY_SCRIPT = r"""
import os, sys, threading
import numpy as np
import gpuarrays as ga

dev = ga.get_device("cpu:0")
x = ga.asarray(np.ones(1 << 22, dtype=np.float32), device=dev)
stop = threading.Event()

def busy():  # compute calls, back to back, in another thread: each holds the gate
    while not stop.is_set():
        ga.sort(x)

worker = threading.Thread(target=busy)
worker.start()
held = 0
for _ in range(int(sys.argv[1])):
    held += dev.gate._readers > 0
    pid = os.fork()
    if pid == 0:
        try:
            ga.device_reset(dev)  # hung forever on a hold inherited from the busy thread
            y = ga.asarray(np.arange(5.0), device=dev)
            ok = ga.sum(y * 2).get() == 20.0 and dev.gate._readers == 0
        except BaseException as e:
            print("child:", repr(e), file=sys.stderr)
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"a child failed: {status}")
stop.set()
worker.join()
print("ok", held)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_fork_during_a_compute_call_in_another_thread_leaves_a_clean_gate():
    """The child of a fork taken while another thread is inside a compute call (holding the
    device's gate) starts with a clean gate: device_reset there does not wait forever."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY_SCRIPT, "8"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"a forked child hung in device_reset:\n{out}\n{err}")
    assert proc.returncode == 0, f"{out}\n{err}"
    word, held = out.split()
    assert word == "ok" and int(held) >= 1, out  # at least one fork came during a hold
