"""The scoreboard (coursekit/scoreboard.py, scripts/scoreboard.py): rows from stored races, each
decided on its spread as the pages' claims are (and "within noise" where two GPU runs disagree), a
missed target reported and never hidden, a malformed race refused naming its file and field."""

import json

import pytest
from conftest import ROOT, run_python
from test_mdext import PROV, summary

from coursekit import results as store
from coursekit import scoreboard


def race(ours, theirs, bar=1.0, name="our kernel", peer="their kernel"):
    return {"name": name, "peer": peer, "ours": ours, "theirs": theirs, "bar": bar, "chapter": "part-k/07-triton.md"}


def store_races(results_dir, key, races, hardware="nvidia-h200"):
    prov = dict(PROV, gpu=store.CPU_GPU) if store.is_cpu_set(hardware) else dict(PROV)
    doc = {
        "schema_version": store.SCHEMA_VERSION,
        "key": key,
        "snippet": f"snippets/{key}.py",
        "snippet_hash": "a" * 64,
        "hardware": hardware,
        "provenance": prov,
        "data": {"repetitions": 5, "races": races},
    }
    store.write_atomic(store.result_path(key, hardware, results_dir), doc)


def test_rows_give_the_ratio_its_spread_and_the_verdict(tmp_path):
    store_races(
        tmp_path,
        "m07/add",
        [
            race(summary(10.0, 9.0, 11.0), summary(12.0, 11.5, 12.5), bar=0.98, name="fast"),
            race(summary(20.0, 19.0, 21.0), summary(10.0, 9.5, 10.5), bar=1.0, name="slow"),
        ],
    )
    rows = {r["name"]: r for r in scoreboard.rows("nvidia-h200", tmp_path)}
    assert rows["fast"]["ratio"] == pytest.approx(1.2) and rows["fast"]["verdict"] == "meets"
    # unpaired: the low end from ours' slow end and theirs' fast end, the high end the other way round
    assert rows["fast"]["ratio_p10"] == pytest.approx(11.5 / 11.0)
    assert rows["fast"]["ratio_p90"] == pytest.approx(12.5 / 9.0)
    assert rows["slow"]["ratio"] == pytest.approx(0.5) and rows["slow"]["verdict"] == "misses"
    assert rows["slow"]["hardware"] == "nvidia-h200" and rows["slow"]["chapter"] == "part-k/07-triton.md"


def test_races_timed_in_the_same_rounds_are_decided_on_per_round_ratios(tmp_path):
    """Interleaved rounds: a slow round of the GPU slows both sides, and the ratio stays put; the
    ratio of medians would mix rounds and call it a loss."""
    ours = {**summary(10.0, 10.0, 20.0), "rounds": [10.0, 10.0, 20.0, 10.0, 20.0]}
    theirs = {**summary(19.0, 11.0, 22.0), "rounds": [11.0, 11.0, 22.0, 11.0, 22.0]}
    store_races(tmp_path, "m07/mm", [race(ours, theirs, bar=1.05, name="paired")])
    (row,) = scoreboard.rows("nvidia-h200", tmp_path)
    assert row["paired"] and row["ratio"] == pytest.approx(1.1) and row["ratio_p10"] == pytest.approx(1.1)
    assert row["ratio_p90"] == pytest.approx(1.1) and row["verdict"] == "meets"


def test_script_prints_json_rows_and_exits_0_when_a_bar_is_missed(tmp_path):
    store_races(tmp_path, "m07/add", [race(summary(20.0), summary(10.0), bar=1.0)])
    proc = run_python(["scripts/scoreboard.py", "--json", "--results-dir", str(tmp_path)], timeout=60)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert set(row) == {
        "name", "peer", "ours", "theirs", "unit", "ratio", "ratio_p10", "ratio_p90", "bar", "verdict", "hardware",
        "chapter",
    }  # fmt: skip
    assert row["verdict"] == "misses" and row["ratio"] == pytest.approx(0.5) and row["unit"] == "us"


