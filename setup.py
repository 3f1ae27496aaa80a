"""Build the compiled core (plain ``pip install`` builds it; needs a C compiler and Python headers).

Everything else about the project is declared in ``pyproject.toml``.
"""

from setuptools import Extension, setup

_FLAGS = ["-O2", "-std=c11", "-Wall", "-Wno-missing-field-initializers"]

setup(
    ext_modules=[
        Extension("gpuarrays._core", ["src/gpuarrays/_core.c"], extra_compile_args=_FLAGS),
        Extension("gpuarrays._dlpack", ["src/gpuarrays/_dlpack.c"], extra_compile_args=_FLAGS),
    ],
)
