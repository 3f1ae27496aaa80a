"""Six short programs written the NumPy way, run unchanged with ``xp = numpy`` and
``xp = gpuarrays`` on every device (issue 31, docs/numpy.md): least squares, an MLP
training loop, a stencil, Monte-Carlo, image operations with a histogram, and k-NN with a
group-by.  Each uses the functions a NumPy user reaches for (``hstack``, ``pad``,
``bincount``, ``histogram``, ``linalg.lstsq``, ``add.at``, ``argpartition``, ``percentile``
...), and the gpuarrays run must give NumPy's answer.  The inputs come from NumPy's
generator and are copied to the device once; the programs never call ``.get()``.  They run
inside ``ga.use_device(device)``, so what they create (``xp.zeros``, ``xp.arange``) is made
there, as a NumPy program's arrays are made on the host."""

from __future__ import annotations

import numpy as np
import pytest

import gpuarrays as ga

RNG = np.random.default_rng(7)


def least_squares(xp, x, y):
    """A cubic fit by lstsq with an intercept column, its residual and R^2."""
    A = xp.column_stack([x ** 3, x ** 2, x, xp.ones_like(x)])
    coef, res, rank, sv = xp.linalg.lstsq(A, y, rcond=None)
    pred = A @ coef
    ss_res = xp.sum((y - pred) ** 2)
    ss_tot = xp.sum((y - xp.mean(y)) ** 2)
    return coef, 1 - ss_res / ss_tot, xp.hstack([xp.atleast_1d(rank), sv])


def mlp(xp, X, labels, W1, W2, steps=5, lr=0.5):
    """Full-batch gradient descent on a ReLU MLP with one-hot labels made by indexing."""
    n, classes = X.shape[0], W2.shape[1]
    Y = xp.zeros((n, classes), dtype=X.dtype)
    Y[xp.arange(n), labels] = 1
    for _ in range(steps):
        H = np.maximum(X @ W1, 0)
        Z = H @ W2
        Z -= Z.max(axis=1, keepdims=True)
        P = xp.exp(Z)
        P /= P.sum(axis=1, keepdims=True)
        G = (P - Y) / n
        gW2 = H.T @ G
        gW1 = X.T @ ((G @ W2.T) * (H > 0))
        W1 = W1 - lr * gW1
        W2 = W2 - lr * gW2
    accuracy = xp.mean(xp.argmax(H @ W2, axis=1) == labels)
    return W1, W2, accuracy


def stencil(xp, u, sweeps=4):
    """Jacobi sweeps with a fixed boundary made by np.pad, then a gradient's norm."""
    for _ in range(sweeps):
        p = xp.pad(u, 1, mode="edge")
        u = 0.25 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])
    gy, gx = xp.gradient(u)
    return u, xp.sqrt(gx ** 2 + gy ** 2).max()


def monte_carlo(xp, z):
    """A call option priced from given normal draws: mean, standard error, 5 %/95 %
    quantiles of the payoff and the fraction in the money."""
    s = 100 * xp.exp(-0.02 + 0.2 * z)
    payoff = xp.clip(s - 100, 0, None)
    lo, hi = xp.percentile(payoff, [5, 95])
    return xp.mean(payoff), xp.std(payoff, ddof=1) / np.sqrt(z.size), lo, hi, \
        xp.count_nonzero(payoff) / payoff.size


def image(xp, img):
    """Flip, rotate, a 3x3 box blur by shifted slices of a reflect-padded image, an 8-bin
    histogram of the blurred image and the per-level pixel counts of the quantised one."""
    img = xp.fliplr(xp.rot90(img))
    p = xp.pad(img, 1, mode="reflect")
    blur = sum(p[i:i + img.shape[0], j:j + img.shape[1]] for i in range(3) for j in range(3)) / 9
    hist, edges = xp.histogram(blur, bins=8, range=(0.0, 1.0))
    levels = xp.digitize(blur.ravel(), xp.linspace(0, 1, 5)[1:-1])
    return blur, hist, edges, xp.bincount(levels, minlength=4)


def knn(xp, Q, R, labels, k=3, classes=4):
    """k nearest neighbours by argpartition, a vote by np.add.at, and a group-by of the
    query distances by predicted class (bincount with weights)."""
    d2 = (Q * Q).sum(1)[:, None] - 2 * Q @ R.T + (R * R).sum(1)[None, :]
    near = xp.argpartition(d2, k, axis=1)[:, :k]
    votes = xp.zeros((Q.shape[0], classes), dtype=xp.int64)
    rows = xp.repeat(xp.arange(Q.shape[0]), k)
    np.add.at(votes, (rows, labels[near].ravel()), 1)
    pred = votes.argmax(axis=1)
    best = xp.take_along_axis(d2, near, axis=1).min(axis=1)
    per_class = xp.bincount(pred, weights=best, minlength=classes)
    return pred, xp.sort(best), per_class


def _inputs():
    x = np.linspace(-1, 1, 64)
    X = RNG.standard_normal((48, 6))
    return {
        "least_squares": (x, 0.5 * x ** 3 - x + 0.1 * RNG.standard_normal(64)),
        "mlp": (X, RNG.integers(0, 3, 48), 0.3 * RNG.standard_normal((6, 8)),
                0.3 * RNG.standard_normal((8, 3))),
        "stencil": (RNG.random((20, 24)),),
        "monte_carlo": (RNG.standard_normal(4096),),
        "image": (RNG.random((16, 12)),),
        "knn": (RNG.standard_normal((20, 5)), RNG.standard_normal((40, 5)),
                RNG.integers(0, 4, 40)),
    }


INPUTS = _inputs()
PROGRAMS = {"least_squares": least_squares, "mlp": mlp, "stencil": stencil,
            "monte_carlo": monte_carlo, "image": image, "knn": knn}


def _host(value):
    if isinstance(value, (tuple, list)):
        return [_host(v) for v in value]
    return value.get() if isinstance(value, ga.GPUArray) else np.asarray(value)


@pytest.mark.parametrize("name", PROGRAMS)
def test_numpy_program_runs_unchanged(device, name):
    args = INPUTS[name]
    want = PROGRAMS[name](np, *args)
    if not device.supports(np.float64):  # the same program in float32 on both sides
        args = tuple(a.astype(np.float32) if a.dtype == np.float64 else a for a in args)
        want = PROGRAMS[name](np, *args)
    with ga.use_device(device):  # xp.arange, xp.zeros ... are made there, as NumPy's on the host
        got = PROGRAMS[name](ga, *(ga.asarray(a) for a in args))
    for g, w in zip(_host(got), _host(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4 if w.dtype == np.float32 else 1e-9,
                                   atol=1e-6, err_msg=name)
