"""Regenerates cupy_numpy_names.txt: every function ``cupy``, ``cupy.linalg`` and ``cupy.fft``
export that NumPy also has (callable in NumPy, not a class or module).  Needs CuPy, which
imports without a GPU: ``pip install numpy cupy-cuda12x`` in a scratch venv, then
``python tests/data/count_cupy_names.py > tests/data/cupy_numpy_names.txt``.
"""

import types

import cupy
import numpy as np

for prefix, cmod, nmod in (("", cupy, np), ("linalg.", cupy.linalg, np.linalg),
                           ("fft.", cupy.fft, np.fft)):
    for name in sorted(dir(cmod)):
        n = getattr(nmod, name, None)
        if (name.startswith("_") or n is None or isinstance(n, (types.ModuleType, type))
                or not callable(n)):
            continue
        print(prefix + name)
