import sys
import types

import matplotlib.pyplot as plt
import mxnet as mx
import numpy as onp
import pytest

from d2lattn import Animator, plot, show_heatmaps
from d2lattn.plotting import SIGNED_CMAP, WEIGHTS_CMAP, colour_scale

KEYS, QUERIES, TITLES = list("vwxyz"), list("ABCD"), ["head 1", "head 2", "head 3"]


def heatmap_data():
    """(2, 3, 4, 5) weights whose panels have different ranges: panel (0, 1) peaks at 0.23,
    panel (1, 2) at 0.6, none reaches 0 or 1."""
    mats = onp.random.default_rng(0).uniform(0.05, 0.9, (2, 3, 4, 5))
    mats[0, 1] *= 0.23 / mats[0, 1].max()
    mats[1, 2] *= 0.6 / mats[1, 2].max()
    return mats


def heatmaps(matrices, *args, **kwargs):
    """Call show_heatmaps (which returns None) and return its panels as a (rows, cols) array."""
    assert show_heatmaps(matrices, *args, **kwargs) is None
    rows, cols = matrices.shape[:2]
    return onp.array(plt.gcf().axes[:rows * cols], dtype=object).reshape(rows, cols)


def texts(labels):
    return [label.get_text() for label in labels]


def line_data(axes):
    return [(list(line.get_xdata()), list(line.get_ydata())) for line in axes.get_lines()]


# --- show_heatmaps ----------------------------------------------------------------------------

def test_show_heatmaps_grid_and_one_colorbar():
    axes = heatmaps(heatmap_data(), "keys", "queries", titles=TITLES)
    assert axes.shape == (2, 3)
    fig = axes[0, 0].figure
    assert len(fig.axes) == 2 * 3 + 1  # the panels and one shared colorbar
    colorbars = [im.colorbar for ax in axes.flat for im in ax.images if im.colorbar is not None]
    assert len(colorbars) == 1 and colorbars[0].ax is fig.axes[-1]


def test_show_heatmaps_draws_weights_on_the_fixed_scale_0_to_1():
    """A panel peaking at 0.23 must look weaker than one at 0.6, in one call or in two."""
    mats = heatmap_data()
    for grid in (mats, mats[:1, 1:2], mats[1:, 2:]):
        axes = heatmaps(grid, "keys", "queries")
        for (i, j), ax in onp.ndenumerate(axes):
            (image,) = ax.images
            onp.testing.assert_array_equal(image.get_array(), grid[i, j])
            assert image.get_clim() == (0.0, 1.0)
            assert image.get_cmap().name == WEIGHTS_CMAP
        plt.close("all")


def test_show_heatmaps_tolerates_float32_rounding_of_weights():
    ones = onp.ones((1, 1, 2, 2), dtype="float32") + onp.float32(1e-7)
    assert heatmaps(ones, "k", "q")[0, 0].images[0].get_clim() == (0.0, 1.0)


@pytest.mark.parametrize("value", [-0.02, 1.5])
def test_show_heatmaps_rejects_weights_outside_0_1(value):
    mats = heatmap_data()
    mats[1, 0, 2, 3] = value
    with pytest.raises(ValueError, match="matrices must be attention weights in \\[0, 1\\]"
                                         ".*signed=True"):
        show_heatmaps(mats, "k", "q")
    assert plt.get_fignums() == []


def test_show_heatmaps_signed_is_diverging_and_centred_at_zero():
    mats = heatmap_data() - 0.3
    mats[0, 2, 1, 1] = -2.5  # the largest magnitude is negative
    axes = heatmaps(mats, "k", "q", signed=True)
    for ax in axes.flat:
        (image,) = ax.images
        assert image.get_clim() == (-2.5, 2.5)
        assert image.get_cmap().name == SIGNED_CMAP
    assert colour_scale(onp.zeros((1, 1, 2, 2)), signed=True) == (-1.0, 1.0)  # all zero


