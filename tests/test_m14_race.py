"""Module 14's peer and races on the CPU, at TINY sizes: every Hugging Face route generates the plain
loop's greedy tokens; padding to one length changes nothing; EOS is off on every route; the races'
data passes the results store's and the scoreboard's checks."""

import pytest
from conftest import ROOT, load_snippet, run_script_once

from coursekit.results import check_data
from coursekit.scoreboard import check_race

hf_routes = load_snippet("m14/_hf")
model = load_snippet("m14/_model")
workload = load_snippet("m14/_workload")

NEW = 5


@pytest.fixture(scope="module")
def hf():
    return hf_routes.prepare(model.hf_model(model.TINY, device="cpu"))


@pytest.fixture(scope="module")
def requests():
    return workload.requests(n=6, lo=4, hi=12, new_tokens=NEW, vocab=model.TINY["vocab_size"])


@pytest.fixture(scope="module")
def reference(hf, requests):
    return {r["id"]: model.reference_greedy(hf, r["prompt"], NEW) for r in requests}


def test_the_prompts_have_different_lengths(requests):
    """Otherwise padding would be tested on nothing."""
    assert len({len(r["prompt"]) for r in requests}) > 2


@pytest.mark.parametrize("batch_size", [1, 3, 6])
def test_dynamic_cache_batches_match_the_plain_loop(hf, requests, reference, batch_size):
    out = hf_routes.static_batches(hf, requests, batch_size, cache="dynamic", warmup=False)
    assert out["tokens"] == reference
    assert out["batches"] == len(requests) // batch_size


@pytest.mark.parametrize("pad_to", [12, 20])
def test_static_cache_padded_to_one_length_matches_the_plain_loop(hf, requests, reference, pad_to):
    """Every batch left-padded to pad_to (the longest prompt, or more): the same tokens."""
    out = hf_routes.static_batches(hf, requests, 3, cache="static", compile=True, pad_to=pad_to)
    assert out["tokens"] == reference
    assert out["compiled"] is False  # on the CPU transformers does not auto-compile: said in the data
    assert out["warmup_s"] > 0


def test_left_padding_masks_and_aligns(hf):
    ids, mask = hf_routes.left_pad([[5, 6], [7, 8, 9]], 4, "cpu")
    assert ids.tolist() == [[0, 0, 5, 6], [0, 7, 8, 9]]
    assert mask.tolist() == [[0, 0, 1, 1], [0, 1, 1, 1]]


def test_generate_batch_matches_the_plain_loop(hf, requests, reference):
    out = hf_routes.continuous(hf, requests, settings=dict(block_size=16, num_blocks=64, max_batch_tokens=256))
    hf_routes.release(hf)
    assert out["tokens"] == reference
    assert out["attn_implementation"] == "paged|sdpa"
    assert hf.config._attn_implementation == "sdpa"  # restored after the run


def test_online_manager_matches_the_plain_loop_and_times_every_token(hf, requests, reference):
    arrivals = workload.poisson_arrivals(len(requests), 50.0)
    out = hf_routes.online(hf, requests, arrivals, settings=dict(block_size=16, num_blocks=64, max_batch_tokens=256))
    assert {o["id"]: o["tokens"] for o in out} == reference
    for o in out:
        assert len(o["token_s"]) == NEW
        assert o["token_s"] == sorted(o["token_s"])
        assert o["first_token_s"] == o["token_s"][0] >= o["arrival_s"]


def test_eos_is_off_on_every_route(requests):
    """A model whose eos_token_id is the first token it would emit still generates every token."""
    hf = model.hf_model(model.TINY, device="cpu")
    first = model.reference_greedy(hf, requests[0]["prompt"], 1)[0]
    hf.generation_config.eos_token_id = first
    hf_routes.prepare(hf)
    out = hf_routes.static_batches(hf, requests[:1], 1, warmup=False)
    assert len(out["tokens"][0]) == NEW and out["tokens"][0][0] == first