def test_a_malformed_race_is_refused_at_write_time_and_named_by_the_script(tmp_path):
    bad = race(summary(10.0), {"median": 3.0}, bar=1.0)  # theirs is no summary
    with pytest.raises(store.ResultError, match=r"races\W+0\W+theirs"):
        store.check_data({"repetitions": 5, "t": summary(1.0), "races": [bad]})
    path = store.result_path("m07/bad", "nvidia-h200", tmp_path)
    path.parent.mkdir(parents=True)
    good = {"repetitions": 5, "t": summary(1.0), "races": [race(summary(1.0), summary(1.0))]}
    doc = {
        "schema_version": store.SCHEMA_VERSION,
        "key": "m07/bad",
        "snippet": "snippets/m07/bad.py",
        "snippet_hash": "a" * 64,
        "hardware": "nvidia-h200",
        "provenance": dict(PROV),
        "data": good,
    }
    doc["data"]["races"][0]["bar"] = -1  # written by hand around the store's check
    path.write_text(json.dumps(doc))
    proc = run_python(["scripts/scoreboard.py", "--results-dir", str(tmp_path)], timeout=60)
    assert proc.returncode == 1 and "m07/bad.json" in proc.stderr and "bar" in proc.stderr


def test_the_reference_results_hold_only_well_formed_races():
    for row in scoreboard.rows("nvidia-h200", ROOT / "build_results"):
        assert row["ours"] > 0 and row["theirs"] > 0 and row["bar"] > 0


def test_the_scoreboard_page_shows_every_race_and_marks_the_misses(built_site):
    """docs/scoreboard.md's {{ scoreboard }}: one table row per stored race, each with its chapter,
    snippet and data links, and a missed bar marked as missed, never left out."""
    import html as html_lib
    import re

    site, _ = built_site
    page = (site / "scoreboard" / "index.html").read_text()
    rows = scoreboard.rows("nvidia-h200", ROOT / "build_results")
    table_rows = re.findall(r'<tr class="(meets|within-noise|misses)">(.*?)</tr>', page, re.S)
    assert len(table_rows) == len(rows) > 0
    for row, (verdict, cells) in zip(rows, table_rows):
        assert html_lib.escape(row["name"]) in cells
        assert verdict == row["verdict"].replace(" ", "-") and row["verdict"] in cells
        assert f"{row['key']}.py" in cells and "downloads/data/nvidia-h200/" in cells
    count = {v: sum(r["verdict"] == v for r in rows) for v in ("meets", "within noise", "misses")}
    assert (
        f"{len(rows)} races on nvidia-h200: {count['meets']} meet their target, "
        f"{count['within noise']} within noise, {count['misses']} miss it." in page
    )


