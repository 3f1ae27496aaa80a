"""Build the compiled core (plain ``pip install`` builds it; needs a C compiler and Python headers).

Everything else about the project is declared in ``pyproject.toml``.  The C sources live
outside the package, in ``src/native/``: the core is several files (one per concept, see
``src/native/core/core.h``) compiled into the one extension ``gpuarrays._core``.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wno-missing-field-initializers"]
# The cpu engine's random numbers: each floating-point operation rounds once, as in the
# kernels' OpenCL and CUDA dialects (docs/random.md, "The cpu engine"); -O3 measured faster
_RNG_FLAGS = ["-O3", "-std=c11", "-Wall", "-ffp-contract=off"]
_CORE = "src/native/core/"
_CORE_SOURCES = [_CORE + name for name in (
    "lock.c", "storage.c", "array.c", "pool.c", "cache.c", "alloc.c", "gate.c",
    "working.c", "compute.c", "launch.c", "fill.c", "streams.c", "module.c")]

setup(
    ext_modules=[
        Extension("gpuarrays._core", _CORE_SOURCES, depends=[_CORE + "core.h"],
                  extra_compile_args=_FLAGS),
        Extension("gpuarrays._dlpack", ["src/native/dlpack.c"], extra_compile_args=_FLAGS),
        Extension("gpuarrays._rng", ["src/native/rng/rng.c"],
                  depends=["src/native/rng/rng_kernels.h"], extra_compile_args=_RNG_FLAGS),
    ],
)
