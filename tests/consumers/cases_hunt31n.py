"""Cases for test_hunt31n_numpy.py (issue 39's hunt, session 31, NumPy side): what the earlier
hunts (``cases.py``, ``cases_wide.py``, ``cases_hunt26.py``, ``cases_hunt27_numpy.py``,
``test_numpy_programs.py``, ``test_numpy_scripts.py``) leave out.

Each case is ``fn(np, to, dtype)``: ``np`` the namespace (NumPy for the reference,
``lazycore.numpy`` for the check), ``to`` a converter of NumPy arrays into it. The
comparison here is stricter than ``cases.compare``: every leaf's dtype must be NumPy's
(integers too), its shape NumPy's, a Python scalar must stay a Python scalar of the same
type, and where NumPy raises the lazy run must raise the same exception type. Values
are exact where ``exact=True`` (integer, index, order and copy work: NumPy's result is
determined bit for bit) and else within ``RTOL`` of the dtype scaled by the largest
value (XLA's libm and its summation order are not NumPy's: a few ulps).

Groups: ``script`` (plain NumPy, no Array API: runs in the test's own process),
``sklearn`` and ``scipy`` (need ``SCIPY_ARRAY_API=1`` before SciPy is imported and
scikit-learn's process-wide dispatch: a child, ``python cases_hunt31n.py NAME...``, one
JSON line a case and dtype; ``--list GROUP`` for the names).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import warnings

import numpy

RTOL = {"float32": 5e-5, "float64": 1e-11}

CASES: dict = {}
"""name -> (fn, group, exact, slack)."""


def case(name, group="script", exact=False, slack=1.0):
    def deco(fn):
        CASES[name] = (fn, group, exact, slack)
        return fn

    return deco


def _data(dtype, n=48, d=4, seed=0):
    rng = numpy.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    labels = numpy.array([2, 1, 0])[rng.integers(0, 3, n)]
    X[labels == 1] += 1.5
    X[labels == 2] -= 1.0
    return rng, X, labels


# --- plain NumPy scripts -------------------------------------------------------------------------------


def scripts():
    @case("script.take_along_axis,put_along_axis", exact=True)
    def _(np, to, dtype):
        rng = numpy.random.default_rng(1)
        a = to(rng.normal(size=(6, 5)).astype(dtype))
        idx = np.argsort(a, axis=1)
        s = np.take_along_axis(a, idx, axis=1)
        top = np.take_along_axis(a, np.argmax(a, axis=0, keepdims=True), axis=0)
        b = a.copy()
        np.put_along_axis(b, np.argmin(b, axis=1)[:, None], 0.0, axis=1)
        c = np.zeros_like(a)
        np.put_along_axis(c, idx[:, :2], np.take_along_axis(a, idx[:, :2], axis=1), axis=1)
        return s, top, b, c, idx

    @case("script.add.at,subtract.at histogram", exact=True)
    def _(np, to, dtype):
        rng = numpy.random.default_rng(2)
        idx = to(rng.integers(0, 7, 40))
        w = to(rng.uniform(size=40).astype(dtype))
        h = np.zeros(7, dtype=dtype)
        np.add.at(h, idx, 1)
        c = np.zeros(7, dtype=numpy.int64)
        np.add.at(c, idx, 1)
        m = np.full(7, 10.0, dtype=dtype)
        np.subtract.at(m, idx[:5], w[:5])
        g = np.zeros((3, 7), dtype=dtype)
        np.add.at(g, (idx[:10] % 3, idx[:10]), 1.0)
        return h, c, m, g

    @case("script.maximum.at,minimum.at,multiply.at", exact=True)
    def _(np, to, dtype):
        rng = numpy.random.default_rng(3)
        idx = to(rng.integers(0, 5, 30))
        v = to(rng.normal(size=30).astype(dtype))
        mx = np.full(5, -np.inf, dtype=dtype)
        np.maximum.at(mx, idx, v)
        mn = np.full(5, np.inf, dtype=dtype)
        np.minimum.at(mn, idx, v)
        pr = np.ones(5, dtype=dtype)
        np.multiply.at(pr, idx[:6], 2.0)
        return mx, mn, pr

    @case("script.histogram(bins,range,density,weights)")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(4)
        x = to(rng.normal(size=200).astype(dtype))
        w = to(rng.uniform(size=200).astype(dtype))
        h1, e1 = np.histogram(x, bins=10, range=(-3, 3))
        h2, e2 = np.histogram(x, bins=np.linspace(-2, 2, 9), density=True)
        h3, e3 = np.histogram(x, bins=5, range=(-1.0, 1.0), weights=w)
        return h1, e1, h2, e2, h3, e3

    @case("script.histogram2d,histogramdd")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(5)
        x = to(rng.normal(size=100).astype(dtype))
        y = to(rng.normal(size=100).astype(dtype))
        H, xe, ye = np.histogram2d(x, y, bins=4, range=[[-2, 2], [-2, 2]])
        return H, xe, ye

    @case("script.searchsorted,cumsum inverse-cdf sampling")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(6)
        p = to(rng.uniform(0.1, 1.0, 8).astype(dtype))
        p = p / p.sum()
        cdf = np.cumsum(p)
        u = to(rng.uniform(size=50).astype(dtype))
        draws = np.searchsorted(cdf, u)
        left = np.searchsorted(cdf, u, side="left")
        right = np.searchsorted(cdf, cdf, side="right")
        srt = np.searchsorted(np.array([3, 1, 2]), np.array([2, 3]), sorter=np.array([1, 2, 0]))
        counts = np.bincount(np.minimum(draws, 7), minlength=8)
        return cdf, draws, left, right, srt, counts

    @case("script.interp(periodic,left,right)")
    def _(np, to, dtype):
        xp_ = to(numpy.linspace(0, 10, 11).astype(dtype))
        fp = to((numpy.linspace(0, 10, 11) ** 2).astype(dtype))
        x = to(numpy.linspace(-2, 12, 29).astype(dtype))
        a = np.interp(x, xp_, fp)
        b = np.interp(x, xp_, fp, left=-1.0, right=-2.0)
        c = np.interp(x, xp_, fp, period=10)
        d = np.interp(2.5, xp_, fp)
        return a, b, c, d

    @case("script.convolve,correlate modes")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(7)
        s = to(rng.normal(size=40).astype(dtype))
        k = to(numpy.ones(5, dtype=dtype) / 5)
        return (np.convolve(s, k, mode="valid"), np.convolve(s, k, mode="same"), np.convolve(s, k),
                np.correlate(s, k[:3] * np.arange(3), mode="full"), np.correlate(s, s[:4]),
                np.convolve(k, s, mode="same"))

    @case("script.polyfit,polyval,poly1d")
    def _(np, to, dtype):
        x = to(numpy.linspace(-1, 1, 30).astype(dtype))
        y = 3 * x ** 3 - x + 0.5 + 0.01 * to(numpy.sin(numpy.arange(30)).astype(dtype))
        c = np.polyfit(x, y, 3)
        c1, cov = np.polyfit(x, y, 2, cov=True)
        cw = np.polyfit(x, y, 1, w=np.abs(x) + 1)
        return c, c1, cov, cw, np.polyval(c, x), np.polyder(c), np.polyint(c)

    @case("script.cumsum,diff pipelines", exact=True)
    def _(np, to, dtype):
        rng = numpy.random.default_rng(8)
        v = to(rng.integers(-5, 6, (4, 9)))
        f = to(rng.normal(size=(4, 9)).astype(dtype))
        return (np.diff(v), np.diff(v, n=2, axis=0), np.diff(v, prepend=0), np.diff(v, append=v[:, -1:]),
                np.cumsum(v, axis=1), np.cumprod(v[:, :4] % 3 + 1, axis=1), np.ediff1d(v[0], to_begin=[9]),
                np.diff(np.cumsum(f, axis=1), axis=1), np.cumsum(f > 0, axis=0), np.diff(f > 0, axis=1),
                np.cumsum(v, dtype=numpy.float32))

    @case("script.lstsq,solve,inv,pinv,slogdet")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(9)
        A = to(rng.normal(size=(12, 4)).astype(dtype))
        b = to(rng.normal(size=(12, 2)).astype(dtype))
        x, res, rank, sv = np.linalg.lstsq(A, b, rcond=None)
        S = A.T @ A + np.eye(4, dtype=dtype)
        return (x, res, rank, sv, np.linalg.solve(S, A.T @ b), np.linalg.inv(S), np.linalg.pinv(A),
                np.linalg.slogdet(S), np.linalg.det(S), np.linalg.matrix_rank(A), np.linalg.norm(A, ord="fro"),
                np.linalg.norm(A, ord=2), np.linalg.norm(A, axis=0), np.linalg.cond(S))

    @case("script.qr,svd,eigh,cholesky shapes")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(10)
        A = to(rng.normal(size=(6, 4)).astype(dtype))
        q, r = np.linalg.qr(A)
        r2 = np.linalg.qr(A, mode="r")
        qc, rc = np.linalg.qr(A, mode="complete")
        s = np.linalg.svd(A, compute_uv=False)
        u, s2, vt = np.linalg.svd(A, full_matrices=False)
        S = A.T @ A
        w, v = np.linalg.eigh(S)
        L = np.linalg.cholesky(S)
        rec = (u * s2) @ vt
        return np.abs(q), np.abs(r), np.abs(r2), qc.shape, rc.shape, s, rec, w, np.abs(v), L, np.linalg.eigvalsh(S)

    @case("script.einsum-heavy (attention, bilinear, trace, batch outer)")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(11)
        q = to(rng.normal(size=(2, 5, 4)).astype(dtype))
        k = to(rng.normal(size=(2, 6, 4)).astype(dtype))
        v = to(rng.normal(size=(2, 6, 3)).astype(dtype))
        s = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(4)
        s = s - s.max(-1, keepdims=True)
        a = np.exp(s)
        a /= a.sum(-1, keepdims=True)
        out = np.einsum("bqk,bkv->bqv", a, v)
        M = to(rng.normal(size=(4, 4)).astype(dtype))
        bil = np.einsum("bqi,ij,bkj->bqk", q, M, k, optimize=True)
        tr = np.einsum("ii", M)
        outer = np.einsum("bi,bj->bij", q[:, 0], k[:, 0])
        diag = np.einsum("ii->i", M)
        tot = np.einsum("...d,...d->...", q, q)
        return out, bil, tr, outer, diag, tot, np.einsum(M, [0, 1], M, [1, 2], [0, 2])

    @case("script.mlp backprop (tanh, softmax CE, momentum)")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(12)
        _, Xn, yn = _data(dtype, n=40)
        X, y = to(Xn), to(yn)
        Y = np.eye(3, dtype=dtype)[y]
        W1 = to((0.3 * rng.standard_normal((4, 8))).astype(dtype))
        W2 = to((0.3 * rng.standard_normal((8, 3))).astype(dtype))
        b1, b2 = np.zeros((1, 8), dtype=dtype), np.zeros((1, 3), dtype=dtype)
        vW1, vW2 = np.zeros_like(W1), np.zeros_like(W2)
        losses = []
        for it in range(10):
            z1 = X @ W1 + b1
            h = np.tanh(z1)
            z2 = h @ W2 + b2
            z2 = z2 - np.max(z2, axis=1, keepdims=True)
            p = np.exp(z2) / np.sum(np.exp(z2), axis=1, keepdims=True)
            losses.append(float(-np.mean(np.sum(Y * np.log(p + 1e-9), axis=1))))
            d2 = (p - Y) / X.shape[0]
            gW2 = h.T @ d2
            gb2 = d2.sum(axis=0, keepdims=True)
            d1 = (d2 @ W2.T) * (1 - h ** 2)
            gW1 = X.T @ d1
            gb1 = np.sum(d1, axis=0, keepdims=True)
            vW1 = 0.9 * vW1 - 0.5 * gW1
            vW2 = 0.9 * vW2 - 0.5 * gW2
            W1 += vW1
            W2 += vW2
            b1 -= 0.5 * gb1
            b2 -= 0.5 * gb2
        acc = (np.argmax(p, axis=1) == y).mean()
        return W1, W2, b1, b2, losses, acc

    @case("script.kmeans (broadcast, argmin, mask means, empty cluster)")
    def _(np, to, dtype):
        _, Xn, _ = _data(dtype, n=50)
        X = to(Xn)
        C = X[:4].copy()
        C[3] = 100.0  # a centre no point chooses: kept as is
        for _ in range(10):
            d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
            lab = np.argmin(d, axis=1)
            newC = np.array([X[lab == k].mean(axis=0) if np.any(lab == k) else C[k] for k in range(4)])
            if np.all(newC == C):
                break
            C = newC
        return C, lab, np.unique(lab, return_counts=True)

    @case("script.default_rng workload statistics")
    def _(np, to, dtype):
        # default_rng draws lazycore's own stream (docs/status.md): compare statistics with a
        # tolerance of the sampling error (n=20000: a few standard errors)
        rng = np.random.default_rng(0)
        n = 20000
        u = rng.random(n)
        z = rng.standard_normal(n)
        ints = rng.integers(0, 10, n)
        nz = rng.normal(2.0, 3.0, size=(n,))
        e = rng.exponential(2.0, n)
        perm = rng.permutation(10)
        ch = rng.choice(5, size=n)
        return ([round(float(u.mean()), 1), round(float(z.mean()), 1), round(float(z.std()), 1),
                 round(float(nz.mean())), round(float(nz.std())), round(float(e.mean())),
                 int(np.bincount(ints, minlength=10).min() > 1800), sorted(np.asarray(perm).tolist()),
                 int(np.bincount(ch).min() > 3600)],
                u.dtype, z.dtype, ints.dtype, ch.dtype, perm.dtype, u.shape)

    @case("script.ix_,fancy,structured indexing", exact=True)
    def _(np, to, dtype):
        a = to(numpy.arange(60, dtype=dtype).reshape(5, 4, 3))
        r, c = np.array([0, 2, 4]), np.array([1, 3])
        b = a[np.ix_(r, c)]
        a2 = a.copy()
        a2[np.ix_(r, c, [0, 2])] = -1
        m = a[:, [0, 3], 1:]
        n = a[[0, 1], :, [2, 0]]
        o = a[..., np.array([[0, 1], [2, 2]])]
        p = a[np.array([True, False, True, False, True]), 1]
        q = a.copy()
        q[[0, 0, 1], [1, 1, 2]] += 5  # repeated index: NumPy keeps the last write, not a sum
        return b, a2, m, n, o, p, q

    @case("script.nan statistics,percentile,quantile methods")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(13)
        a = rng.normal(size=(7, 6)).astype(dtype)
        a[rng.integers(0, 7, 5), rng.integers(0, 6, 5)] = numpy.nan
        a = to(a)
        return (np.nanmean(a, axis=0), np.nanstd(a, axis=1, ddof=1), np.nanmax(a), np.nanargmin(a, axis=0),
                np.nanmedian(a, axis=1), np.nanpercentile(a, [10, 90], axis=0), np.nansum(a, axis=1),
                np.percentile(np.nan_to_num(a), 30, method="nearest"),
                np.quantile(np.nan_to_num(a), [0.2, 0.5], axis=1, method="lower"),
                np.quantile(np.nan_to_num(a), 0.7, method="midpoint", keepdims=True), np.nanvar(a))

    @case("script.gradient,trapezoid,meshgrid,mgrid")
    def _(np, to, dtype):
        x = to(numpy.linspace(0, 2, 21).astype(dtype))
        y = np.sin(x) * x
        gx = np.gradient(y, x)
        g2 = np.gradient(y, 0.1, edge_order=2)
        X, Y = np.meshgrid(x[:5], x[:4], indexing="ij")
        gy, gx2 = np.gradient(X * Y)
        mg = np.mgrid[0:3, 0:4]
        og = np.ogrid[0:3, 0:2]
        return gx, g2, X, Y, gy, gx2, np.trapezoid(y, x), mg, og[0], og[1]

    @case("script.fill_diagonal,diag_indices,triu_indices,tril", exact=True)
    def _(np, to, dtype):
        a = to(numpy.arange(25, dtype=dtype).reshape(5, 5))
        b = a.copy()
        np.fill_diagonal(b, 0)
        c = np.zeros((4, 6), dtype=dtype)
        np.fill_diagonal(c, 7, wrap=True)
        iu = np.triu_indices(5, k=1)
        d = a.copy()
        d[iu] = -d[iu]
        di = np.diag_indices(5)
        e = a.copy()
        e[di] += 100
        return b, c, d, e, a[np.tril_indices_from(a, -1)], np.diag(np.diag(a)), np.trace(a, offset=1)

    @case("script.pad modes,tile,repeat,roll,rot90,flip", exact=True)
    def _(np, to, dtype):
        a = to(numpy.arange(12, dtype=dtype).reshape(3, 4))
        return (np.pad(a, ((1, 2), (2, 1)), mode="constant", constant_values=-1), np.pad(a, 2, mode="reflect"),
                np.pad(a, 1, mode="symmetric"), np.pad(a, (1, 3), mode="wrap"), np.pad(a, 1, mode="edge"),
                np.pad(a, 2, mode="linear_ramp"), np.pad(a, 1, mode="maximum"), np.tile(a, (2, 1, 2)),
                np.repeat(a, [1, 0, 2], axis=0), np.repeat(a, 2), np.roll(a, -5), np.roll(a, (1, 2), axis=(0, 1)),
                np.rot90(a), np.rot90(a, -1, axes=(1, 0)), np.flip(a), np.fliplr(a), np.flipud(a))

    @case("script.split,stack,block,concatenate,moveaxis", exact=True)
    def _(np, to, dtype):
        a = to(numpy.arange(24, dtype=dtype).reshape(2, 3, 4))
        return (np.array_split(a, 3, axis=2), np.split(a, [1, 3], axis=1), np.stack([a, a], axis=-1),
                np.block([[a[0], a[1]], [a[1], a[0]]]), np.concatenate([a, a], axis=None),
                np.moveaxis(a, 0, -1), np.swapaxes(a, 0, 2), np.dstack([a[0], a[1]]), np.column_stack([a[0, 0], a[0, 1]]),
                np.vstack([a[0, 0], a[0, 1]]), np.hsplit(a[0], 2), np.vsplit(a[:, :2].reshape(4, 4), 2),
                np.atleast_3d(a[0, 0]), np.expand_dims(a, (0, 2)), np.squeeze(a[:, :1]))

    @case("script.where,select,piecewise,clip,isin", exact=True)
    def _(np, to, dtype):
        x = to(numpy.linspace(-3, 3, 13).astype(dtype))
        return (np.where(x > 0, x, 0), np.select([x < -1, x > 1], [x * 2, x * 3], default=-7),
                np.piecewise(x, [x < 0, x >= 0], [lambda t: -t, lambda t: t * t]),
                np.clip(x, -1, 2), np.clip(x, None, 0.5), np.isin(x, [0.0, 1.0, 2.5]),
                np.where(x > 1), np.argwhere(x > 1), np.flatnonzero(x < -1), np.extract(x > 2, x),
                np.count_nonzero(x > 0), np.heaviside(x, 0.5), np.sign(x))

    @case("script.sort,argsort stable ties,partition values", exact=True)
    def _(np, to, dtype):
        rng = numpy.random.default_rng(14)
        a = to(rng.integers(0, 4, (5, 8)).astype(dtype))
        return (np.argsort(a, axis=1, kind="stable"), np.sort(a, axis=0), np.argsort(-a, axis=None, kind="stable"),
                np.sort(np.partition(a, 3, axis=1)[:, :3], axis=1), np.unique(a, axis=0),
                np.unique(a, return_index=True, return_inverse=True), np.argmax(a, axis=1), np.argmin(a, axis=None),
                np.argmax(a, axis=0, keepdims=True), np.lexsort((a[0], a[1])))

    @case("script.linspace,logspace,geomspace,arange", exact=False)
    def _(np, to, dtype):
        l, st = np.linspace(0, 1, 7, endpoint=False, retstep=True)
        return (l, st, np.linspace(to(numpy.array([0.0, 1.0], dtype=dtype)), 5, 4, axis=1), np.logspace(0, 2, 5),
                np.geomspace(1, 1000, 4), np.arange(0.5, 3, 0.25, dtype=dtype), np.arange(10)[::3],
                np.linspace(0, 10, 5, dtype=int))

    @case("script.cross,kron,outer,inner,tensordot,vdot,multi_dot")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(15)
        a = to(rng.normal(size=(4, 3)).astype(dtype))
        b = to(rng.normal(size=(4, 3)).astype(dtype))
        M = to(rng.normal(size=(3, 3)).astype(dtype))
        return (np.cross(a, b), np.cross(a[:, :2], b[:, :2]) if False else np.cross(a[0], b[0]),
                np.kron(M, np.eye(2, dtype=dtype)), np.outer(a[0], b[1]), np.inner(a, b), np.tensordot(a, b, axes=([0], [0])),
                np.tensordot(M, M, axes=2), np.vdot(a, b), np.linalg.multi_dot([a, M, M, b.T]), np.dot(a[0], b[0]),
                np.matmul(a[:, None, :], M[None]).shape)

    @case("script.apply_along_axis,vectorize,frompyfunc", exact=True)
    def _(np, to, dtype):
        a = to(numpy.arange(12, dtype=dtype).reshape(3, 4))
        r = np.apply_along_axis(lambda v: v[::-1].cumsum(), 1, a)
        s = np.apply_along_axis(np.sum, 0, a)
        f = np.vectorize(lambda x: x * 2 if x > 5 else -x)
        return r, s, f(a)

    @case("script.float32 accumulate dtype and int promotions", exact=True)
    def _(np, to, dtype):
        i8 = to(numpy.arange(10, dtype=numpy.int8))
        u8 = to(numpy.arange(250, 256, dtype=numpy.uint8))
        i32 = to(numpy.arange(5, dtype=numpy.int32))
        f = to(numpy.arange(5, dtype=dtype))
        return (i8.sum(), u8.sum(), u8 + 10, u8 * 2, i8.mean(), i32.prod(), i32 / 2, i32 // 2, i32 * 2.5,
                f + i32, f * numpy.float64(2), i32 + numpy.int64(3), np.cumsum(u8), u8.astype(numpy.int8),
                np.add.reduce(i8), np.true_divide(i8, i8[::-1] + 1), (i32 > 2).sum(), np.mean(i32 > 1),
                i8 ** 2, np.int16(3) * i8, abs(to(numpy.array([-128], dtype=numpy.int8))), u8 - 251)

    @case("script.errors as NumPy's")
    def _(np, to, dtype):
        # each expected to raise NumPy's exception type (compared by type)
        a = to(numpy.ones((3, 4), dtype=dtype))
        out = []
        for fn in (lambda: a @ a, lambda: a + a[:, :2], lambda: a.reshape(5, 3), lambda: np.linalg.inv(a),
                   lambda: a[3], lambda: a[:, [0, 7]], lambda: np.concatenate([a, a.T]), lambda: a.sum(axis=2),
                   lambda: np.linalg.solve(np.zeros((3, 3), dtype=dtype), a), lambda: np.searchsorted(a, 1.0),
                   lambda: np.interp(a[0], a[0, :2], a[0]), lambda: np.histogram(a, bins=-1),
                   lambda: np.take_along_axis(a, np.zeros((3, 4)), 1), lambda: np.polyfit(a[0], a[0], -1),
                   lambda: np.diff(a, n=-1), lambda: np.array_split(a, 0), lambda: np.split(a, 3, axis=1),
                   lambda: np.convolve(a[0, :0], a[0]), lambda: np.linalg.cholesky(-np.eye(3, dtype=dtype)),
                   lambda: np.add.at(a, [5], 1), lambda: np.einsum("ij,jk->ik", a, a), lambda: np.stack([a, a.T])):
            try:
                r = fn()
                out.append(("ok", numpy.asarray(r).shape))
            except Exception as e:  # noqa: BLE001
                out.append(type(e))
        return out


    @case("script.views,out=,where= writes", exact=True)
    def _(np, to, dtype):
        a = to(numpy.arange(24, dtype=dtype).reshape(4, 6))
        b = a.copy()
        v = b[::2, 1::2]
        v += 100
        b.T[0] = -1
        r = b.reshape(6, 4)  # a view: writes reach b
        r[0, :2] = 7
        o = np.zeros((4, 6), dtype=dtype)
        np.add(a, 1, out=o[:, :])
        np.multiply(a, 2, out=o, where=a > 10)
        m = np.zeros(3, dtype=dtype)
        np.sum(a[:3], axis=1, out=m)
        c = np.empty(6, dtype=dtype)
        np.cumsum(a[0], out=c)
        mm = np.zeros((4, 4), dtype=dtype)
        np.matmul(a, a.T, out=mm)
        s1 = np.sum(a, where=a % 2 == 0)
        s2 = np.mean(a, axis=1, where=a > 3)
        s3 = np.max(a, axis=0, initial=10, where=a < 15)
        s4 = np.min(a, initial=-1.0)
        s5 = a.sum(axis=(0, 1), keepdims=True)
        d = a.copy()
        d[d > 10] = np.nan if dtype.kind == "f" else 0
        d[1] *= -1
        return b, r, o, m, c, mm, s1, s2, s3, s4, s5, d

    @case("script.NumPy errors and nan corners")
    def _(np, to, dtype):
        u8 = to(numpy.array([1, 200, 255], dtype=numpy.uint8))
        i = to(numpy.array([3, -3, 0, 7], dtype=numpy.int64))
        f = to(numpy.array([numpy.nan, 1.0, -numpy.inf, 0.5, numpy.nan], dtype=dtype))
        e = to(numpy.zeros((0, 3), dtype=dtype))
        out = []
        for fn in (lambda: u8 + 300, lambda: (u8 > 1) - (u8 > 2), lambda: i ** -1, lambda: e.max(), lambda: e.argmax(),
                   lambda: e.max(axis=1), lambda: e.sum(axis=0), lambda: e.mean(axis=0), lambda: np.argmax(e, axis=0),
                   lambda: i.reshape(-1, -1), lambda: i // 0, lambda: i % 0, lambda: np.sort(f), lambda: np.argsort(f),
                   lambda: np.argmax(f), lambda: np.nanargmax(f), lambda: np.max(f), lambda: np.unique(f),
                   lambda: np.fmax(f, 0.7), lambda: np.minimum(f, 0.7), lambda: f.astype(numpy.int64)[1:2],
                   lambda: np.round(to(numpy.array([0.5, 1.5, 2.5, -0.5, -2.5], dtype=dtype))),
                   lambda: np.around(to(numpy.array([1.25, 1.35, 12345], dtype=dtype)), -2),
                   lambda: np.fmod(i, to(numpy.array([2, 2, 5, -3]))), lambda: np.remainder(i, -2),
                   lambda: np.floor_divide(to(numpy.array([-7.5, 7.5], dtype=dtype)), 2), lambda: np.divmod(i, 3),
                   lambda: np.sign(f), lambda: np.clip(i, 5, 1), lambda: u8 * numpy.uint8(2), lambda: -u8,
                   lambda: np.left_shift(u8, 2), lambda: u8 >> 1, lambda: ~u8, lambda: np.bitwise_xor(i, 5),
                   lambda: np.std(f[1:2], ddof=1), lambda: np.var(e, axis=0), lambda: np.median(e),
                   lambda: np.linalg.norm(e), lambda: np.percentile(f[1:], 150), lambda: np.quantile(f[1:], [0.5, -0.1])):
            try:
                with numpy.errstate(all="ignore"):
                    r = fn()
                    out.append(r if not isinstance(r, tuple) else list(r))
            except Exception as ex:  # noqa: BLE001
                out.append(type(ex))
        return out


    # a returns analysis as finance tutorials write it: log returns, rolling windows by
    # cumsum and by sliding_window_view, drawdown by maximum.accumulate, VaR by percentile
    @case("script.returns,drawdown,rolling,VaR")
    def _(np, to, dtype):
        from numpy.lib.stride_tricks import sliding_window_view

        rng = numpy.random.default_rng(17)
        prices = to((100 * numpy.exp(numpy.cumsum(rng.normal(0, 0.01, (250, 3)), axis=0))).astype(dtype))
        r = np.log(prices[1:] / prices[:-1])
        c = np.cumsum(np.insert(r[:, 0], 0, 0.0)) if np is numpy else np.cumsum(np.concatenate([np.zeros(1, dtype), r[:, 0]]))
        roll = (c[20:] - c[:-20]) / 20
        win = sliding_window_view(r, 20, axis=0).std(axis=-1)
        peak = np.maximum.accumulate(prices, axis=0)
        dd = (prices - peak) / peak
        var = -np.percentile(r, 5, axis=0)
        cov = np.cov(r, rowvar=False)
        corr = np.corrcoef(r.T)
        w = np.linalg.solve(cov, np.ones(3, dtype=dtype))
        w /= w.sum()
        return r, roll, win, dd.min(axis=0), np.argmin(dd, axis=0), var, cov, corr, w, (r @ w).mean() * 252

    # an n-body step loop: pairwise differences by broadcasting, softened inverse cube,
    # np.fill_diagonal on the lazy distances, leapfrog updates in place
    @case("script.nbody leapfrog", slack=10)
    def _(np, to, dtype):
        rng = numpy.random.default_rng(18)
        pos = to(rng.normal(size=(16, 3)).astype(dtype))
        vel = to(np.zeros((16, 3), dtype=dtype) if np is numpy else numpy.zeros((16, 3), dtype=dtype))
        m = to(rng.uniform(0.5, 1.5, 16).astype(dtype))
        dt_ = 0.01

        def acc(p):
            d = p[None, :, :] - p[:, None, :]
            r2 = (d ** 2).sum(-1) + 0.01
            np.fill_diagonal(r2, np.inf)
            inv = r2 ** -1.5
            return (d * (inv * m[None, :])[:, :, None]).sum(1)

        a = acc(pos)
        for _ in range(6):
            vel += 0.5 * dt_ * a
            pos += dt_ * vel
            a = acc(pos)
            vel += 0.5 * dt_ * a
        ke = 0.5 * (m * (vel ** 2).sum(1)).sum()
        com = (m[:, None] * pos).sum(0) / m.sum()
        return pos, vel, ke, com, np.linalg.norm(pos - com, axis=1, keepdims=True)

    # the Array API 2024.12 functions library code calls through ``x.__array_namespace__()``
    # (NumPy 2 is the reference namespace)
    @case("xp.array API 2024.12 functions")
    def _(np, to, dtype):
        rng = numpy.random.default_rng(16)
        x = to(rng.normal(size=(4, 5)).astype(dtype))
        ints = to(rng.integers(-3, 4, (4, 5)))
        # NumPy's own namespace lacks some of the standard (``descending=``): array-api-compat's
        # wrapper of it is the reference, as library code sees it
        import array_api_compat.numpy as compat_np

        xp = x.__array_namespace__() if np is not numpy else compat_np
        S = x @ xp.matrix_transpose(x) + xp.eye(4, dtype=x.dtype)
        u = xp.unique_inverse(ints)
        c = xp.unique_counts(ints)
        return (xp.cumulative_sum(x, axis=1, include_initial=True), xp.cumulative_prod(ints[:2], axis=1),
                xp.cumulative_sum(ints[0] > 0), xp.diff(x, axis=0, n=2), xp.take(x, xp.asarray([0, 3]), axis=1),
                xp.take_along_axis(x, xp.argsort(x, axis=1), axis=1), xp.searchsorted(xp.sort(x[0]), x[1]),
                xp.vecdot(x, x), xp.linalg.vector_norm(x, ord=3, axis=1), xp.linalg.vector_norm(x, ord=xp.inf),
                xp.linalg.matrix_norm(S, ord="nuc"), xp.linalg.cholesky(S, upper=True), xp.linalg.matrix_rank(x),
                xp.linalg.pinv(x, rtol=1e-3), xp.linalg.svdvals(x), xp.linalg.trace(S, offset=1),
                xp.linalg.tensordot(x, x, axes=([1], [1])), xp.linalg.outer(x[0], x[1]), xp.linalg.diagonal(S),
                xp.unstack(x, axis=1), xp.tile(x[0], (2,)), xp.repeat(x[0], 2), xp.moveaxis(x[None], 0, 2),
                xp.permute_dims(x[None], (2, 1, 0)), xp.squeeze(x[None], axis=0), xp.clip(x, xp.zeros(5, dtype=x.dtype), 1.0),
                xp.copysign(x, -1.0), xp.hypot(x, x), xp.signbit(-x), xp.count_nonzero(ints, axis=0), xp.nextafter(x, 0),
                xp.broadcast_arrays(x[:1], x[:, :1]), xp.meshgrid(x[0], x[1, :3], indexing="xy"),
                xp.astype(ints, x.dtype, copy=False), xp.sum(ints > 0), xp.sum(x, dtype=xp.float64), xp.prod(ints, axis=1),
                xp.max(ints, axis=1, keepdims=True), xp.std(x, correction=1), xp.var(x, axis=0, correction=0),
                xp.all(x > -10), xp.any(x > 10, axis=1), xp.where(x > 0, x, 0.0), xp.maximum(x, 0.5), xp.minimum(ints, 1),
                xp.round(x * 10), xp.trunc(x * 10), xp.ceil(x), xp.sign(ints), xp.reciprocal(x) if hasattr(xp, "reciprocal") else 1 / x,
                xp.logaddexp(x, x), xp.expm1(x), xp.log1p(xp.abs(x)), xp.atan2(x, x[::-1]), xp.conj(x), xp.real(x),
                xp.isdtype(x.dtype, "real floating"), u.values, u.inverse_indices, c.values, c.counts,
                xp.unique_values(ints), xp.argsort(ints, axis=None if False else 1, stable=True, descending=True),
                xp.sort(ints, descending=True), xp.flip(x, axis=(0, 1)), xp.roll(x, 3, axis=None), xp.concat([x, x], axis=None),
                xp.stack([x, x], axis=1), xp.expand_dims(x, axis=-1), xp.reshape(x, (-1,), copy=True), xp.full_like(x, 7),
                xp.linspace(0, 1, 5, dtype=x.dtype), xp.arange(1, 10, 2, dtype=x.dtype), xp.tril(S, k=-1), xp.triu(S),
                xp.empty_like(x).shape, xp.zeros((2, 0)), xp.asarray(3.5, dtype=x.dtype), xp.asarray([1, 2], dtype=xp.int32),
                xp.result_type(x.dtype, xp.int32), xp.finfo(x.dtype).eps, xp.iinfo(xp.int8).max)


# --- scikit-learn ------------------------------------------------------------------------------------


def skl():
    from sklearn import metrics as M
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as LDA
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge, RidgeCV
    from sklearn.metrics import pairwise as P
    from sklearn.mixture import GaussianMixture
    from sklearn.naive_bayes import GaussianNB
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import LabelBinarizer, LabelEncoder, PolynomialFeatures, StandardScaler
    from sklearn.utils import check_array, extmath
    from sklearn.utils.multiclass import type_of_target, unique_labels
    from sklearn.utils.validation import check_non_negative

    def est(name, make, fit, exact=False, slack=1.0):
        @case(name, group="sklearn", exact=exact, slack=slack)
        def _(xp, to, dtype):
            rng, X, labels = _data(dtype)
            return fit(make(), to(X), to(labels), to(X[:, 0] * 2 + X[:, 1] ** 2), xp)

    est("PCA(full).score_samples,inverse_transform", lambda: PCA(3, svd_solver="full"),
        lambda m, X, y, r, xp: (m.fit(X).score_samples(X), m.inverse_transform(m.transform(X)), m.score(X),
                                m.get_precision(), m.explained_variance_ratio_, m.noise_variance_))
    est("PCA(covariance_eigh).fit_transform", lambda: PCA(2, svd_solver="covariance_eigh", whiten=True),
        lambda m, X, y, r, xp: (xp.abs(m.fit_transform(X)), m.singular_values_))
    # (LDA's eigen and lsqr solvers are not scikit-learn's Array API: with shrinkage they mix
    # NumPy's ledoit_wolf result with the input's namespace; not run here)
    est("GaussianNB(var_smoothing).predict_joint_log_proba", lambda: GaussianNB(var_smoothing=1e-3),
        lambda m, X, y, r, xp: (m.fit(X, y).predict_log_proba(X), m.predict_joint_log_proba(X), m.theta_, m.var_,
                                m.class_prior_))
    est("GaussianMixture(kmeans init off,score_samples)",
        lambda: GaussianMixture(2, init_params="random_from_data", random_state=0, max_iter=20),
        lambda m, X, y, r, xp: (m.fit(X).score_samples(X), m.means_, m.predict_proba(X), m.bic(X), m.aic(X)),
        slack=1000)  # EM: the rounding of each step moves the stopping point
    est("Pipeline(StandardScaler,PolynomialFeatures,Ridge)",
        lambda: make_pipeline(StandardScaler(), PolynomialFeatures(2), Ridge(alpha=0.5)),
        lambda m, X, y, r, xp: (m.fit(X, r).predict(X), m[-1].coef_, m.score(X, r)))
    est("RidgeCV(alphas array,gcv mode svd,store_cv_results)",
        lambda: RidgeCV(alphas=(0.1, 1.0, 10.0), gcv_mode="svd", store_cv_results=True),
        lambda m, X, y, r, xp: (m.fit(X, r).alpha_, m.cv_results_, m.coef_, m.best_score_))
    # (Ridge's other solvers under dispatch: scikit-learn refuses them, "only supports solver 'svd'")
    est("Nystroem(rbf,n_components=10)", lambda: Nystroem(gamma=0.2, n_components=10, random_state=0),
        lambda m, X, y, r, xp: (m.fit_transform(X), m.components_), slack=100)  # an inverse square root
    est("LabelBinarizer(neg,pos).inverse_transform", lambda: LabelBinarizer(neg_label=-2, pos_label=3),
        lambda m, X, y, r, xp: (m.fit_transform(y), m.inverse_transform(m.transform(y)), m.classes_), exact=True)
    est("LabelEncoder.inverse_transform", lambda: LabelEncoder(),
        lambda m, X, y, r, xp: (m.fit_transform(y), m.inverse_transform(m.transform(y[:7])), m.classes_), exact=True)

    def fn(name, f, exact=False, slack=1.0):
        @case(name, group="sklearn", exact=exact, slack=slack)
        def _(xp, to, dtype):
            rng, X, labels = _data(dtype)
            return f(xp, to, dtype, rng, X, labels)

    fn("check_array(NaN) error", lambda xp, to, dt, rng, X, y: _raises(lambda: check_array(to(numpy.where(X > 2, numpy.nan, X)))))
    fn("check_array(inf,allow-nan) error", lambda xp, to, dt, rng, X, y: _raises(
        lambda: check_array(to(numpy.where(X > 2, numpy.inf, X)), ensure_all_finite="allow-nan")))
    fn("check_array(allow-nan) passes", lambda xp, to, dt, rng, X, y: check_array(
        to(numpy.where(X > 2, numpy.nan, X)), ensure_all_finite="allow-nan"))
    fn("check_non_negative error", lambda xp, to, dt, rng, X, y: _raises(lambda: check_non_negative(to(X), "f")))
    fn("r2_score(length mismatch) error", lambda xp, to, dt, rng, X, y: _raises(lambda: M.r2_score(to(X[:5, 0]), to(X[:6, 0]))))
    fn("log_loss(proba not summing) fixed", lambda xp, to, dt, rng, X, y: M.log_loss(
        to(y), to(numpy.abs(X[:, :3]) + 0.1)))
    fn("type_of_target,unique_labels", lambda xp, to, dt, rng, X, y: (
        type_of_target(to(y)), type_of_target(to(X[:, 0])), type_of_target(to((X[:, :2] > 0).astype(numpy.int64))),
        type_of_target(to(y.astype(dt))), unique_labels(to(y), to(y[:5]))))
    fn("extmath row_norms,softmax,fast_logdet,safe_sparse_dot", lambda xp, to, dt, rng, X, y: (
        extmath.row_norms(to(X)), extmath.row_norms(to(X), squared=True), extmath.softmax(to(X)),
        extmath.fast_logdet(to(X.T @ X)), extmath.safe_sparse_dot(to(X), to(X.T))))
    fn("confusion_matrix_at_thresholds", lambda xp, to, dt, rng, X, y: M.confusion_matrix_at_thresholds(
        to((y == 1).astype(numpy.int64)), to(X[:, 0])) if hasattr(M, "confusion_matrix_at_thresholds") else 0)
    fn("brier_score_loss(multiclass)", lambda xp, to, dt, rng, X, y: M.brier_score_loss(
        to(y), to(_softmax(X[:, :3]))))
    fn("balanced_accuracy(adjusted,sw)", lambda xp, to, dt, rng, X, y: M.balanced_accuracy_score(
        to(y), to(numpy.roll(y, 3)), adjusted=True, sample_weight=to(numpy.abs(X[:, 0]))))
    fn("cohen_kappa(linear,sw)", lambda xp, to, dt, rng, X, y: M.cohen_kappa_score(
        to(y), to(numpy.roll(y, 3)), weights="linear", sample_weight=to(numpy.abs(X[:, 0]))))
    fn("average_precision(macro,multilabel)", lambda xp, to, dt, rng, X, y: M.average_precision_score(
        to((X[:, :3] > 0).astype(numpy.int64)), to(_softmax(X[:, 1:4]))))
    fn("pairwise_distances(callable)", lambda xp, to, dt, rng, X, y: P.pairwise_distances(
        to(X[:6]), to(X[6:10]), metric=lambda a, b: float(numpy.abs(numpy.asarray(a) - numpy.asarray(b)).max())))
    fn("pairwise_distances_argmin(manhattan,axis0)", lambda xp, to, dt, rng, X, y: P.pairwise_distances_argmin(
        to(X[:10]), to(X[10:]), metric="manhattan", axis=0), exact=True)
    fn("euclidean_distances(Y_norm_squared,X_norm_squared)", lambda xp, to, dt, rng, X, y: P.euclidean_distances(
        to(X[:10]), to(X[10:]), Y_norm_squared=to((X[10:] ** 2).sum(1)[None]), X_norm_squared=to((X[:10] ** 2).sum(1)[:, None])))
    # manhattan distances: for NumPy input scikit-learn calls SciPy's cdist (float64 out of
    # float32 in), for any other namespace its own xp code (the input's float32): the
    # reference is not the same code below float64, so these run float64 data
    fn("pairwise_kernels(laplacian,gamma)", lambda xp, to, dt, rng, X, y: P.pairwise_kernels(
        to(X[:10].astype(numpy.float64)), to(X[10:].astype(numpy.float64)), metric="laplacian", gamma=0.3))
    fn("pairwise_distances(cityblock,l1)", lambda xp, to, dt, rng, X, y: (
        P.pairwise_distances(to(X[:10].astype(numpy.float64)), to(X[10:].astype(numpy.float64)), metric="cityblock"),
        P.pairwise_distances(to(X[:10].astype(numpy.float64)), metric="l1")))
    fn("mean_absolute_error(multioutput weights)", lambda xp, to, dt, rng, X, y: M.mean_absolute_error(
        to(X[:, :2]), to(X[:, 2:]), multioutput=to(numpy.array([0.2, 0.8], dtype=dt))))
    fn("d2_pinball(raw,alpha 0.1)", lambda xp, to, dt, rng, X, y: M.d2_pinball_score(
        to(X[:, :2]), to(X[:, 2:]), alpha=0.1, multioutput="raw_values"))
    fn("mean_pinball_loss(raw,sw)", lambda xp, to, dt, rng, X, y: M.mean_pinball_loss(
        to(X[:, :2]), to(X[:, 2:]), alpha=0.3, multioutput="raw_values", sample_weight=to(numpy.abs(X[:, 0]))))
    # copy=False: scikit-learn writes into the caller's array; the input afterwards is
    # part of the answer
    def inplace(make, fit_y=False):
        def f(xp, to, dt, rng, X, y):
            Xl = to(X.copy())
            est = make()
            out = est.fit_transform(Xl, to(y)) if fit_y else est.fit_transform(Xl)
            return out, Xl
        return f

    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, Normalizer, normalize
    fn("StandardScaler(copy=False) in place", inplace(lambda: StandardScaler(copy=False)))
    fn("MinMaxScaler(copy=False) in place", inplace(lambda: MinMaxScaler(copy=False)))
    fn("MaxAbsScaler(copy=False) in place", inplace(lambda: MaxAbsScaler(copy=False)))
    fn("Normalizer(copy=False) in place", inplace(lambda: Normalizer(copy=False)))
    fn("normalize(return_norm,axis0)", lambda xp, to, dt, rng, X, y: normalize(to(X), axis=0, return_norm=True))
    fn("median_absolute_error(sw,raw)", lambda xp, to, dt, rng, X, y: M.median_absolute_error(
        to(X[:, :2]), to(X[:, 2:]), multioutput="raw_values", sample_weight=to(numpy.abs(X[:, 0]))))


def _softmax(a):
    e = numpy.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _raises(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001
        return type(e)
    return ("no error", numpy.asarray(r).shape)


# --- SciPy ---------------------------------------------------------------------------------------------


def scipy_cases():
    from scipy import special as S
    from scipy import stats as T

    def sp(name, f, exact=False, slack=1.0):
        @case(name, group="scipy", exact=exact, slack=slack)
        def _(xp, to, dtype):
            rng = numpy.random.default_rng(20)
            return f(xp, to, dtype, rng)

    x01 = lambda rng, dt, n=30: rng.uniform(0.05, 0.95, n).astype(dt)  # noqa: E731
    sp("special.betainc(a,b arrays)", lambda xp, to, dt, rng: S.betainc(
        to(rng.uniform(0.5, 5, 30).astype(dt)), to(rng.uniform(0.5, 5, 30).astype(dt)), to(x01(rng, dt))), slack=100)
    sp("special.betaincc", lambda xp, to, dt, rng: S.betaincc(to(numpy.full(30, 2.0, dt)), to(numpy.full(30, 3.0, dt)), to(x01(rng, dt))), slack=100)
    sp("special.stdtr(df arrays)", lambda xp, to, dt, rng: S.stdtr(
        to(rng.uniform(1, 30, 30).astype(dt)), to(rng.normal(size=30).astype(dt))), slack=100)
    sp("special.gammainc,gammaincc(large a)", lambda xp, to, dt, rng: (
        S.gammainc(to(numpy.array([0.5, 5.0, 50.0, 200.0], dt)), to(numpy.array([0.1, 6.0, 45.0, 210.0], dt))),
        S.gammaincc(to(numpy.array([0.5, 5.0, 50.0, 200.0], dt)), to(numpy.array([0.1, 6.0, 45.0, 210.0], dt)))), slack=100)
    sp("special.gammaln,digamma,erf,erfc(tails)", lambda xp, to, dt, rng: (
        S.gammaln(to(numpy.array([1e-5, 0.5, 1, 2, 10, 150.5, 1e6], dt))),
        S.digamma(to(numpy.array([1e-5, 0.5, 1, 2, 10, 150.5, -0.5], dt))),
        S.erf(to(numpy.array([-6, -1, 0, 1e-8, 0.5, 3, 6], dt))),
        S.erfc(to(numpy.array([-6, -1, 0, 1e-8, 0.5, 3, 6, 9, 26], dt)))), slack=100)
    sp("special.logsumexp(b negative,return_sign)", lambda xp, to, dt, rng: S.logsumexp(
        to(rng.normal(size=(4, 5)).astype(dt)), b=to(rng.normal(size=(4, 5)).astype(dt)), axis=1, return_sign=True))
    sp("special.softmax,log_softmax(float32 large)", lambda xp, to, dt, rng: (
        S.softmax(to(numpy.array([[1000.0, 1001, 999], [-1e4, 0, 1e4]], dt)), axis=1),
        S.log_softmax(to(numpy.array([[1000.0, 1001, 999], [-1e4, 0, 1e4]], dt)), axis=0)))
    sp("special.xlogy,xlog1py,entr,rel_entr(edges)", lambda xp, to, dt, rng: (
        S.xlogy(to(numpy.array([0, 0, 1, 2, -1], dt)), to(numpy.array([0, -1, 0, numpy.inf, 2], dt))),
        S.xlog1py(to(numpy.array([0, 1, 2], dt)), to(numpy.array([-1, -1, 1e-9], dt))),
        S.entr(to(numpy.array([-1, 0, 0.5, 1, numpy.inf], dt))),
        S.rel_entr(to(numpy.array([0, 0, 1, 1, -1], dt)), to(numpy.array([0, 1, 0, 2, 1], dt)))))
    sp("special.kl_div,huber(edges)", lambda xp, to, dt, rng: (
        S.kl_div(to(numpy.array([0, 0, 1, 1, -1], dt)), to(numpy.array([0, 1, 0, 2, 1], dt))),
        S.huber(to(numpy.array([-1, 0, 1, 2], dt)), to(numpy.array([0.5, 1, 3, -2], dt)))))
    sp("stats.ttest_ind(equal_var False,axis1)", lambda xp, to, dt, rng: tuple(T.ttest_ind(
        to(rng.normal(size=(3, 20)).astype(dt)), to(rng.normal(0.5, 2, size=(3, 25)).astype(dt)), axis=1,
        equal_var=False)), slack=100)
    # (ttest_ind(trim=) is SciPy's NumPy-only path: it raises NotImplementedError for any other namespace)
    sp("stats.pearsonr(2d axis1)", lambda xp, to, dt, rng: tuple(T.pearsonr(
        to(rng.normal(size=(3, 20)).astype(dt)), to(rng.normal(size=(3, 20)).astype(dt)), axis=1)), slack=100)
    sp("stats.zscore(nan_policy omit)", lambda xp, to, dt, rng: T.zscore(
        to(numpy.where(numpy.arange(20) % 7 == 0, numpy.nan, rng.normal(size=20)).astype(dt)), nan_policy="omit"))
    sp("stats.skew,kurtosis(bias False,fisher False)", lambda xp, to, dt, rng: (
        T.skew(to(rng.normal(size=(4, 30)).astype(dt)), axis=1, bias=False),
        T.kurtosis(to(rng.normal(size=(4, 30)).astype(dt)), axis=1, fisher=False, bias=False)), slack=100)
    sp("stats.moment(center),variation(axis None)", lambda xp, to, dt, rng: (
        T.moment(to(rng.normal(size=(4, 30)).astype(dt)), order=3, center=0.5, axis=1),
        T.variation(to(rng.uniform(1, 2, size=(4, 30)).astype(dt)), axis=None)), slack=100)
    sp("stats.describe(axis1,ddof0)", lambda xp, to, dt, rng: tuple(T.describe(
        to(rng.normal(size=(4, 30)).astype(dt)), axis=1, ddof=0)), slack=100)
    sp("stats.sem(axis None),gmean(axis1)", lambda xp, to, dt, rng: (
        T.sem(to(rng.normal(size=(4, 30)).astype(dt)), axis=None),
        T.gmean(to(rng.uniform(1, 3, size=(4, 30)).astype(dt)), axis=1)), slack=100)
    sp("stats.skew(nan_policy propagate)", lambda xp, to, dt, rng: T.skew(
        to(numpy.where(numpy.arange(20) == 3, numpy.nan, rng.normal(size=20)).astype(dt))))
    sp("stats.false_discovery_control(bh,by)", lambda xp, to, dt, rng: (
        T.false_discovery_control(to(rng.uniform(size=20).astype(dt))),
        T.false_discovery_control(to(rng.uniform(size=(3, 8)).astype(dt)), axis=1, method="by")), slack=100)
    sp("stats.expectile", lambda xp, to, dt, rng: T.expectile(to(rng.normal(size=30).astype(dt)), alpha=0.3), slack=1000)
    sp("stats.mode(axis0)", lambda xp, to, dt, rng: tuple(T.mode(to(rng.integers(0, 4, (6, 5)).astype(dt)), axis=0)),
       exact=True)
    sp("stats.ttest_1samp(popmean array,axis1)", lambda xp, to, dt, rng: tuple(T.ttest_1samp(
        to(rng.normal(size=(3, 12)).astype(dt)), to(numpy.array([[0.0], [0.5], [-0.2]], dt)), axis=1)), slack=100)
    sp("stats.zscore(axis1,ddof1)", lambda xp, to, dt, rng: T.zscore(to(rng.normal(size=(3, 12)).astype(dt)),
                                                                    axis=1, ddof=1))
    sp("special.logsumexp(all -inf,b zero)", lambda xp, to, dt, rng: (
        S.logsumexp(to(numpy.array([[-numpy.inf, -numpy.inf], [0.0, 1.0]], dt)), axis=1),
        S.logsumexp(to(numpy.array([1.0, 2.0], dt)), b=to(numpy.array([0.0, 0.0], dt))),
        S.logsumexp(to(numpy.array([numpy.inf, 1.0], dt))), S.logsumexp(to(numpy.array([numpy.nan, 1.0], dt)))))
    sp("cluster.vq.kmeans2(points)", lambda xp, to, dt, rng: _kmeans2(xp, to, dt))
    sp("ndimage.prewitt,gaussian_gradient_magnitude", lambda xp, to, dt, rng: _nd(
        lambda nd: (nd.prewitt(to(rng.normal(size=(8, 9)).astype(dt))),
                    nd.gaussian_gradient_magnitude(to(rng.normal(size=(8, 9)).astype(dt)), 1.0))), slack=100)
    sp("ndimage.binary_dilation,grey_opening", lambda xp, to, dt, rng: _nd(
        lambda nd: (nd.binary_dilation(to(rng.uniform(size=(8, 9)) > 0.7), iterations=2),
                    nd.grey_opening(to(rng.normal(size=(8, 9)).astype(dt)), size=(3, 3)))), exact=True)
    sp("ndimage.minimum,maximum,extrema(labels)", lambda xp, to, dt, rng: _nd(
        lambda nd: (nd.minimum(to(rng.normal(size=(6, 6)).astype(dt)), to(numpy.arange(36).reshape(6, 6) % 3), index=to(numpy.arange(3))),
                    nd.maximum(to(rng.normal(size=(6, 6)).astype(dt)), to(numpy.arange(36).reshape(6, 6) % 3)))), exact=True)
    sp("fft.rfftn,irfftn(s),hfftn", lambda xp, to, dt, rng: _fft(
        lambda f: (f.rfftn(to(rng.normal(size=(4, 6)).astype(dt))), f.irfftn(to(rng.normal(size=(4, 4)).astype(dt)), s=(4, 6)),
                   f.dstn(to(rng.normal(size=(4, 6)).astype(dt)), type=2))), slack=100)
    sp("signal.unit_impulse,chirp,sawtooth", lambda xp, to, dt, rng: _sig(
        lambda s: (s.sawtooth(to(numpy.linspace(0, 10, 30).astype(dt))), s.square(to(numpy.linspace(0, 10, 30).astype(dt))),
                   s.chirp(to(numpy.linspace(0, 1, 30).astype(dt)), 1.0, 1.0, 5.0))), slack=100)


def _kmeans2(xp, to, dt):
    from scipy.cluster.vq import kmeans2

    _, X, _ = _data(dt)
    c, lab = kmeans2(to(X), to(X[[0, 10, 20]]), minit="matrix", iter=5)
    return c, lab


def _nd(f):
    from scipy import ndimage

    return f(ndimage)


def _fft(f):
    from scipy import fft

    return f(fft)


def _sig(f):
    from scipy import signal

    return f(signal)


# --- running and comparing -----------------------------------------------------------------------------


def build(groups=("script", "sklearn", "scipy")):
    if "script" in groups and not any(v[1] == "script" for v in CASES.values()):
        scripts()
    if "sklearn" in groups and not any(v[1] == "sklearn" for v in CASES.values()):
        skl()
    if "scipy" in groups and not any(v[1] == "scipy" for v in CASES.values()):
        scipy_cases()


def _leaves(r, prefix=""):
    if isinstance(r, dict):
        for k, v in r.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(r, (tuple, list)):
        yield prefix + "#type", type(r).__name__
        for i, v in enumerate(r):
            yield from _leaves(v, f"{prefix}[{i}]")
    elif isinstance(r, type) and issubclass(r, BaseException):
        yield prefix, r  # an exception raised: the lazy one must be NumPy's type or a subclass of it
    elif isinstance(r, (str, bool, int, float, complex, type(None), numpy.dtype)) and not isinstance(r, numpy.generic):
        yield prefix, r  # a Python value: compared as it is (type and value)
    else:
        yield prefix, numpy.asarray(r)


def compare(got, want, rtol, exact):
    """Mismatch messages (empty: the results agree)."""
    g, w = dict(_leaves(got)), dict(_leaves(want))
    if g.keys() != w.keys():
        return [f"result structure differs: {sorted(g)} vs {sorted(w)}"]
    bad = []
    for k, wv in w.items():
        gv = g[k]
        if isinstance(wv, type):
            # a deferred check raises at the barrier a subclass of NumPy's type (``BarrierLinAlgError``
            # is a ``LinAlgError``): what ``except`` in the user's code sees
            if not (isinstance(gv, type) and issubclass(gv, wv)):
                bad.append(f"{k}: raised {gv!r}, NumPy raised {wv.__name__}")
            continue
        if not isinstance(wv, numpy.ndarray):
            same = type(gv) is type(wv) and (gv == wv or (isinstance(wv, float) and gv != gv and wv != wv)
                                             if not isinstance(wv, float) or exact else
                                             abs(gv - wv) <= rtol * max(1.0, abs(wv)) or (gv != gv and wv != wv))
            if not same:
                bad.append(f"{k}: {gv!r} ({type(gv).__name__}) vs {wv!r} ({type(wv).__name__})")
            continue
        if not isinstance(gv, numpy.ndarray):
            bad.append(f"{k}: {type(gv).__name__} vs an array")
            continue
        if gv.shape != wv.shape:
            bad.append(f"{k}: shape {gv.shape} vs {wv.shape}")
        elif gv.dtype != wv.dtype:
            bad.append(f"{k}: dtype {gv.dtype} vs {wv.dtype}")
        elif exact or wv.dtype.kind not in "fc":
            if not numpy.array_equal(gv, wv, equal_nan=wv.dtype.kind in "fc"):
                bad.append(f"{k}: {gv.ravel()[:8]} vs {wv.ravel()[:8]} (exact)")
        else:
            r = rtol * (10 if wv.dtype == numpy.float32 and rtol < 1e-6 else 1)
            scale = float(numpy.nanmax(numpy.abs(wv[numpy.isfinite(wv)]))) if numpy.isfinite(wv).any() else 0.0
            if not numpy.allclose(gv, wv, rtol=r, atol=r * scale, equal_nan=True):
                err = numpy.nanmax(numpy.abs(gv.astype(complex) - wv)) if gv.size else 0
                bad.append(f"{k}: max abs diff {err:.3g} (scale {scale:.3g}, rtol {r:g})")
    return bad


def run_case(name, dtype):
    import lazycore.numpy as lnp
    from lazycore.observe import metrics

    fn, group, exact, slack = CASES[name]
    rtol = RTOL[dtype] * slack
    out = {"case": name, "dtype": dtype}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = fn(numpy, lambda a: a, numpy.dtype(dtype))
        except Exception as e:  # noqa: BLE001
            want = ("raised", type(e))
        metrics.reset()
        t0 = time.perf_counter()
        try:
            try:
                got = fn(lnp, lnp.asarray, numpy.dtype(dtype))
            except Exception as e:  # noqa: BLE001
                if not (type(want) is tuple and len(want) == 2 and want[0] == "raised" and isinstance(e, want[1])):
                    raise
                got = ("raised", type(e))
            bad = compare(got, want, rtol, exact)
        except Exception as e:  # noqa: BLE001
            out.update(status="error", error=f"{type(e).__name__}: {e}", trace=traceback.format_exc(limit=-6))
            bad = None
        out["seconds"] = round(time.perf_counter() - t0, 2)
    out["fallbacks"] = {k: sum(v.values()) for k, v in metrics.fallbacks().items()}
    if bad is not None:
        out["status"] = "ok" if not bad else "mismatch"
        out["mismatch"] = bad
    return out


def main(argv):
    os.environ.setdefault("SCIPY_ARRAY_API", "1")
    import sklearn

    sklearn.set_config(array_api_dispatch=True)
    if argv[:1] == ["--list"]:
        build(tuple(argv[1:]) or ("script", "sklearn", "scipy"))
        print(json.dumps([n for n, v in CASES.items() if not argv[1:] or v[1] in argv[1:]]))
        return
    build()
    if argv[:1] == ["--group"]:
        argv = [n for n, v in CASES.items() if v[1] in argv[1:]]
    unknown = [n for n in argv if n not in CASES]
    if unknown:
        raise SystemExit(f"unknown cases: {unknown}")
    for name in argv or list(CASES):
        for dtype in ("float32", "float64"):
            print(json.dumps(run_case(name, dtype)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