def test_our_engine_matches_every_hf_route(hf, requests, reference):
    """Ours (Llama.from_hf, the same tensors) through the engine, continuous and static batching: HF's
    tokens. (The gathered-SDPA attention: the Triton kernel is _server's tests' business.)"""
    ours = model.Llama.from_hf(hf)
    server = load_snippet("m14/_server")
    for continuous in (True, False):
        engine = server.Engine(ours, max_batch=3, max_model_len=12 + NEW, attention="gather", continuous=continuous)
        assert {o["id"]: o["tokens"] for o in engine.generate(requests)} == reference


@pytest.fixture(scope="module")
def race_data():
    """measure(small=True)'s data from the run every snippet gets once per test run (as its download)."""
    proc = run_script_once(ROOT / "snippets" / "m14" / "race.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.data


def test_race_data_is_valid_and_its_rows_are_races(race_data):
    check_data(race_data)
    assert len(race_data["races"]) == 3
    for i, row in enumerate(race_data["races"]):
        check_race(row, f"races.{i}")
        assert row["ours"]["rounds"] and len(row["ours"]["rounds"]) == len(row["theirs"]["rounds"])  # paired
    assert sum("(HF's best here)" in row["peer"] for row in race_data["races"]) == 1
    assert race_data["hf_best"] in ("hf_dynamic", "hf_static_compile", "hf_generate_batch")


def test_race_every_contestant_generates_the_same_tokens_on_the_cpu(race_data):
    for name, a in race_data["agreement"].items():
        assert a["fraction_all_equal"] == 1.0, name
    assert race_data["hf_static_compiled"] is False and race_data["notes"]


def test_poisson_latency_definitions():
    poisson = load_snippet("m14/poisson")
    out = [
        {"tokens": [1, 2, 3], "arrival_s": 0.0, "first_token_s": 0.5, "token_s": [0.5, 0.7, 0.9]},
        {"tokens": [1, 2, 3], "arrival_s": 1.0, "first_token_s": 1.1, "token_s": [1.1, 1.2, 1.3]},
    ]
    lat = poisson.latency(out)
    assert lat["ttft_ms"]["p99"] == pytest.approx(500) and lat["ttft_ms"]["p50"] in (pytest.approx(100), 500)
    assert lat["tpot_ms"]["p99"] == pytest.approx(200)
    assert lat["tokens_per_s"] == pytest.approx(6 / 1.3)


def test_the_teacher_forced_check_passes_the_engine_and_catches_swapped_blocks():
    """race.teacher_forced judges tokens with HF's float32 logits: the engine's own tokens pass
    within race.MARGIN; with two sequences reading each other's blocks at every decode step, some
    token falls far below the top logit and the check fails."""
    race = load_snippet("m14/race")
    server = load_snippet("m14/_server")
    import torch

    hf32 = model.hf_model(model.TINY, device="cpu", dtype=torch.float32)
    ours = model.Llama.from_hf(hf32)
    reqs = workload.requests(6, 8, 24, 16, vocab=model.TINY["vocab_size"])

    def tokens(swap: bool) -> dict:
        engine = server.Engine(ours, attention="gather", max_model_len=64, block_size=4)
        if swap:
            fill = engine.decode_inputs

            def swapped(running, b):
                fill(running, b)
                if b >= 2:
                    engine.table[[0, 1]] = engine.table[[1, 0]]

            engine.decode_inputs = swapped
        return {o["id"]: o["tokens"] for o in engine.generate(reqs)}

    good, bad = race.teacher_forced(hf32, reqs, tokens(False)), race.teacher_forced(hf32, reqs, tokens(True))
    assert good["within_margin"] and good["max_gap"] < 1e-4 and good["positions"] == 6 * 16
    assert not bad["within_margin"] and bad["max_gap"] > 2 * race.MARGIN
