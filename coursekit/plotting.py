"""What every snippets/*/figures.py draws with: the course's legend, margins, whisker note, colours
and the names of the stored hardware sets, in one place (torch-free; plotly only where a figure
is built).

    from coursekit.plotting import REFERENCE, WHISKERS, legend, margin

    fig.update_layout(height=420, margin=margin(t=40), legend=legend(-0.22, whiskers=True))

``legend(y)`` is the course's horizontal legend under the plot, its top at ``y`` (a fraction of
the plot's height, negative: below the x axis); ``whiskers=True`` titles it with what the error
bars show. ``margin()`` defaults to room for a y-axis title on the left and a legend below; the
axes' ``automargin`` (figures.js and the notebooks set it) grows it where tick labels need more.
A notebook inlines what its figure code uses of this module (coursekit/deps.py), like any helper.
"""

from __future__ import annotations

# ---------------------------------------------------------------- the stored sets

REFERENCE = "nvidia-h200"  # the reference run (coursekit.results.REFERENCE_HARDWARE)
RERUN = "nvidia-h200-rerun"  # the second forced run of the same snippets at the same code
RUNS = {"first": REFERENCE, "second": RERUN}  # the build's two forced runs, by name
RUN_LABELS = {"first": "reference run", "second": "second run"}

# ---------------------------------------------------------------- words and colours

WHISKERS = "whiskers: 10th to 90th percentile"

BLUE = "#1f5fbf"
ORANGE = "#e07b00"
GREEN = "#2e8b57"
BROWN = "#8c564b"
RED = "#c0392b"
PURPLE = "#6a3d9a"
GREY = "grey"


# ---------------------------------------------------------------- layout


def legend(y: float = -0.2, whiskers: bool = False, **extra) -> dict:
    """The course's legend: a row under the plot, its top at ``y``; ``whiskers``: titled with what
    the error bars show."""
    out = {"orientation": "h", "yanchor": "top", "y": y, **extra}
    if whiskers:
        out["title"] = {"text": WHISKERS, "side": "top"}
    return out


def margin(l: int = 70, r: int = 20, t: int = 20, b: int = 60) -> dict:  # noqa: E741 (plotly's names)
    """Plot margins in pixels: room for a y-axis title (left) and the legend (below)."""
    return {"l": l, "r": r, "t": t, "b": b}


def number(value: float) -> str:
    """A measured number in a legend or label: whole, with thousands separators, from 100 up; three
    significant digits below (a CPU's 0.018 GB/s is not "0 GB/s")."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