def colours(image):
    """The RGBA colour of each cell of a drawn image, as its figure shows it."""
    image.figure.canvas.draw()  # the colorbar may adjust the scale when drawn
    return image.to_rgba(image.get_array())


def test_show_heatmaps_signed_int8_spans_minus_128():
    """|int8 -128| is -128 in int8: the scale was (-5, 5) for these cells, 5 the darkest red."""
    (image,) = heatmaps(onp.array([[[[-128, 5]]]], dtype="int8"), "k", "q",
                        signed=True)[0, 0].images
    assert image.get_clim() == (-128.0, 128.0)
    cmap = plt.get_cmap(SIGNED_CMAP)
    onp.testing.assert_allclose(colours(image)[0], [cmap(0.0), cmap((5 + 128) / 256)])


@pytest.mark.parametrize("scale", [1e-300, 1e-310])
def test_show_heatmaps_signed_tiny_values_keep_their_colours(scale):
    """matplotlib widened a scale of +-1e-300 to +-0.1: every cell was drawn white."""
    mats = onp.array([[[[-1.0, -0.3, 0.0, 0.55, 1.0]]]])  # no cell at a colour boundary
    (expected,) = heatmaps(mats, "k", "q", signed=True)[0, 0].images
    (image,) = heatmaps(mats * scale, "k", "q", signed=True)[0, 0].images
    onp.testing.assert_allclose(colours(image), colours(expected), atol=1e-12)
    assert image.colorbar.ax.get_ylabel() == f"x {scale:.3g}"
    assert expected.colorbar.ax.get_ylabel() == ""


def test_show_heatmaps_leaves_non_finite_cells_blank():
    mats = heatmap_data()
    mats[0, 0, 0, 0], mats[1, 1, 1, 1] = onp.nan, onp.inf
    axes = heatmaps(mats, "k", "q")
    assert onp.ma.is_masked(axes[0, 0].images[0].get_array()[0, 0])  # drawn blank
    assert onp.ma.is_masked(axes[1, 1].images[0].get_array()[1, 1])
    assert colour_scale(onp.full((1, 1, 2, 2), onp.nan), signed=True) == (-1.0, 1.0)


def test_show_heatmaps_cmap_replaces_the_colour_map_not_the_scale():
    axes = heatmaps(heatmap_data(), "k", "q", cmap="Blues")
    assert axes[0, 0].images[0].get_cmap().name == "Blues"
    assert axes[0, 0].images[0].get_clim() == (0.0, 1.0)


def test_show_heatmaps_rejects_a_signed_that_is_not_a_bool():
    with pytest.raises(TypeError, match="signed must be a bool, got 'yes'"):
        show_heatmaps(heatmap_data(), "k", "q", signed="yes")


def test_show_heatmaps_labels_titles_and_tokens():
    axes = heatmaps(heatmap_data(), "keys", "queries", titles=TITLES,
                         xticklabels=KEYS, yticklabels=QUERIES)
    for (i, j), ax in onp.ndenumerate(axes):
        assert ax.get_title() == TITLES[j]
        assert ax.get_xlabel() == ("keys" if i == 1 else "")  # bottom row only
        assert ax.get_ylabel() == ("queries" if j == 0 else "")  # left column only
        assert list(ax.get_xticks()) == list(range(5))
        assert list(ax.get_yticks()) == list(range(4))
    # Shared axes show tick labels on the outer panels only.
    for ax in axes[-1]:
        assert texts(ax.get_xticklabels()) == KEYS
    for ax in axes[:, 0]:
        assert texts(ax.get_yticklabels()) == QUERIES


def test_show_heatmaps_figure_size_is_per_panel():
    axes = heatmaps(heatmap_data(), "k", "q", figsize=(2, 1.5))
    assert tuple(axes[0, 0].figure.get_size_inches()) == pytest.approx((2 * 3, 1.5 * 2))


