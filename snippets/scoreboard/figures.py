"""The scoreboard page's summary figure: every race of the course's programs against a peer, from
stored results alone (coursekit/scoreboard.py computes each race's ratio and verdict, as the page's
table does)."""

import plotly.graph_objects as go

from coursekit.plotting import GREEN, ORANGE, legend
from coursekit.results import is_cpu_set
from coursekit.scoreboard import MEETS, MISSES, NOISE, flipped, median_meets, race_id, race_ratio, reader_label, verdict

# how a race stands against the course's target, as the scoreboard decides it (coursekit/scoreboard.py):
# its 10th percentile reaches the target, the target lies inside its spread (or two GPU runs' medians
# fall on different sides of it), or its 90th percentile falls short of it
VERDICTS = [
    (MEETS, "meets the course's target, beyond the noise", "circle", GREEN),
    (NOISE, "within noise: the course's target inside the spread, or the two runs disagree", "diamond-open", ORANGE),
    (MISSES, "misses the course's target, beyond the noise", "x", "#c62828"),
]
CHAPTER_NAMES = {"07": "07 Triton", "11": "11 MoE", "12": "12 top-k", "14": "14 server"}


def _other_runs(results, stored: dict) -> dict:
    """{GPU set: {race id: median meets}} for the races of ``stored`` ({key: races}) in every other GPU
    set (none when the drawn set is a CPU set): what the scoreboard's cross-run rule compares."""
    if is_cpu_set(results.hardware):
        return {}
    out = {}
    for other in results.hardware_sets():
        if other == results.hardware or is_cpu_set(other):
            continue
        out[other] = {}
        for key in stored:
            try:
                doc = results.document(key, other)
            except KeyError:  # that run did not measure it
                continue
            out[other].update({race_id(key, race): median_meets(race) for race in doc["data"].get("races", [])})
    return out


def races(results) -> go.Figure:
    """Each race's ratio (theirs / ours) over the course's target, on a log scale, grouped by chapter:
    at or above 1 the median reaches the target. Whiskers from the ratio's 10th to its 90th percentile;
    the marker is the scoreboard's verdict."""
    stored = {}
    for key in results.keys():
        doc = results.document(key)
        if not doc["data"].get("races", []):
            results.forget(key)  # read only to look: the figure draws nothing of it
            continue
        stored[key] = doc["data"]["races"]
    medians = _other_runs(results, stored)
    medians[results.hardware] = {race_id(k, race): median_meets(race) for k, rs in stored.items() for race in rs}
    flips = flipped(medians)
    rows = []
    for key, rs in stored.items():
        for race in rs:
            ratio, p10, p90, _ = race_ratio(race)
            chapter = race["chapter"].split("/")[-1][:2]
            rows.append(
                {
                    "chapter": chapter,
                    "label": f"{reader_label(race['name'])} vs {reader_label(race['peer'])}",
                    "ratio": ratio,
                    "p10": p10,
                    "p90": p90,
                    "target": race["bar"],
                    "flipped": race_id(key, race) in flips,
                    "verdict": verdict(p10, p90, race["bar"], race_id(key, race) in flips),
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
    for kind, name, symbol, color in VERDICTS:
        mine = [(x[i], r) for i, r in enumerate(rows) if r["verdict"] == kind]
        if not mine:
            continue
        fig.add_trace(
            go.Scatter(
                x=[at_ for at_, _ in mine],
                y=[r["ratio"] / r["target"] for _, r in mine],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [(r["p90"] - r["ratio"]) / r["target"] for _, r in mine],
                    "arrayminus": [(r["ratio"] - r["p10"]) / r["target"] for _, r in mine],
                    "thickness": 1,
                    "width": 0,
                },
                customdata=[
                    [
                        r["label"],
                        r["ratio"],
                        r["p10"],
                        r["p90"],
                        r["target"],
                        "<br>the two GPU runs' medians fall on different sides of the target" if r["flipped"] else "",
                    ]
                    for _, r in mine
                ],
                mode="markers",
                name=name,
                marker={"symbol": symbol, "size": 9, "color": color, "line": {"width": 1.5}},
                hovertemplate="%{customdata[0]}<br>ratio %{customdata[1]:.2f} (p10 %{customdata[2]:.2f}, "
                "p90 %{customdata[3]:.2f}), the course's target %{customdata[4]:.2f}%{customdata[5]}"
                "<extra>" + name + "</extra>",
            )
        )
    fig.add_hline(y=1, line={"dash": "dash", "width": 1})
    fig.update_xaxes(title_text="race, by chapter", tickvals=ticks, ticktext=names, showgrid=False, zeroline=False)
    fig.update_yaxes(type="log", title_text="ratio over the course's target (theirs / ours / target, log scale)")
    fig.update_layout(height=440, legend=legend(-0.2), margin={"t": 20})
    return fig
