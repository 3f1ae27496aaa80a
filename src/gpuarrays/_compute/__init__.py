"""The compute layer: the array API namespace (docs/compute.md).

``table.py`` describes every elementwise operation once; ``promotion.py`` types
results; ``dispatch.py`` checks, allocates and runs one of two engines
(``cpu_engine.py``: NumPy on views of the raw memory; ``device/``: generated
OpenCL C / CUDA C kernels); ``elementwise.py`` holds the public functions,
``dtypes.py`` the dtype names and data type functions, ``info.py`` the
inspection object, ``operators.py`` the array's operators (filled into the
array layer's hooks by :func:`install`, which ``gpuarrays/__init__.py`` calls).
"""

from __future__ import annotations

import math

from . import dtypes, elementwise
from .dtypes import *  # noqa: F403 -- the names listed in dtypes.__all__
from .elementwise import *  # noqa: F403 -- the names listed in elementwise.__all__
from .info import __array_namespace_info__
from .operators import install

__array_api_version__ = "2025.12"

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None

CONSTANTS = ("e", "inf", "nan", "newaxis", "pi")

__all__ = [*dtypes.__all__, *elementwise.__all__, *CONSTANTS, "__array_api_version__",
           "__array_namespace_info__", "install"]
