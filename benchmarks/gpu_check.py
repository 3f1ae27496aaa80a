"""GPU verification sections for benchmarks/gpu_check.sh (one section per process).

``python benchmarks/gpu_check.py SECTION OUTDIR`` runs one section on cuda:0 and
writes ``OUTDIR/SECTION.json``: ``{"section", "status", "rows": [[check, result,
detail], ...], "error"}``.  ``python benchmarks/gpu_check.py table OUTDIR``
prints the summary table of every section found.  Each check is independent:
a failing check is recorded and the section goes on.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time
import traceback


class Section:
    def __init__(self, name: str, out: str) -> None:
        self.name, self.out = name, out
        self.rows: list[list[str]] = []
        self.failed = False

    def check(self, label: str, fn) -> object:
        """Run ``fn()``; record "ok"/its string result, or "FAIL" with the error."""
        try:
            result = fn()
        except BaseException as e:  # recorded, never fatal for the other checks
            if isinstance(e, KeyboardInterrupt):
                raise
            self.failed = True
            detail = f"{type(e).__name__}: {e}"[:300]
            self.rows.append([label, "FAIL", detail])
            with open(os.path.join(self.out, f"{self.name}.traceback.txt"), "a") as f:
                f.write(f"--- {label}\n{traceback.format_exc()}\n")
            return None
        if isinstance(result, tuple):
            self.rows.append([label, str(result[0]), str(result[1])])
        else:
            self.rows.append([label, "ok" if result is None else str(result), ""])
        return result

    def write(self, error: str | None = None) -> None:
        status = "fail" if (self.failed or error) else "ok"
        with open(os.path.join(self.out, f"{self.name}.json"), "w") as f:
            json.dump({"section": self.name, "status": status, "rows": self.rows,
                       "error": error}, f, indent=1)


def _median_us(fn, repeat: int = 2000, warmup: int = 200) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(repeat):
            fn()
        samples.append((time.perf_counter() - t) / repeat * 1e6)
    return statistics.median(samples)


# sections ----------------------------------------------------------------------------------
def preflight(s: Section) -> None:
    import gpuarrays as ga
    from gpuarrays._memory.devices import unavailable_backends

    s.check("python", lambda: ("ok", sys.version.split()[0]))
    for mod in ("numpy", "cuda.bindings", "cupy", "torch", "numba", "numba.cuda"):
        def version(mod=mod):
            m = __import__(mod, fromlist=["_"])
            return "ok", getattr(m, "__version__", "?")
        s.check(f"import {mod}", version)
    s.check("ga.backends()", lambda: ("ok", ga.backends()))
    s.check("cuda unavailable reason", lambda: ("info", unavailable_backends().get("cuda", "-")))

    def device():
        dev = ga.get_device("cuda:0")
        return "ok", f"{dev.name}, {dev.total_memory / 2**30:.1f} GiB, kinds {dev.kinds}"
    s.check("cuda:0", device)

    def nvrtc():
        from cuda.bindings import nvrtc as n
        return "ok", f"NVRTC {n.nvrtcVersion()[1:]}, archs {n.nvrtcGetSupportedArchs()[1]}"
    s.check("nvrtc", nvrtc)


def interop(s: Section) -> None:
    import numpy as np

    import gpuarrays as ga

    dev = ga.get_device("cuda:0")
    host = np.arange(24, dtype=np.float32).reshape(4, 6)

    def ga_array():
        return ga.asarray(host, device=dev)

    # DLPack, gpuarrays -> X
    def to_torch():
        import torch
        a = ga_array()
        t = torch.from_dlpack(a)
        assert t.device.type == "cuda" and t.data_ptr() == a.storage.ptr + a.offset
        np.testing.assert_array_equal(t.cpu().numpy(), host)
    s.check("dlpack ga -> torch", to_torch)

    def to_cupy():
        import cupy
        a = ga_array()
        c = cupy.from_dlpack(a)
        assert c.data.ptr == a.storage.ptr + a.offset
        np.testing.assert_array_equal(cupy.asnumpy(c), host)
    s.check("dlpack ga -> cupy", to_cupy)

    # DLPack, X -> gpuarrays
    def from_torch():
        import torch
        t = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)
        a = ga.from_dlpack(t)
        assert a.device == dev and a.storage.ptr == t.data_ptr()
        np.testing.assert_array_equal(a.get(), host)
    s.check("dlpack torch -> ga", from_torch)

    def from_cupy():
        import cupy
        c = cupy.arange(24, dtype=cupy.float32).reshape(4, 6)
        a = ga.from_dlpack(c)
        assert a.storage.ptr == c.data.ptr
        np.testing.assert_array_equal(a.get(), host)
    s.check("dlpack cupy -> ga", from_cupy)

    # CUDA Array Interface
    def cai_to_cupy():
        import cupy
        a = ga_array()
        assert a.__cuda_array_interface__["version"] == 3
        c = cupy.asarray(a)
        assert c.data.ptr == a.storage.ptr + a.offset
        np.testing.assert_array_equal(cupy.asnumpy(c), host)
    s.check("cai ga -> cupy", cai_to_cupy)

    def cai_to_numba():
        from numba import cuda
        a = ga_array()
        d = cuda.as_cuda_array(a)
        np.testing.assert_array_equal(d.copy_to_host(), host)
    s.check("cai ga -> numba", cai_to_numba)

    def cai_to_torch():
        import torch
        a = ga_array()
        t = torch.as_tensor(a, device="cuda")
        assert t.data_ptr() == a.storage.ptr + a.offset
    s.check("cai ga -> torch", cai_to_torch)

    def cai_from_cupy():
        import cupy
        c = cupy.arange(24, dtype=cupy.float32).reshape(4, 6)[:, ::2]
        a = ga.asarray(c)
        assert a.storage.ptr <= c.data.ptr and a.strides == c.strides
        np.testing.assert_array_equal(a.get(), cupy.asnumpy(c))
    s.check("cai cupy -> ga (strided)", cai_from_cupy)

    def cai_from_numba():
        from numba import cuda
        d = cuda.to_device(host)
        a = ga.asarray(d)
        np.testing.assert_array_equal(a.get(), host)
    s.check("cai numba -> ga", cai_from_numba)

    def not_cai_for_cpu():
        a = ga.zeros(3, device="cpu:0")
        assert not hasattr(a, "__cuda_array_interface__")
    s.check("no CAI on cpu arrays", not_cai_for_cpu)

    def kinds_dlpack_device():
        out = []
        for kind in dev.kinds:
            a = ga.zeros(4, device=dev, kind=kind)
            out.append(f"{kind}={a.__dlpack_device__()}")
        return "ok", " ".join(out)  # expect device=(2, 0) host=(3, 0) unified=(13, 0)
    s.check("__dlpack_device__ per kind", kinds_dlpack_device)

    def numba_emm():
        import subprocess
        code = (
            "from gpuarrays.interop.numba import set_memory_manager; set_memory_manager()\n"
            "import numpy as np, gpuarrays as ga\nfrom numba import cuda\n"
            "dev = ga.get_device('cuda:0'); before = ga.memory_stats(dev)['alloc_count']\n"
            "d = cuda.to_device(np.arange(1000.0)); assert d.copy_to_host()[999] == 999\n"
            "assert ga.memory_stats(dev)['alloc_count'] > before\n"
            "c = ga.AllocCache()\n"
            "with ga.cached(c):\n"
            "    for i in range(3):\n"
            "        with ga.record_allocations() as r:\n"
            "            x = cuda.device_array(4096); del x\n"
            "        assert i == 0 or r.count == 0, r.count\n"
            "print('numba emm ok')\n"
        )
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-500:]
    s.check("numba EMM plug-in (+ cached)", numba_emm)


def cupy_cached(s: Section) -> None:
    import cupy

    import gpuarrays as ga
    from gpuarrays.interop.cupy import using_allocator

    dev = ga.get_device("cuda:0")
    cache = ga.AllocCache()
    x = cupy.random.random((512, 512), dtype=cupy.float32)

    def step(y):
        z = cupy.tanh(y @ y) * 2 + 1
        return float(z.sum())

    counts = []

    def run():
        with using_allocator(), ga.cached(cache):
            for _ in range(10):
                with ga.record_allocations() as rec:
                    step(x)
                counts.append((rec.count, rec.cache_hits))
        return ("ok" if all(c == 0 for c, _ in counts[1:]) else "FAIL",
                f"allocations per iteration {[c for c, _ in counts]}, hits {[h for _, h in counts]}")
    s.check("cupy under ga.cached: 0 new allocations after iteration 1", run)
    s.check("cache", lambda: ("info", repr(cache)))
    cupy.cuda.Device(0).synchronize()
    s.check("cache.free()", cache.free)
    s.check("memory_stats", lambda: ("info", {k: ga.memory_stats(dev)[k]
                                              for k in ("used_bytes", "reserved_bytes")}))


def alloc_bench(s: Section) -> None:
    import numpy as np

    import gpuarrays as ga

    dev = ga.get_device("cuda:0")
    results = {}
    for size in (4096, 1 << 20):
        n = size // 4

        def ga_alloc(n=n):
            ga.empty(n, np.float32, device=dev).free()
        results[f"ga pool {size}"] = s.check(
            f"ga.empty+free {size} B (us)", lambda f=ga_alloc: ("us", f"{_median_us(f):.2f}"))

        def ga_del(n=n):
            a = ga.empty(n, np.float32, device=dev)
            del a
        s.check(f"ga.empty+del {size} B (us)", lambda f=ga_del: ("us", f"{_median_us(f):.2f}"))
        cache = ga.AllocCache()

        def ga_cached(n=n):
            ga.empty(n, np.float32, device=dev).free()
        with ga.cached(cache):  # the hit alone, inside one scope (as gpuarrays bench times it)
            s.check(f"ga cached hit {size} B (us)",
                    lambda f=ga_cached: ("us", f"{_median_us(f):.2f}"))
        cache.free()

        def cupy_alloc(n=n):
            import cupy
            a = cupy.empty(n, cupy.float32)
            del a
        s.check(f"cupy pool {size} B (us)", lambda f=cupy_alloc: ("us", f"{_median_us(f):.2f}"))

        def torch_alloc(n=n):
            import torch
            a = torch.empty(n, dtype=torch.float32, device="cuda")
            del a
        s.check(f"torch caching {size} B (us)", lambda f=torch_alloc: ("us", f"{_median_us(f):.2f}"))

    def raw():
        impl = dev.impl
        def f():
            impl.free(0, "device", impl.allocate(0, "device", 4096), 4096)
        return "us", f"{_median_us(f, repeat=200, warmup=20):.2f}"
    s.check("raw cuMemAlloc+cuMemFree 4096 B (us)", raw)
    del results


def bandwidth(s: Section) -> None:
    import numpy as np

    import gpuarrays as ga

    dev = ga.get_device("cuda:0")
    nbytes = 256 << 20
    n = nbytes // 4
    d = ga.empty(n, np.float32, device=dev)

    def gbps(fn, reps=5):
        fn()
        dev.synchronize()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        dev.synchronize()
        return nbytes * reps / (time.perf_counter() - t) / 1e9

    pageable = np.ones(n, np.float32)
    h = ga.empty(n, np.float32, device=dev, kind="host")
    hv = h.host_view()
    hv[...] = 1

    s.check("H2D from pageable (GB/s)", lambda: ("GB/s", f"{gbps(lambda: d.__setitem__(..., pageable)):.1f}"))
    s.check("D2H to pageable (GB/s)", lambda: ("GB/s", f"{gbps(lambda: d.get(out=pageable)):.1f}"))
    s.check("H2D from 'host' (GB/s)", lambda: ("GB/s", f"{gbps(lambda: ga.copyto(d, h)):.1f}"))
    s.check("D2H to 'host' (GB/s)", lambda: ("GB/s", f"{gbps(lambda: ga.copyto(h, d)):.1f}"))

    def torch_peak():
        import torch
        src = torch.ones(n, dtype=torch.float32).pin_memory()
        dst = torch.empty(n, dtype=torch.float32, device="cuda")
        def f():
            dst.copy_(src, non_blocking=True)
        f()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            f()
        torch.cuda.synchronize()
        return "GB/s", f"{nbytes * 5 / (time.perf_counter() - t) / 1e9:.1f} (reference peak)"
    s.check("torch pinned H2D (GB/s)", torch_peak)
    del hv


def reset(s: Section) -> None:
    import numpy as np

    import gpuarrays as ga

    dev = ga.get_device("cuda:0")

    def stale():
        a = ga.arange(1000, dtype=np.float32, device=dev)
        b = a[10:]
        h = ga.zeros(100, device=dev, kind="host") if "host" in dev.kinds else None
        old = a.storage.ptr
        ga.device_reset(dev)
        for x in (a, b) + ((h,) if h is not None else ()):
            try:
                x.get()
            except ga.DeviceResetError:
                continue
            raise AssertionError("a stale array did not raise DeviceResetError")
        c = ga.arange(1000, dtype=np.float32, device=dev)
        reused = c.storage.ptr == old
        del a, b, h
        gc.collect()
        dev.memory.apply_pending()
        np.testing.assert_array_equal(c.get(), np.arange(1000, dtype=np.float32))
        return "ok", f"address reused after reset: {reused}; new data intact after old finalizers"
    s.check("stale arrays raise, late finalizers harmless", stale)

    def kernels_after_reset():
        x = ga.arange(100, dtype=np.float64, device=dev)[::3].astype(np.float16)
        np.testing.assert_array_equal(x.get(), np.arange(100.0)[::3].astype(np.float16))
    s.check("kernels recompiled/reloaded after reset", kernels_after_reset)

    def many_resets():
        for _ in range(5):
            a = ga.ones(1 << 20, device=dev)
            ga.device_reset(dev)
            del a
        gc.collect()
        return "ok", f"used_bytes={ga.memory_stats(dev)['used_bytes']}"
    s.check("5 resets with live arrays", many_resets)


def compute(s: Section) -> None:
    """Generated elementwise kernels on cuda:0: values, bandwidth vs a device copy, host
    time per call vs CuPy and PyTorch CUDA, the launcher vs a bare cuLaunchKernel, and
    the disk cache (docs/kernels.md)."""
    import subprocess

    import numpy as np

    import gpuarrays as ga
    from gpuarrays._compute.device import diskcache, launcher

    dev = ga.get_device("cuda:0")
    rng = np.random.default_rng(0)

    def values():
        h = rng.standard_normal(1 << 20).astype(np.float32)
        a = ga.asarray(h, device=dev)
        m = h[1::3].shape[0]  # the shorter of the two strided views
        worst = 0.0
        for name, got, want in (("add", a + a, h + h), ("exp", ga.exp(a), np.exp(h)),
                                ("where", ga.where(a > 0, a, 0), np.where(h > 0, h, 0)),
                                ("strided", a[::-3][:m] * a[1::3][::-1][:m],
                                 h[::-3][:m] * h[1::3][::-1][:m])):
            g = got.get()
            err = float(np.max(np.abs(g - want) / np.maximum(np.abs(want), 1e-30)))
            if name != "exp" and err:
                raise AssertionError(f"{name} differs from NumPy (max rel error {err})")
            worst = max(worst, err)
        return "ok", f"exp max rel error {worst:.2e}"
    s.check("elementwise values vs NumPy", values)

    def bandwidth():
        n = 1 << 26  # 256 MiB per float32 array
        a, b = ga.ones(n, np.float32, device=dev), ga.ones(n, np.float32, device=dev)
        c = ga.empty(n, np.float32, device=dev)
        out = []
        for label, fn, nbytes in (("a + b", lambda: a + b, 12 * n),
                                  ("a * 2", lambda: a * 2, 8 * n),
                                  ("copy (d2d)", lambda: ga.copyto(c, a), 8 * n)):
            fn()
            dev.synchronize()
            t = time.perf_counter()
            for _ in range(10):
                fn()
            dev.synchronize()
            out.append(f"{label} {nbytes * 10 / (time.perf_counter() - t) / 1e9:.0f}")
        return "GB/s", "; ".join(out) + " (target: elementwise >= 0.9x the copy)"
    s.check("64 M float32: elementwise vs copy bandwidth", bandwidth)

    def per_call():
        h = np.ones(1000, np.float32)
        a = ga.asarray(h, device=dev)
        ours = _median_us(lambda: a + a, repeat=500, warmup=50)
        detail = f"gpuarrays {ours:.1f} us"
        try:
            import cupy
            x = cupy.asarray(h)
            detail += f"; cupy {_median_us(lambda: x + x, repeat=500, warmup=50):.1f} us"
        except ImportError:
            detail += "; cupy not installed"
        try:
            import torch
            t = torch.ones(1000, device="cuda")
            detail += f"; torch {_median_us(lambda: t + t, repeat=500, warmup=50):.1f} us"
        except (ImportError, RuntimeError):
            detail += "; torch CUDA not available"
        dev.synchronize()
        return "us", detail + " (target: at most CuPy's, aiming at PyTorch's)"
    s.check("host time per call, a + a on 1000 float32", per_call)

    def enqueue():
        a = ga.ones(1000, np.float32, device=dev)
        out = ga.empty(1000, np.float32, device=dev)
        f4 = np.dtype(np.float32)
        view, args = out._raw(), [a._raw(), a._raw()]
        launcher.clear()  # so that the one plan left is this call's
        launcher.elementwise(dev, "add", view, args, [f4, f4])
        (plan,) = launcher._plans.values()
        k = plan.kernel
        vals = [view.ptr, args[0].ptr, args[1].ptr, *plan.tail]
        ours = _median_us(lambda: launcher.elementwise(dev, "add", view, args, [f4, f4]))
        bare = _median_us(lambda: k.launch(vals, plan.gsize, plan.lsize))
        dev.synchronize()
        return "us", f"launcher {ours:.2f}, kernel.launch {bare:.2f} (target: within 5 us)"
    s.check("enqueue path", enqueue)

    def warm_start():
        code = ("import time, numpy as np, gpuarrays as ga; t = time.perf_counter(); "
                "a = ga.ones(10, np.float32, device='cuda:0'); "
                "ga.logaddexp(a, a).get(); print(time.perf_counter() - t)")
        env = dict(os.environ, GPUARRAYS_KERNEL_CACHE=os.path.join(s.out, "kernel_cache"))
        times = [float(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                      capture_output=True, text=True).stdout) for _ in range(2)]
        cache = diskcache.DiskCache(env["GPUARRAYS_KERNEL_CACHE"])
        files = len(list(cache.folder.glob("*.bin")))
        return "s", f"cold {times[0]:.2f}, warm {times[1]:.2f}, {files} cached images"
    s.check("disk cache: a second process starts warm", warm_start)


def linalg(s: Section) -> None:
    """matmul on cuda:0 (docs/linalg.md): values of every dtype class and layout against
    NumPy, then GFLOP/s of the tiled kernel beside CuPy (cuBLAS) and PyTorch CUDA."""
    import numpy as np

    import gpuarrays as ga

    dev = ga.get_device("cuda:0")
    rng = np.random.default_rng(0)

    def values():
        worst = 0.0
        for dtype in ("float32", "float64", "complex64", "int32", "int8"):
            for sa, sb in (((130, 70), (70, 65)), ((3, 1, 33, 17), (2, 17, 129)), ((1, 1), (1, 1)),
                           ((300,), (300, 5))):
                a = (rng.standard_normal(sa) * 5).astype(dtype)
                b = (rng.standard_normal(sb) * 5).astype(dtype)
                got = (ga.asarray(a, device=dev) @ ga.asarray(b, device=dev)).get()
                want = a @ b
                if want.dtype.kind in "iu":
                    if not np.array_equal(got, want):
                        raise AssertionError(f"{dtype} {sa} @ {sb} differs from NumPy")
                    continue
                err = float(np.max(np.abs(got - want)) / max(1.0, float(np.abs(want).max())))
                worst = max(worst, err)
            a = rng.standard_normal((90, 80)).astype("float32")
            A = ga.asarray(a, device=dev)
            got = (A[::-2].T @ A[1::2, ::-1]).get()
            worst = max(worst, float(np.max(np.abs(got - a[::-2].T @ a[1::2, ::-1]))))
        return "ok", f"float max error / max |value| {worst:.2e}"
    s.check("matmul values vs NumPy (5 dtypes, batches, strided)", values)

    def timed(fn, flops: float) -> float:
        """GFLOP/s of ``fn`` (one product), 5 calls after a warm-up, each device synchronized
        (the same stream order for CuPy and PyTorch: the default stream)."""
        fn()
        dev.synchronize()
        t = time.perf_counter()
        for _ in range(5):
            fn()
        dev.synchronize()
        return flops * 5 / (time.perf_counter() - t) / 1e9

    def speed():
        out = []
        for dtype in ("float32", "float64"):
            for n in (1024, 4096):
                h = rng.standard_normal((n, n)).astype(dtype)
                a = ga.asarray(h, device=dev)
                flops = 2.0 * n ** 3
                row = f"{dtype} {n}: gpuarrays {timed(lambda m=a: m @ m, flops):.0f}"
                try:
                    import cupy
                    x = cupy.asarray(h)
                    row += f", cupy {timed(lambda m=x: (m @ m, cupy.cuda.Device().synchronize()), flops):.0f}"
                except ImportError:
                    row += ", cupy not installed"
                try:
                    import torch
                    t_ = torch.from_numpy(h).cuda()
                    row += f", torch {timed(lambda m=t_: (m @ m, torch.cuda.synchronize()), flops):.0f}"
                except (ImportError, RuntimeError):
                    row += ", torch CUDA not available"
                out.append(row)
        return "GFLOP/s", "; ".join(out)
    s.check("matmul GFLOP/s beside cuBLAS", speed)


def sort(s: Section) -> None:
    """sort / argsort on cuda:0 (docs/sorting.md): values against NumPy, then 1 M and 16 M
    float32 beside CuPy (the kernels were never measured on a GPU before this check)."""
    import numpy as np

    import gpuarrays as ga

    dev = ga.get_device("cuda:0")
    rng = np.random.default_rng(0)

    def values():
        for shape, axis in (((1 << 20,), -1), ((4096, 300), 1), ((300, 4096), 0)):
            h = rng.integers(-1000, 1000, shape).astype(np.float32)
            a = ga.asarray(h, device=dev)
            if not np.array_equal(ga.argsort(a, axis=axis).get(),
                                  np.argsort(h, axis=axis, kind="stable")):
                raise AssertionError(f"argsort of {shape} along {axis} differs from NumPy")
        return "ok", "argsort bit-exact (stable) against NumPy"
    s.check("sort values vs NumPy", values)

    def speed(n):
        h = rng.standard_normal(n).astype(np.float32)
        a = ga.asarray(h, device=dev)
        out = []
        for op in ("sort", "argsort"):
            fn = getattr(ga, op)
            fn(a).free()
            dev.synchronize()
            t = time.perf_counter()
            for _ in range(5):
                fn(a).free()
            dev.synchronize()
            detail = f"{op} gpuarrays {(time.perf_counter() - t) / 5 * 1e3:.2f} ms"
            try:
                import cupy
                x = cupy.asarray(h)
                getattr(cupy, op)(x)
                cupy.cuda.Device().synchronize()
                t = time.perf_counter()
                for _ in range(5):
                    getattr(cupy, op)(x)
                cupy.cuda.Device().synchronize()
                detail += f", cupy {(time.perf_counter() - t) / 5 * 1e3:.2f} ms"
            except ImportError:
                detail += ", cupy not installed"
            out.append(detail)
        return "ms", "; ".join(out)
    s.check("sort/argsort 1 M float32", lambda: speed(1 << 20))
    s.check("sort/argsort 16 M float32", lambda: speed(1 << 24))


SECTIONS = {"preflight": preflight, "interop": interop, "cupy_cached": cupy_cached,
            "alloc_bench": alloc_bench, "bandwidth": bandwidth, "reset": reset,
            "compute": compute, "linalg": linalg,
            "sort": sort}


def table(out: str) -> int:
    # the order gpu_check.sh runs them in; pytest, clients, bench and conformance are
    # written by gpu_check.sh itself
    order = ["preflight", "pytest", "clients", "compute", "bench", "conformance",
             *[k for k in SECTIONS if k not in ("preflight", "compute")]]
    failures = 0
    print(f"\n{'section':<12} {'check':<58} {'result':<8} detail")
    print("-" * 120)
    for name in order:
        path = os.path.join(out, f"{name}.json")
        if not os.path.exists(path):
            print(f"{name:<12} {'(no result: crashed or timed out)':<58} {'FAIL':<8}")
            failures += 1
            continue
        with open(path) as f:
            data = json.load(f)
        if data.get("error"):
            print(f"{name:<12} {'(section error)':<58} {'FAIL':<8} {data['error'][:80]}")
        for label, result, detail in data["rows"]:
            print(f"{name:<12} {label[:58]:<58} {result[:8]:<8} {detail[:100]}")
        failures += data["status"] != "ok"
    print("-" * 120)
    print(f"sections failed: {failures}")
    return 0


def main() -> int:
    name, out = sys.argv[1], sys.argv[2]
    if name == "table":
        return table(out)
    s = Section(name, out)
    try:
        SECTIONS[name](s)
    except BaseException as e:  # import errors etc.: record and exit
        if isinstance(e, KeyboardInterrupt):
            raise
        s.write(f"{type(e).__name__}: {e}")
        traceback.print_exc()
        return 1
    s.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