def test_show_heatmaps_accepts_mxnet_arrays():
    mats = heatmap_data()
    axes = heatmaps(mx.np.array(mats), "k", "q")
    onp.testing.assert_allclose(axes[1, 2].images[0].get_array(), mats[1, 2], rtol=1e-6)


def test_show_heatmaps_single_panel():
    axes = heatmaps(onp.eye(3)[None, None], "k", "q", titles=["only"])
    assert axes.shape == (1, 1) and axes[0, 0].get_title() == "only"


@pytest.mark.parametrize("shape", [(4, 5), (3, 4, 5), (1, 2, 3, 4, 5)])
def test_show_heatmaps_rejects_wrong_ndim(shape):
    with pytest.raises(ValueError, match="matrices must be 4-D"):
        show_heatmaps(onp.zeros(shape), "k", "q")


@pytest.mark.parametrize("name, value", [("titles", ["a", "b"]), ("xticklabels", list("abcd")),
                                         ("yticklabels", list("abcde"))])
def test_show_heatmaps_rejects_wrong_label_counts(name, value):
    with pytest.raises(ValueError, match=f"{name} must have"):
        show_heatmaps(heatmap_data(), "k", "q", **{name: value})
    assert plt.get_fignums() == []  # validated before any figure is created


# --- plot -------------------------------------------------------------------------------------

def test_plot_one_curve_over_positions():
    axes = plot([3, 1, 2])
    assert line_data(axes) == [([0, 1, 2], [3, 1, 2])]


def test_plot_several_curves_share_x():
    x = onp.arange(4.0)
    axes = plot(x, [x ** 2, mx.np.array(x + 1)], xlabel="x", ylabel="y", legend=["sq", "inc"])
    assert line_data(axes) == [([0, 1, 2, 3], [0, 1, 4, 9]), ([0, 1, 2, 3], [1, 2, 3, 4])]
    assert (axes.get_xlabel(), axes.get_ylabel()) == ("x", "y")
    assert texts(axes.get_legend().get_texts()) == ["sq", "inc"]


def test_plot_with_one_x_per_curve():
    axes = plot([[0, 1], [5, 6, 7]], [[1, 2], [3, 4, 5]])
    assert line_data(axes) == [([0, 1], [1, 2]), ([5, 6, 7], [3, 4, 5])]


def test_plot_cycles_through_formats():
    axes = plot([[1, 2]] * 5)
    lines = axes.get_lines()
    styles = [(line.get_color(), line.get_linestyle()) for line in lines]
    assert styles[1:4] == [("m", "--"), ("g", "-."), ("r", ":")]
    assert lines[0].get_linestyle() == lines[4].get_linestyle() == "-"  # the fifth reuses "-"


def test_plot_sets_limits_and_scales():
    axes = plot([1, 10, 100], [1, 2, 3], xlim=(1, 100), ylim=(0.5, 3.5), xscale="log")
    assert axes.get_xlim() == (1, 100) and axes.get_ylim() == (0.5, 3.5)
    assert (axes.get_xscale(), axes.get_yscale()) == ("log", "linear")
    assert axes.get_legend() is None


def test_plot_draws_on_given_axes():
    fig, given = plt.subplots()
    assert plot([1, 2], axes=given) is given
    assert len(given.get_lines()) == 1 and plt.get_fignums() == [fig.number]


def test_plot_rejects_mismatched_curve_counts():
    with pytest.raises(ValueError, match="X has 3 curves but Y has 2"):
        plot([[0, 1]] * 3, [[1, 2]] * 2)


# --- Animator ---------------------------------------------------------------------------------

