"""The NumPy surface against CuPy's (docs/numpy.md, "Coverage").

``tests/data/cupy_numpy_names.txt`` lists every function ``cupy``, ``cupy.linalg`` and
``cupy.fft`` export that NumPy 2.4 also has (CuPy 14.2.0, counted by
``tests/data/count_cupy_names.py``).  A name counts as covered when it works both ways: a
``ga.<name>`` exists, and NumPy's own function reaches gpuarrays -- through a row of the
protocol table for the functions NumPy dispatches by ``__array_function__``, through a row
of the elementwise table or the namespace function of the ufunc's name for ufuncs.  Every
name not covered must be listed as refused, with its reason, in docs/numpy.md; the figure
the page states must be the one counted here.
"""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np

import gpuarrays as ga
from gpuarrays._compute import numpy_protocol
from gpuarrays._compute.table import BY_UFUNC

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMES = (ROOT / "tests" / "data" / "cupy_numpy_names.txt").read_text().split()
DOC = (ROOT / "docs" / "numpy.md").read_text()


def _get(root, path: str):
    for part in path.split("."):
        root = getattr(root, part, None)
        if root is None:
            return None
    return root


def _covered(path: str) -> bool:
    numpy_fn = _get(np, path)
    if _get(ga, path) is None:
        return False
    if isinstance(numpy_fn, np.ufunc):
        return True  # a table row, or the namespace function of the ufunc's name
    if hasattr(numpy_fn, "_implementation"):  # NumPy dispatches it: the table must route it
        entry = numpy_protocol._table().get(numpy_fn)
        return entry is not None and entry.available(ga)
    return True  # NumPy does not dispatch it (creation without like=, dtype helpers)


def _refused_in_docs() -> set[str]:
    section = DOC.split("## Refused", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w.]+)`", section, flags=re.M))


def test_the_list_is_cupys_and_numpys():
    assert len(NAMES) == 394 and len(set(NAMES)) == len(NAMES)
    assert all(_get(np, n) is not None for n in NAMES)


def test_coverage_is_at_least_95_percent_and_the_rest_is_documented():
    missing = sorted(n for n in NAMES if not _covered(n))
    covered = len(NAMES) - len(missing)
    assert covered >= math.ceil(0.95 * len(NAMES)), (covered, missing)
    assert set(missing) == _refused_in_docs(), (
        "docs/numpy.md's refused table must list exactly the names not covered", missing)
    assert f"**{covered} of {len(NAMES)}**" in DOC, covered


def test_every_ufunc_of_the_list_runs_through_numpy(device):
    """np.<ufunc>(gpuarray) answers with a gpuarrays array for every ufunc counted."""
    x = ga.asarray(np.array([0.25, 0.5, 2.0], dtype=np.float32), device=device)
    i = ga.asarray(np.array([3, 4, 12], dtype=np.int32), device=device)
    for name in NAMES:
        uf = getattr(np, name, None)
        if not isinstance(uf, np.ufunc) or name not in dir(ga):
            continue
        args = []
        for k in range(uf.nin):
            kinds = {t.split("->")[0][k] for t in uf.types}
            args.append(x > 0.3 if name.startswith("logical_") else x if "f" in kinds else i)
        if name == "ldexp":
            args = [x, i]
        with np.errstate(all="ignore"):  # arccosh(0.25) is NaN in both
            result = uf(*args)
            want = uf(*(a.get() for a in args))
        results = result if isinstance(result, tuple) else (result,)
        assert all(isinstance(r, ga.GPUArray) for r in results), name
        wants = want if isinstance(want, tuple) else (want,)
        for r, w in zip(results, wants, strict=True):
            np.testing.assert_allclose(r.get(), w, rtol=1e-6, err_msg=name)
