"""The scoreboard page's summary figure: every race of the course's programs against a peer, from
stored results alone (coursekit/scoreboard.py computes each race's ratio, as the page's table does)."""

import plotly.graph_objects as go

from coursekit.plotting import GREEN, ORANGE, legend
from coursekit.scoreboard import race_ratio, reader_label

# how a race stands against its target, as the data say: its 10th percentile clears the target
# too, only its median does (the target lies inside the noise), or its median misses it
VERDICTS = [
    ("met", "met, beyond the noise", "circle", GREEN),
    ("noise", "met on the median, inside the noise", "diamond-open", ORANGE),
    ("missed", "missed", "x", "#c62828"),
]
CHAPTER_NAMES = {"07": "07 Triton", "11": "11 MoE", "12": "12 top-k", "14": "14 server"}


def _verdict(ratio: float, p10: float, target: float) -> str:
    if ratio < target:
        return "missed"
    return "met" if p10 >= target else "noise"


def races(results) -> go.Figure:
    """Each race's ratio (theirs / ours) over its target, on a log scale, grouped by chapter: at or
    above 1 the target is met. Whiskers from the ratio's 10th percentile to its median."""
    rows = []
    for key in results.keys():
        doc = results.document(key)
        stored = doc["data"].get("races", [])
        if not stored:
            results.forget(key)  # read only to look: the figure draws nothing of it
            continue
        for race in stored:
            ratio, p10, _ = race_ratio(race)
            chapter = race["chapter"].split("/")[-1][:2]
            rows.append(
                {
                    "chapter": chapter,
                    "label": f"{reader_label(race['name'])} vs {reader_label(race['peer'])}",
                    "ratio": ratio,
                    "p10": p10,
                    "target": race["bar"],
                    "verdict": _verdict(ratio, p10, race["bar"]),
                }
            )
    rows.sort(key=lambda r: r["chapter"])
    x, ticks, names, at = [], [], [], 0
    for i, r in enumerate(rows):
        if i and r["chapter"] != rows[i - 1]["chapter"]:
            at += 2  # a gap between chapters
        x.append(at)
        at += 1
    for chapter in sorted({r["chapter"] for r in rows}):
        xs = [x[i] for i, r in enumerate(rows) if r["chapter"] == chapter]
        ticks.append((xs[0] + xs[-1]) / 2)
        names.append(CHAPTER_NAMES.get(chapter, chapter))
    fig = go.Figure()
    for verdict, name, symbol, color in VERDICTS:
        mine = [(x[i], r) for i, r in enumerate(rows) if r["verdict"] == verdict]
        if not mine:
            continue
        fig.add_trace(
            go.Scatter(
                x=[at_ for at_, _ in mine],
                y=[r["ratio"] / r["target"] for _, r in mine],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [0.0] * len(mine),
                    "arrayminus": [(r["ratio"] - r["p10"]) / r["target"] for _, r in mine],
                    "thickness": 1,
                    "width": 0,
                },
                customdata=[[r["label"], r["ratio"], r["p10"], r["target"]] for _, r in mine],
                mode="markers",
                name=name,
                marker={"symbol": symbol, "size": 9, "color": color, "line": {"width": 1.5}},
                hovertemplate="%{customdata[0]}<br>ratio %{customdata[1]:.2f} (p10 %{customdata[2]:.2f}), "
                "target %{customdata[3]:.2f}<extra>" + name + "</extra>",
            )
        )
    fig.add_hline(y=1, line={"dash": "dash", "width": 1})
    fig.update_xaxes(title_text="race, by chapter", tickvals=ticks, ticktext=names, showgrid=False, zeroline=False)
    fig.update_yaxes(type="log", title_text="ratio over its target (theirs / ours / target, log scale)")
    fig.update_layout(height=440, legend=legend(-0.2), margin={"t": 20})
    return fig
