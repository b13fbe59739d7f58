"""Module 08's facts that hold on any machine, checked on the CPU through the snippets' stand-in: the
plain-Python model of the caching allocator (snippets/m08/_allocator_model.py), whose rules the GPU
runs store beside what torch's allocator did.

Checked: the constants are the ones torch's own header defines (in the installed torch); the
rounding and segment rules at their boundaries; the fragmentation workload runs out of memory with
768 MiB reserved but unallocated under the default settings and succeeds with expandable segments
(also through the child process that the environment variable reaches); the OOM message parser reads
the message as torch 2.11 formats it; the cached path never calls cudaMalloc and the uncached path
calls it once per request, with the segment sizes of the rules; empty_cache returns only a segment
with nothing live in it; the record_stream race corrupts the read without a fix and not with either
fix, record_stream at the cost of a second block; the timeline reduction reproduces the allocator's
own allocated and reserved bytes from its history."""

import re
from pathlib import Path

import pytest
import torch
from conftest import ROOT, load_snippet, run_script_once

MiB, GiB = 2**20, 2**30


def measured(name: str) -> dict:
    """measure(small=True)'s data from the run every snippet gets once per test run (as its download,
    conftest.run_script_once), not from a second run here."""
    proc = run_script_once(ROOT / "snippets" / "m08" / f"{name}.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.data


@pytest.fixture(scope="module")
def model():
    return load_snippet("m08/_allocator_model")


@pytest.fixture(scope="module")
def fragmentation():
    return load_snippet("m08/fragmentation")


def test_constants_are_torchs(model):
    header = Path(torch.__file__).parent / "include" / "c10" / "core" / "AllocatorConfig.h"
    if not header.exists():
        pytest.skip(f"torch {torch.__version__} ships no {header.name} to compare with")
    text = header.read_text()
    found = {name: int(value) for name, value in re.findall(r"constexpr size_t (k\w+) = (\d+);", text)}
    assert found["kMinBlockSize"] == model.K_MIN_BLOCK_SIZE == 512
    assert found["kSmallSize"] == model.K_SMALL_SIZE == MiB
    assert found["kSmallBuffer"] == model.K_SMALL_BUFFER == 2 * MiB
    assert found["kMinLargeAlloc"] == model.K_MIN_LARGE_ALLOC == 10 * MiB
    assert found["kRoundLarge"] == model.K_ROUND_LARGE == 2 * MiB
    assert re.search(r"large_segment_size_\{(\d+)\}", text)[1] == str(model.K_LARGE_BUFFER) == str(20 * MiB)


@pytest.mark.parametrize(
    "request_bytes, pool, block, segment",
    [
        (1, "small", 512, 2 * MiB),
        (513, "small", 1024, 2 * MiB),
        (MiB, "small", MiB, 2 * MiB),  # the largest small request
        (MiB + 1, "large", MiB + 512, 20 * MiB),  # large, below 10 MiB: a shared 20 MiB segment
        (10 * MiB - 1, "large", 10 * MiB, 10 * MiB),  # rounded to 10 MiB: a segment of its own
        (33 * MiB + 5, "large", 33 * MiB + 512, 34 * MiB),  # its own segment, rounded up to 2 MiB
    ],
)
def test_rounding_and_segment_rules(model, request_bytes, pool, block, segment):
    size = model.round_size(request_bytes)
    assert (model.pool_of(size), size, model.allocation_size(size)) == (pool, block, segment)


def test_splitting_limits(model):
    assert model.should_split("small", 512) and not model.should_split("small", 511)
    assert not model.should_split("large", MiB) and model.should_split("large", MiB + 1)
    assert model.should_split("large", 512, expandable=True)
    m = model.Model()
    a = m.malloc(4 * MiB)  # a 20 MiB segment, split: 16 MiB left free in it
    b = m.malloc(15 * MiB + 512)  # fits the free 16 MiB; the 1 MiB - 512 left is not split off
    assert m.state()["segments"] == 1 and b.size == 16 * MiB and a.size == 4 * MiB


def test_the_workload_fragments_then_runs_out_with_memory_free(fragmentation):
    r = fragmentation.predicted("default")
    before, after = r["before_request"], r["after_request"]
    assert r["outcome"] == "out of memory"
    assert before["allocated_bytes"] == 768 * MiB and before["reserved_bytes"] == 1536 * MiB
    assert before["inactive_split_bytes"] == 768 * MiB and before["largest_free_bytes"] == 64 * MiB
    # the request plus what is allocated fits the allowance; a new segment on top of the reserved does not
    assert before["allocated_bytes"] + fragmentation.REQUEST < fragmentation.LIMIT
    assert before["reserved_bytes"] + fragmentation.REQUEST > fragmentation.LIMIT
    assert after["num_alloc_retries"] == 1 and after["num_ooms"] == 1 and after["reserved_bytes"] == 1536 * MiB


def test_expandable_segments_unmap_the_holes_and_succeed(fragmentation):
    r = fragmentation.predicted("expandable_segments:True")
    after = r["after_request"]
    assert r["outcome"] == "allocated"
    assert r["before_request"]["reserved_bytes"] == 1540 * MiB  # 77 pages of 20 MiB
    assert after["allocated_bytes"] == 1536 * MiB and after["reserved_bytes"] <= fragmentation.LIMIT
    assert after["num_device_free"] == 12  # one unmap per hole: each holds two or three whole pages
    assert after["segments"] == 0 and after["inactive_split_bytes"] == 0


def test_the_child_reads_the_allocator_setting_from_its_environment(fragmentation):
    run = fragmentation.in_child("expandable_segments:True", 1)
    assert run["alloc_conf"] == "expandable_segments:True" and run["outcome"] == "allocated"
    assert run["actions"]["segment_unmap"] == 12 and "segment_alloc" not in run["actions"]
    assert run["request_us"]["n"] == 1


def test_child_in_process_with_the_default_setting(fragmentation, monkeypatch):
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF", raising=False)
    run = fragmentation.child("default", 2)
    assert run["outcome"] == "out of memory" and run["actions"]["oom"] == 1
    numbers = run["message_numbers"]
    assert numbers["tried_to_allocate"] == "768.00 MiB" and numbers["allowed"] == "2.00 GiB"
    assert numbers["allocated_by_pytorch"] == numbers["reserved_but_unallocated"] == "768.00 MiB"


def test_the_parser_reads_torchs_oom_message(fragmentation):
    message = (  # torch 2.11's wording (DeviceCachingAllocator::malloc), with a memory fraction set
        "CUDA out of memory. Tried to allocate 768.00 MiB. GPU 0 has a total capacity of 139.81 GiB of which "
        "137.02 GiB is free. Including non-PyTorch memory, this process has 2.03 GiB memory in use. 2.00 GiB "
        "allowed; Of the allocated memory 768.00 MiB is allocated by PyTorch, and 768.00 MiB is reserved by "
        "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
    )
    assert fragmentation.message_numbers(message) == {
        "tried_to_allocate": "768.00 MiB",
        "total_capacity": "139.81 GiB",
        "device_free": "137.02 GiB",
        "process_in_use": "2.03 GiB",
        "allowed": "2.00 GiB",
        "allocated_by_pytorch": "768.00 MiB",
        "reserved_but_unallocated": "768.00 MiB",
    }
    assert fragmentation.message_numbers(None) == {}


def test_cached_path_never_mallocs_and_uncached_mallocs_once_per_call():
    r = measured("alloc_cost")
    for p in r["points"]:
        cached, uncached = p["per_call_model"]["cached"], p["per_call_model"]["uncached"]
        assert cached["num_device_alloc"] == 0 and cached["reserved_bytes"] == 0
        assert uncached["num_device_alloc"] == 1 and uncached["reserved_bytes"] == p["segment_bytes"]
        assert cached["allocated_bytes"] == uncached["allocated_bytes"] == p["block_bytes"]
        assert set(p["host_us"]) == {"floor", "cached", "uncached"} and p["alloc_free_us"]["n"] == r["repetitions"]
    assert [p["pool"] for p in r["points"]] == ["small", "small", "small", "large", "large"]
    odd = {p["size_bytes"]: p for p in r["points"]}
    assert odd[1000]["block_bytes"] == 1024  # rounded up to 512 bytes
    assert odd[33 * MiB]["block_bytes"] == odd[33 * MiB]["segment_bytes"] == 34 * MiB  # the 1 MiB rest stays on


def test_empty_cache_returns_only_a_segment_with_nothing_live(model):
    m = model.Model()
    live = m.malloc(4 * MiB)  # a 20 MiB segment
    m.free(m.malloc(2 * MiB))  # carved from the same segment, freed: the segment still holds the 4 MiB
    m.free(m.malloc(64 * MiB))  # no cached block fits: a new segment, freed whole
    m.empty_cache()
    s = m.state()
    assert s["num_device_free"] == 1 and s["reserved_bytes"] == 20 * MiB and s["segments"] == 1
    m.free(live)
    m.empty_cache()
    assert m.state()["reserved_bytes"] == 0 and m.state()["num_sync_all_streams"] == 2


def test_best_fit_carves_a_small_request_out_of_a_large_cached_block(model):
    m = model.Model()
    m.free(m.malloc(64 * MiB))
    m.malloc(4 * MiB)  # fits the cached 64 MiB block: split, no new segment
    s = m.state()
    assert s["num_device_alloc"] == 1 and s["reserved_bytes"] == 64 * MiB and s["inactive_split_bytes"] == 60 * MiB


def test_free_sync_times_every_case_idle_and_busy():
    r = measured("free_sync")
    assert {(c["case"], c["stream"]) for c in r["cases"]} == {
        (case, stream)
        for case in ("empty_cache, nothing cached", "empty_cache, a free segment cached", "free and reallocate")
        for stream in ("idle", "busy")
    }
    assert all(c["returned_us"]["n"] == r["repetitions"] for c in r["cases"])


def test_record_stream_race_and_its_two_fixes():
    r = measured("record_stream")
    by_fix = {f["fix"]: f for f in r["fixes"]}
    none, recorded, waited = by_fix["none"], by_fix["record_stream"], by_fix["wait_stream"]
    assert none["corrupted_cases"] == none["same_block_cases"] == none["cases"] > 0
    assert none["doubled_values_seen"] == [14.0]
    assert recorded["corrupted_cases"] == 0 and recorded["same_block_cases"] == 0
    assert waited["corrupted_cases"] == 0 and waited["same_block_cases"] == waited["cases"]
    assert recorded["reserved_bytes"] - none["reserved_bytes"] == r["tensor_bytes"]  # a second block for y
    assert waited["reserved_bytes"] == none["reserved_bytes"]


def test_timeline_reduction_reproduces_the_allocators_own_numbers(model):
    """From the history alone: reserved exactly; allocated as the live requests rounded to 512 bytes,
    which is memory_allocated() unless a reused block was handed out whole (its remainder unsplit)."""
    timeline = load_snippet("m08/timeline")
    m = model.Model()
    kept = [m.malloc(n) for n in (1000, 3 * MiB, 64 * MiB, 700, 5 * MiB)]
    for i in (2, 1, 0):  # 64 MiB (a segment of its own), 3 MiB and 1,000 bytes (segments still in use)
        m.free(kept.pop(i))
    m.empty_cache()  # returns the 64 MiB segment
    kept.append(m.malloc(MiB + MiB // 2))  # into the freed 3 MiB block, split: 1.5 MiB left free
    r = timeline.compact(m.trace, [("all", len(m.trace))], 0, 0)
    state = m.state()
    assert r["final"] == {"allocated_bytes": state["allocated_bytes"], "reserved_bytes": state["reserved_bytes"]}
    assert [e["seq"] for e in r["events"]] == sorted(e["seq"] for e in r["events"])
    assert r["phases"][0]["segment_allocs"] == 3 and r["phases"][0]["segment_frees"] == 1
    m.free(kept.pop())
    unsplit = m.malloc(2 * MiB + 1)  # the 3 MiB block again: the 1 MiB - 512 left is not split off
    r = timeline.compact(m.trace, [("all", len(m.trace))], 0, 0)
    assert unsplit.size == 3 * MiB
    assert m.state()["allocated_bytes"] - r["final"]["allocated_bytes"] == MiB - 512


def test_timeline_on_the_cpu_profiler():
    r = measured("timeline")
    phases = {p["phase"]: p for p in r["phases"]}
    assert list(phases)[:2] == ["init", "step 1 forward"] and "step 2 zero_grad" in phases
    assert phases["step 1 optimizer"]["allocated_bytes_end"] > phases["step 1 forward"]["allocated_bytes_end"]
    assert all(e["reserved_bytes"] == e["allocated_bytes"] for e in r["events"])  # the CPU allocator caches nothing
    assert len(r["events"]) <= 2000 and set(r["step_us"]) == {"off", "history", "history_python_stacks"}


def test_knobs_runs_each_setting_in_a_child_that_reads_it():
    """knobs.py's CPU path: one child per setting, each seeing its own PYTORCH_ALLOC_CONF; the model
    stand-in runs out of memory under the default and succeeds with expandable segments, and says
    that it models no other setting."""
    knobs = load_snippet("m08/knobs")
    r = measured("knobs")
    assert [c["config"] for c in r["configs"]] == knobs.CONFIGS
    for c in r["configs"]:
        assert c["alloc_conf"] == ("" if c["config"] == "default" else c["config"])
        assert c["fragmented"] and c["before_request"]["reserved_bytes"] >= knobs.ARENA
    by = {c["config"]: c for c in r["configs"]}
    assert (
        by["default"]["outcome"] == "out of memory"
        and "reserved by PyTorch but unallocated" in by["default"]["message"]
    )
    assert by["expandable_segments:True"]["outcome"] == "allocated"
    assert by["expandable_segments:True"]["after_request"]["peak_reserved_bytes"] <= knobs.LIMIT
    if not torch.cuda.is_available():
        assert "models only expandable_segments" in r["device"]
