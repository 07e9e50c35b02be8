"""Plots for the book: curves, attention heatmaps and live training curves (matplotlib)."""
import matplotlib.pyplot as plt
import numpy as onp

from ._checks import check_bool


def _to_numpy(x):
    return x.asnumpy() if hasattr(x, "asnumpy") else onp.asarray(x)


WEIGHTS_CMAP = "Reds"  # attention weights, 0 to 1: sequential
SIGNED_CMAP = "RdBu_r"  # signed values: diverging, white at 0
WEIGHTS_SLACK = 1e-5  # float32 rounding: a softmax row may reach 1.0000001
# Below this largest magnitude matplotlib's colorbar widens the scale to +-0.1
# (transforms.nonsingular), which draws every cell white: such values are drawn in units of it.
TINY_SCALE = 1e21 * onp.finfo(float).tiny


def show_heatmaps(matrices, xlabel, ylabel, titles=None, figsize=(2.5, 2.5), cmap=None,
                  xticklabels=None, yticklabels=None, signed=False):
    """Draw a grid of heatmaps with one shared colour scale and colorbar.

    matrices: (rows, cols, queries, keys), e.g. (1, heads, queries, keys); ``figsize`` is the
    size of one panel. ``titles`` has one entry per column; ``xticklabels`` (keys) and
    ``yticklabels`` (queries) label the axes with tokens instead of positions.
    By default the matrices are attention weights: drawn in ``WEIGHTS_CMAP`` on the fixed scale
    0 to 1, so that every heatmap of weights compares with every other one, also across calls;
    a value outside [0, 1] is an error. ``signed=True`` draws values of either sign in the
    diverging ``SIGNED_CMAP``, centred at 0 and spanning the largest magnitude m (below
    ``TINY_SCALE``, in units of m: the colorbar is labelled "x m"). ``cmap`` replaces the
    colour map. NaN and infinite cells are left blank.
    Returns None, so that a notebook cell ending with the call shows only the figure
    (get it with ``plt.gcf()``).
    """
    mats = _to_numpy(matrices)
    if mats.ndim != 4:
        raise ValueError(f"matrices must be 4-D (rows, cols, queries, keys), got shape {mats.shape}")
    if 0 in mats.shape:
        raise ValueError(f"matrices must have no empty axis, got shape {mats.shape}")
    rows, cols, n_q, n_k = mats.shape
    _check_len("titles", titles, cols)
    _check_len("xticklabels", xticklabels, n_k)
    _check_len("yticklabels", yticklabels, n_q)
    vmin, vmax = colour_scale(mats, check_bool("signed", signed))
    unit = vmax if vmax < TINY_SCALE else None
    if unit:
        mats, vmin, vmax = mats / unit, -1.0, 1.0
    fig, axes = plt.subplots(rows, cols, figsize=(figsize[0] * cols, figsize[1] * rows),
                             sharex=True, sharey=True, squeeze=False)
    for i in range(rows):
        for j in range(cols):
            ax = axes[i, j]
            image = ax.imshow(onp.where(onp.isfinite(mats[i, j]), mats[i, j], onp.nan),
                              cmap=cmap or (SIGNED_CMAP if signed else WEIGHTS_CMAP),
                              vmin=vmin, vmax=vmax)
            if i == rows - 1:
                ax.set_xlabel(xlabel)
            if j == 0:
                ax.set_ylabel(ylabel)
            if titles:
                ax.set_title(titles[j])
            if xticklabels is not None:
                ax.set_xticks(range(n_k), xticklabels, rotation=90)
            if yticklabels is not None:
                ax.set_yticks(range(n_q), yticklabels)
    colorbar = fig.colorbar(image, ax=axes, shrink=0.6)
    if unit:
        colorbar.set_label(f"x {unit:.3g}")


