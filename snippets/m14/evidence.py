"""The evidence behind the time-split figure: a torch.profiler trace of a short offline run of the
course's server (_server.Engine over ours, _model.CONFIG with random weights, bf16, the Triton
paged attention, decode replayed from CUDA graphs, the layer pieces compiled; overlap off, so the
host waits for each step and each step's kernels fall inside its label), every model step under a label that says what
it ran: prefill steps (new prompts packed into one row) and decode steps (one token for every
running sequence, padded to its bucket), with the host's work between them. Six of the workload's
requests (prompts of 64 to 512 tokens) with 3 to 8 new tokens each and at most four running at
once, so finished sequences leave and waiting ones join mid-run: prefills come between decode
steps and the batch changes. One untimed run first (Triton's compile, the first prefills). On the
CPU: TINY in float32, prompts of 4 to 12 tokens, the gathered-SDPA attention, no graphs. Open the
trace in ui.perfetto.dev or chrome://tracing."""

# --8<-- [start:imports]
import gzip
import json
import os
import tempfile
import time

import torch
from _model import CONFIG, TINY, Llama
from _server import Engine
from _workload import requests
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize
from coursekit.evidence import artifact

PROCESSES = 1  # the trace is evidence to read, not a timing: one process

KEY = "m14/evidence"  # every file this snippet writes starts with m14-evidence-
NEW_TOKENS = (3, 6, 4, 8, 5, 7)  # one request each: they finish at different steps
MAX_BATCH = 4  # decode buckets 1, 2 and 4; the fifth request waits for a free slot
RUN = "Engine.generate"  # the label around the whole run


# --8<-- [start:labelled]
class LabelledEngine(Engine):
    """_server.Engine, each model step under a profiler label that says what it ran. The label closes
    after the step's kernels have finished (a sync inside it), so that every kernel of the step starts
    while its label is open; built with overlap=False, the engine waits for each step anyway."""

    def prefill_step(self, seqs: list):
        tokens = sum(len(s.prompt) for s in seqs)
        prompts = f"{len(seqs)} prompt" + ("s" if len(seqs) > 1 else "")
        with record_function(f"prefill_step: {prompts}, {tokens} tokens"):
            out = super().prefill_step(seqs)
            sync()
            return out

    def decode_step(self, running: list):
        n = len(running)
        bucket = next(b for b in self.buckets if b >= n) if self.pad else n
        with record_function(f"decode_step: batch {n}" + (f", bucket {bucket}" if bucket != n else "")):
            out = super().decode_step(running)
            sync()
            return out


# --8<-- [end:labelled]


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step_records(prof) -> list[dict]:
    """Each model step in the order it ran: its label, host microseconds, and the device kernels (and
    copies) that ran inside it, their number and summed microseconds. Found by time: a step's label
    closes after a sync, so a kernel that starts while its label is open is its own
    (graph replays and Triton launches too)."""
    events = prof.events()
    kernels = [e for e in events if e.device_type == DeviceType.CUDA and not e.is_user_annotation]
    steps = sorted(
        (e for e in events if e.device_type == DeviceType.CPU and e.name.startswith(("prefill_step", "decode_step"))),
        key=lambda e: e.time_range.start,
    )
    kernels = [k for k in kernels if not k.name.startswith(("prefill_step", "decode_step", RUN))]  # labels' GPU rows
    records = []
    for e in steps:
        inside = [k for k in kernels if e.time_range.start <= k.time_range.start < e.time_range.end]
        records.append(
            {
                "label": e.name,
                "host_us": e.time_range.elapsed_us(),
                "kernels": len(inside),
                "kernel_us": sum(k.time_range.elapsed_us() for k in inside),
            }
        )
    return records