@pytest.fixture
def fake_ipython(monkeypatch):
    """Pretend to run in IPython; record display() calls and the updates of its handle."""
    calls = {"display": [], "update": []}

    class Handle:
        def update(self, obj):
            calls["update"].append(obj)

    def display(obj, display_id=None):
        calls["display"].append((obj, display_id))
        return Handle()

    try:
        import IPython
        import IPython.display
        monkeypatch.setattr(IPython, "get_ipython", lambda: object())
        monkeypatch.setattr(IPython.display, "display", display)
    except ImportError:  # IPython is not installed: stand-in modules with the two names
        fake = types.ModuleType("IPython")
        fake.get_ipython = lambda: object()
        fake.display = types.ModuleType("IPython.display")
        fake.display.display = display
        monkeypatch.setitem(sys.modules, "IPython", fake)
        monkeypatch.setitem(sys.modules, "IPython.display", fake.display)
    return calls


def test_animator_accumulates_one_curve():
    anim = Animator()
    for x, y in [(1, 0.5), (2.0, onp.float32(0.25)), (3, 0.125)]:
        anim.add(x, y)
    assert line_data(anim.axes) == [([1, 2, 3], [0.5, 0.25, 0.125])]


@pytest.mark.parametrize("scalar", [mx.np.array(0.125), onp.array(0.125)], ids=["mx", "numpy"])
def test_animator_accepts_0d_arrays(scalar):
    anim = Animator()
    anim.add(1, scalar)  # e.g. a loss.mean() passed as is
    assert line_data(anim.axes) == [([1], [0.125])]


def test_animator_accumulates_several_curves():
    anim = Animator(legend=["train", "test"])
    anim.add(1, [0.9, 0.8])
    anim.add(2, [0.7, None])  # None: no point for that curve at x = 2
    anim.add([3, 4], [0.5, 0.4])  # one x per curve
    assert line_data(anim.axes) == [([1, 2, 3], [0.9, 0.7, 0.5]), ([1, 4], [0.8, 0.4])]
    assert texts(anim.axes.get_legend().get_texts()) == ["train", "test"]


def test_animator_keeps_its_axes_configuration():
    anim = Animator(xlabel="epoch", ylabel="loss", xlim=(1, 10), ylim=(0.01, 1), yscale="log",
                    fmts=("b:",))
    anim.add(1, 0.5)
    anim.add(2, 0.1)  # add() clears the axes and must set them up again
    ax = anim.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("epoch", "loss")
    assert ax.get_xlim() == (1, 10) and ax.get_ylim() == pytest.approx((0.01, 1))
    assert ax.get_yscale() == "log"
    assert (ax.get_lines()[0].get_color(), ax.get_lines()[0].get_linestyle()) == ("b", ":")


def test_animator_rejects_a_different_number_of_curves():
    anim = Animator()
    anim.add(1, [0.1, 0.2])
    with pytest.raises(ValueError, match="this Animator draws 2 curves, got 3 x and 3 y values"):
        anim.add(2, [0.1, 0.2, 0.3])
    assert line_data(anim.axes) == [([1], [0.1]), ([1], [0.2])]


def test_animator_leaves_no_open_figure():
    Animator().add(1, 1.0)
    assert plt.get_fignums() == []  # shown through its own display, not pyplot's


def test_animator_updates_one_display_in_ipython(fake_ipython):
    anim = Animator()
    for epoch in range(1, 4):
        anim.add(epoch, 1 / epoch)
    assert fake_ipython["display"] == [(anim.fig, True)]
    assert fake_ipython["update"] == [anim.fig, anim.fig]


def test_animator_displays_nothing_outside_ipython(fake_ipython, monkeypatch):
    monkeypatch.setattr(sys.modules["IPython"], "get_ipython", lambda: None)
    Animator().add(1, 1.0)
    assert fake_ipython == {"display": [], "update": []}


def test_animator_works_without_ipython(monkeypatch):
    monkeypatch.setitem(sys.modules, "IPython", None)  # import IPython raises ImportError
    anim = Animator()
    anim.add(1, 2.0)
    assert line_data(anim.axes) == [([1], [2.0])]


def test_animator_rejects_x_and_y_of_different_lengths():
    anim = Animator()
    with pytest.raises(ValueError, match="got 2 x and 3 y values"):
        anim.add([1, 2], [0.1, 0.2, 0.3])