def colour_scale(matrices, signed=False):
    """The (vmin, vmax) of ``show_heatmaps``: (0, 1) for attention weights, which must lie
    in [0, 1]; for ``signed`` values (-m, m) with m the largest finite magnitude (1 if none)."""
    values = onp.asarray(matrices, dtype="float64")  # |int8 -128| is -128 in int8
    finite = values[onp.isfinite(values)]  # NaN would make min() NaN
    if signed:
        m = float(onp.abs(finite).max()) if finite.size else 0.0
        return (-m, m) if m > 0 else (-1.0, 1.0)
    if finite.size and (finite.min() < -WEIGHTS_SLACK or finite.max() > 1 + WEIGHTS_SLACK):
        raise ValueError(f"matrices must be attention weights in [0, 1], got values from "
                         f"{finite.min():.3g} to {finite.max():.3g}: pass signed=True for "
                         "values of either sign")
    return 0.0, 1.0


def _check_len(name, labels, n):
    if labels is not None and len(labels) != n:
        raise ValueError(f"{name} must have {n} entries, got {len(labels)}")


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"), figsize=(3.5, 2.5),
         axes=None):
    """Plot one or several curves: ``Y`` a list of sequences over ``X`` (or ``X`` alone).

    ``X`` may be one sequence shared by every curve or a list with one per curve.
    Returns the axes.
    """
    if Y is None:
        X, Y = None, X
    Y = [_to_numpy(y) for y in (Y if _is_list_of_curves(Y) else [Y])]
    if X is None:
        X = [onp.arange(len(y)) for y in Y]
    elif _is_list_of_curves(X):
        X = [_to_numpy(x) for x in X]
    else:
        X = [_to_numpy(X)] * len(Y)
    if len(X) != len(Y):
        raise ValueError(f"X has {len(X)} curves but Y has {len(Y)}")
    if axes is None:
        axes = plt.figure(figsize=figsize).gca()
    for x, y, fmt in zip(X, Y, _cycle(fmts, len(Y))):
        axes.plot(x, y, fmt)
    _set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend)
    return axes


def _is_list_of_curves(X):
    return isinstance(X, (list, tuple)) and len(X) > 0 and hasattr(X[0], "__len__")


def _cycle(fmts, n):
    return [fmts[i % len(fmts)] for i in range(n)]


def _set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend):
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    if xlim:
        axes.set_xlim(xlim)
    if ylim:
        axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid(True)


def _values(v):
    """A number, a 0-d or 1-d array, or a list (which may hold None) as a list."""
    if isinstance(v, (list, tuple)):
        return list(v)
    return _to_numpy(v).reshape(-1).tolist()


class Animator:
    """A training curve that redraws in place as points are added.

    In Jupyter the figure is one display updated by id, so text printed in the same cell
    (logs, final scores) stays in the stored notebook; d2l's version cleared it.
    """

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
                 xscale="linear", yscale="linear", fmts=("-", "m--", "g-.", "r:"),
                 figsize=(3.5, 2.5)):
        self.fig, self.axes = plt.subplots(figsize=figsize)
        self.config = (xlabel, ylabel, xlim, ylim, xscale, yscale, legend)
        self.fmts = fmts
        self.X, self.Y = None, None
        self._handle = None
        plt.close(self.fig)  # shown through our own display, not the inline backend

    def add(self, x, y):
        """Add one point per curve: ``y`` a number or a list (one per curve) at ``x``."""
        ys = _values(y)
        xs = _values(x)
        xs = xs * len(ys) if len(xs) == 1 else xs
        if self.X is None:
            self.X, self.Y = [[] for _ in ys], [[] for _ in ys]
        if len(ys) != len(self.Y) or len(xs) != len(ys):
            raise ValueError(f"this Animator draws {len(self.Y)} curves, got {len(xs)} x "
                             f"and {len(ys)} y values")
        for i, (a, b) in enumerate(zip(xs, ys)):
            if a is not None and b is not None:
                self.X[i].append(float(a))
                self.Y[i].append(float(b))
        self.axes.cla()
        for x_i, y_i, fmt in zip(self.X, self.Y, _cycle(self.fmts, len(self.Y))):
            self.axes.plot(x_i, y_i, fmt)
        _set_axes(self.axes, *self.config)
        self._show()

    def _show(self):
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:  # plain Python: nothing to display
            return
        if get_ipython() is None:
            return
        if self._handle is None:
            self._handle = display(self.fig, display_id=True)
        else:
            self._handle.update(self.fig)