def write_trace(prof, path) -> None:
    """export_chrome_trace to a temporary file, then gzip it to `path`
    (Perfetto and chrome://tracing open the .json.gz as it is)."""
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        with open(tmp, "rb") as src:
            trace = src.read()
    finally:
        os.unlink(tmp)
    json.loads(trace)  # the profiler wrote a complete JSON document
    with gzip.open(path, "wb", compresslevel=9) as out:
        out.write(trace)


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    config = TINY if small else CONFIG
    dev, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    torch.manual_seed(0)
    with torch.device(dev):
        ours = Llama(config).to(dtype).prepare()  # random weights, built as the chapter's engine example builds it
    lo, hi = (4, 12) if small else (64, 512)
    reqs = requests(n=len(NEW_TOKENS), lo=lo, hi=hi, vocab=config["vocab_size"])
    reqs = [dict(r, max_new_tokens=new) for r, new in zip(reqs, NEW_TOKENS)]
    max_len = max(len(r["prompt"]) for r in reqs) + max(NEW_TOKENS)
    attention = "triton" if cuda else "gather"  # as race.py: Triton's interpreter is too slow on a CPU
    engine = LabelledEngine(ours, max_batch=MAX_BATCH, max_model_len=max_len, attention=attention, overlap=False)
    engine.generate(reqs)  # untimed: compiles, first prefills
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        prof.add_metadata("course_snippet", KEY)  # the trace names its snippet
        start = time.perf_counter()
        with record_function(RUN):
            engine.generate(reqs)
        sync()
        run_us = (time.perf_counter() - start) * 1e6
    path = artifact(KEY, "trace.json.gz")
    write_trace(prof, path)
    records = step_records(prof)
    by_kind = {kind: [r for r in records if r["label"].startswith(kind)] for kind in ("prefill_step", "decode_step")}
    summaries = {
        kind: {
            "steps": len(rs),
            "host_us": summarize([r["host_us"] for r in rs], "us", clock="host"),
            **(
                {
                    "kernels": summarize([r["kernels"] for r in rs], "kernels"),
                    "kernel_us": summarize([r["kernel_us"] for r in rs], "us", clock="device"),
                }
                if cuda
                else {}
            ),
        }
        for kind, rs in by_kind.items()
    }
    return {
        "repetitions": min(len(rs) for rs in by_kind.values()),
        "device": dev,
        "dtype": str(dtype).removeprefix("torch."),
        "config": "TINY" if small else "CONFIG",
        "requests": len(reqs),
        "prompt_tokens": [len(r["prompt"]) for r in reqs],
        "new_tokens": list(NEW_TOKENS),
        "max_batch": MAX_BATCH,
        "buckets": engine.buckets,
        "attention": attention,
        "cuda_graphs": engine.use_graphs,
        "engine_stats": {k: v for k, v in engine.stats.items() if k != "padded_slots"},
        # the profiled run: the profiler's own cost included
        "profiled_run_us": run_us,
        "outside_steps_us": run_us - sum(r["host_us"] for r in records),  # the scheduler's own host work
        "steps": summaries,
        "step_records": records if cuda else [{k: r[k] for k in ("label", "host_us")} for r in records],
        "artifacts": [
            {
                "name": path.name,
                "what": "profiler trace",
                "opens_with": "ui.perfetto.dev or chrome://tracing",
                "shows": (
                    f"one offline run of the course's server over {len(reqs)} requests, at most {MAX_BATCH} "
                    f"running: {summaries['prefill_step']['steps']} prefill steps and "
                    f"{summaries['decode_step']['steps']} decode steps, each under a label that says what it ran"
                    + (
                        " (decode replayed from its bucket's CUDA graph), and the host's work between them"
                        if cuda
                        else ", and the host's work between them"
                    )
                ),
            }
        ],
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler trace of the server ({r['config']}, {r['dtype']}, {r['attention']} attention)")
    print(f"  on {device_name()}")
    print(f"  {r['requests']} requests, prompts {r['prompt_tokens']}, new tokens {r['new_tokens']}")
    for rec in r["step_records"]:
        line = f"  {rec['label']:<36} {rec['host_us']:9.0f} us (host)"
        if "kernels" in rec:
            line += f", {rec['kernels']:4d} kernels, {rec['kernel_us']:8.1f} us in them"
        print(line)
    print(f"  the run {r['profiled_run_us']:.0f} us, of which outside the steps {r['outside_steps_us']:.0f} us")
    for a in r["artifacts"]:
        print(f"  {a['name']}: {a['what']}, open it in {a['opens_with']}")