def paired_race(ratios, bar, name="our kernel"):
    """A race timed in the same rounds whose per-round ratios (theirs / ours) are ``ratios``."""
    ours = [10.0] * len(ratios)
    theirs = [10.0 * x for x in ratios]
    s = lambda v: {**summary(sorted(v)[len(v) // 2], min(v), max(v), rounds=v), "n": len(v)}  # noqa: E731
    return race(s(ours), s(theirs), bar=bar, name=name)


# ten rounds: the 10th and 90th percentiles of the per-round ratios sit near the two ends
CLEAR = [1.10, 1.11, 1.12, 1.13, 1.14, 1.15, 1.16, 1.17, 1.18, 1.19]
SHORT = [0.80, 0.81, 0.82, 0.83, 0.84, 0.85, 0.86, 0.87, 0.88, 0.89]
STRADDLE = [0.90, 0.95, 0.98, 1.01, 1.02, 1.03, 1.04, 1.05, 1.08, 1.12]  # median above 1, p10 below


def test_a_race_is_decided_on_its_spread_as_the_claims_are(tmp_path):
    """p10 at or above the target: meets; p90 below it: misses; the target inside the spread:
    within noise, whichever side of it the median falls."""
    store_races(
        tmp_path,
        "m07/add",
        [
            paired_race(CLEAR, 1.0, "clear"),
            paired_race(SHORT, 1.0, "short"),
            paired_race(STRADDLE, 1.0, "straddle, median above"),
            paired_race(STRADDLE, 1.035, "straddle, median below"),
            race(summary(10.0), summary(10.0), bar=1.0, name="p10 on the target"),
        ],
    )
    rows = {r["name"]: r for r in scoreboard.rows("nvidia-h200", tmp_path)}
    assert rows["clear"]["verdict"] == "meets" and rows["clear"]["ratio_p10"] >= 1.0
    assert rows["short"]["verdict"] == "misses" and rows["short"]["ratio_p90"] < 1.0
    above, below = rows["straddle, median above"], rows["straddle, median below"]
    assert above["ratio"] >= 1.0 > above["ratio_p10"] and above["verdict"] == "within noise"
    assert below["ratio"] < 1.035 <= below["ratio_p90"] and below["verdict"] == "within noise"
    assert rows["p10 on the target"]["ratio_p10"] == 1.0 and rows["p10 on the target"]["verdict"] == "meets"
    assert all(not r["flipped"] for r in rows.values())


def test_a_race_whose_median_flips_between_gpu_runs_is_within_noise_in_both(tmp_path):
    """Each run alone is clear (meets on one, misses on the other): together they say the target
    lies inside the noise between runs. A race both runs agree on keeps its own verdict."""
    store_races(tmp_path, "m07/add", [paired_race(CLEAR, 1.0, "flips"), paired_race(CLEAR, 1.0, "steady")])
    store_races(
        tmp_path,
        "m07/add",
        [paired_race(SHORT, 1.0, "flips"), paired_race(CLEAR, 1.0, "steady")],
        hardware="nvidia-h200-rerun",
    )
    for hardware in ("nvidia-h200", "nvidia-h200-rerun"):
        rows = {r["name"]: r for r in scoreboard.rows(hardware, tmp_path)}
        assert rows["flips"]["flipped"] and rows["flips"]["verdict"] == "within noise", hardware
        assert not rows["steady"]["flipped"] and rows["steady"]["verdict"] == "meets", hardware


def test_a_race_in_one_gpu_run_only_keeps_its_own_verdict(tmp_path):
    store_races(tmp_path, "m07/add", [paired_race(CLEAR, 1.0, "ours")])
    store_races(tmp_path, "m07/add", [paired_race(SHORT, 1.0, "another")], hardware="nvidia-h200-rerun")
    (row,) = scoreboard.rows("nvidia-h200", tmp_path)
    assert row["verdict"] == "meets" and not row["flipped"]


def test_a_cpu_set_is_never_compared_across_runs(tmp_path):
    """cpu-small measures small sizes on another machine: its medians neither flip a GPU row nor
    are flipped by one."""
    store_races(tmp_path, "m07/add", [paired_race(CLEAR, 1.0, "race")])
    store_races(tmp_path, "m07/add", [paired_race(SHORT, 1.0, "race")], hardware="cpu-small")
    assert store.set_info("cpu-small", tmp_path)["kind"] == "cpu"
    (gpu,) = scoreboard.rows("nvidia-h200", tmp_path)
    (cpu,) = scoreboard.rows("cpu-small", tmp_path)
    assert gpu["verdict"] == "meets" and not gpu["flipped"]
    assert cpu["verdict"] == "misses" and not cpu["flipped"]


def test_paired_summaries_are_taken_round_by_round_and_refuse_unpaired_ones():
    """coursekit.stats.paired: the one per-round helper the figures modules and the Scoreboard share."""
    from coursekit import stats

    a = stats.summarize([10.0, 20.0, 30.0], "us", "device", rounds=True)
    b = stats.summarize([5.0, 10.0, 15.0], "us", "device", rounds=True)
    diff = stats.paired(a, b)
    assert diff["median"] == 10.0 and diff["min"] == 5.0 and diff["unit"] == "us" and diff["clock"] == "device"
    ratio = stats.paired(a, b, lambda x, y: x / y, "x")
    assert ratio["min"] == ratio["max"] == 2.0 and ratio["unit"] == "x"  # paired: no spread, unlike ratio_spread
    assert stats.ratio_spread(a, b)["p10"] < 2.0 < stats.ratio_spread(a, b)["p90"]
    with pytest.raises(ValueError, match="same rounds"):
        stats.paired(a, stats.summarize([1.0, 2.0], "us", rounds=True))
    with pytest.raises(ValueError, match="same rounds"):
        stats.paired(a, stats.summarize([1.0, 2.0, 3.0], "us"))


def _with(change):
    r = race(summary(10.0, 9.0, 11.0), summary(12.0, 11.0, 13.0))
    change(r)
    return r


BAD_RACES = {
    "zero median": (lambda r: r.update(ours=summary(0.0)), r"ours\.median is 0.0"),
    "zero p90": (lambda r: r.update(ours=summary(0.0, 0.0, 0.0)), r"ours\.\w+ is 0.0"),
    "zero round": (
        lambda r: r.update(ours=summary(10.0, 9.0, 11.0, rounds=[9.0, 0.0, 10.0, 11.0, 11.0])),
        r"ours\.rounds",
    ),
    "negative time": (lambda r: r.update(theirs=summary(-3.0, -4.0, -2.0)), r"theirs\.\w+ is -"),
    "name not a string": (lambda r: r.update(name=7), r"name is 7"),
    "empty peer": (lambda r: r.update(peer=""), r"peer is ''"),
    "no such page": (lambda r: r.update(chapter="part-k/99-nowhere.md"), r"chapter 'part-k/99-nowhere.md'"),
    "page outside docs": (lambda r: r.update(chapter="../README.md"), r"chapter '../README.md'"),
}


@pytest.mark.parametrize("case", BAD_RACES, ids=list(BAD_RACES))
def test_a_race_the_scoreboard_cannot_compute_is_refused_at_write_time(case, tmp_path):
    change, message = BAD_RACES[case]
    with pytest.raises(store.ResultError, match=message):
        store_races(tmp_path, "m07/add", [_with(change)])
    assert not store.result_path("m07/add", "nvidia-h200", tmp_path).exists()


@pytest.mark.parametrize("case", BAD_RACES, ids=list(BAD_RACES))
def test_a_race_the_scoreboard_cannot_compute_is_refused_at_read_time_naming_the_file(case, tmp_path):
    change, message = BAD_RACES[case]
    store_races(tmp_path, "m07/add", [_with(lambda r: None)])
    path = store.result_path("m07/add", "nvidia-h200", tmp_path)
    doc = json.loads(path.read_text())
    change(doc["data"]["races"][0])  # written by hand around the store's check
    path.write_text(json.dumps(doc))
    with pytest.raises(store.ResultError, match=message) as err:
        scoreboard.rows("nvidia-h200", tmp_path)
    assert str(path) in str(err.value)


def test_the_figure_marks_each_race_with_the_scoreboards_verdict(tmp_path):
    """snippets/scoreboard/figures.py races(): one marker per race, in the trace of its verdict, the
    cross-run rule included (a flip drawn on either GPU run is within noise)."""
    from coursekit import figdata

    store_races(tmp_path, "m07/add", [paired_race(CLEAR, 1.0, "flips"), paired_race(STRADDLE, 1.0, "straddle")])
    store_races(tmp_path, "m07/mm", [paired_race(SHORT, 1.0, "short")])
    store_races(tmp_path, "m07/add", [paired_race(SHORT, 1.0, "flips")], hardware="nvidia-h200-rerun")
    fig, _ = figdata.draw("scoreboard/races", "nvidia-h200", figdata.Store(tmp_path))
    drawn = {t.name.split(" ")[0]: sorted(c[0].split(" vs ")[0] for c in t.customdata) for t in fig.data}
    assert drawn == {"within": ["flips", "straddle"], "misses": ["short"]}
    for trace in fig.data:
        assert "issue" not in trace.name and "bar" not in trace.name and "the course's target" in trace.name
