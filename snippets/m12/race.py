"""The course's Triton top-k (_topk.py) against torch.topk and torch.sort, at a 256k vocabulary.

Main grid: float32 logits [batch, 262,144] (2^18, the "256k" vocabulary; random N(0, 1)), k = 50,
batch 1, 2, 4, ..., 256: one decode sequence to a full serving batch; at batch 1, 64 and 256 also
the first launch's chunk forced to 4,096, 8,192 and 16,384 elements, the first launch alone, and one
chunk per program (no running threshold). Secondary points, at batch 1,
64 and 256: bfloat16; vocabulary 32,768 and 131,072; k = 1 and 1,024 (one change at a time).

Every variant is captured once into a CUDA graph and timed as replays (both sides without launch
gaps: torch.topk is several kernels, launches.py counts them), the variants of a point in the same
interleaved rounds (bench.gpu_us_each: CUDA events, L2 flushed before each call, so the logits come
from HBM); ratios are per round. Beside each point: the logits' bytes, and a copy of the logits
(read and written: twice the bytes) timed in the same rounds; the time to merely read the logits is
the bytes over methodology/ceilings' copy peak, or half that copy. FlashInfer's top-k is raced where
`import flashinfer` works. For the scoreboard (data["races"]): ours against torch.topk at every batch
(target 1.0), and against the course's fixed time targets at batch 1, 64 and 256 (15, 50, 150 us: constant summaries
with as many rounds). On the CPU (small=True): Triton's interpreter, [batch, 600] rows, no graphs."""

# --8<-- [start:imports]
import torch
from _topk import plan, topk  # the course's kernel (_topk.py)

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, summarize

PROCESSES = 1  # one process: every number is a device time (CUDA events around graph replays)

VOCAB, K = 262144, 50
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
SECONDARY_BATCHES = [1, 64, 256]
# (dtype, vocab, k): one thing changed from the main grid at a time
SECONDARY = [("bfloat16", VOCAB, K), ("float32", 32768, K), ("float32", 131072, K), ("float32", VOCAB, 1)]
SECONDARY += [("float32", VOCAB, 1024)]
CHUNKS = [4096, 8192, 16384]
TARGETS_US = {1: 15.0, 64: 50.0, 256: 150.0}  # the targets: fp32, V = 256k, k = 50, both sides graph-replayed
SMALL = {  # the CPU path: the interpreter runs every call, so a few tiny rows (no chunk sweep: the
    "vocab": 600,  # override is tested in tests/test_m12_topk.py)
    **{"batches": [1, 2], "secondary_batches": [1], "chunks": [], "sweep_batches": [1]},
    "secondary": [("bfloat16", 600, K), ("float32", 600, 1)],
}
CHAPTER = "part-m/12-topk.md"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


# --8<-- [start:graphed]
def graphed(fn):
    """fn captured once into a CUDA graph; the function returned replays it: one launch from the host,
    every kernel of fn back to back on the device. Without a GPU, fn itself."""
    if not torch.cuda.is_available():
        return fn
    side = torch.cuda.Stream()  # warm-up off the default stream, as torch.cuda.graph's docs ask
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()  # compiles the Triton kernels and fills the allocator's cache before the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


# --8<-- [end:graphed]


def flashinfer_top_k():
    """FlashInfer's top-k as a function (logits, k) -> (values, indices), largest first like ours and
    torch.topk (sorted=True: by shape a one-launch radix select or FilteredTopK, then torch.sort of
    the k), tried once on a small row against torch.topk; or None and the reason it is not raced."""
    try:
        import flashinfer

        top_k = getattr(flashinfer, "top_k", None)
        if top_k is None:
            return None, f"flashinfer {getattr(flashinfer, '__version__', '?')} has no top_k"

        def fn(logits, k):
            return top_k(logits, k, sorted=True)

        row = torch.randn(2, 4096, device="cuda")
        values, indices = fn(row, 5)
        if not (torch.equal(values, torch.topk(row, 5)[0]) and torch.equal(row.gather(1, indices), values)):
            return None, "flashinfer.top_k's values differ from torch.topk's on a test row"
        return fn, None
    except Exception as error:  # not installed, built for another torch or CUDA, another signature
        return None, f"flashinfer not raced: {type(error).__name__}: {error}"


def flashinfer_version() -> str | None:
    try:
        import flashinfer

        return getattr(flashinfer, "__version__", None)
    except Exception:  # not installed: the note says why
        return None


def paired(theirs: dict, ours: dict) -> dict:
    """theirs / ours round by round (both timed in the same rounds): above 1, ours is faster."""
    return summarize([t / o for t, o in zip(theirs["rounds"], ours["rounds"])], "x")


# --8<-- [start:point]
def race(batch: int, vocab: int, k: int, dtype: str, dev: str, rounds: int, chunks=(), peer=None, first=False) -> dict:
    """One point: ours, torch.topk, torch.sort (and FlashInfer) and a copy of the logits, each
    graph-replayed, timed in the same rounds; and whether ours returns what torch.topk returns."""
    logits = torch.randn(batch, vocab, device=dev).to(DTYPES[dtype])  # random, never zeros
    values, indices = topk(logits, k)
    ref_values, _ = torch.topk(logits, k)
    copy = torch.empty_like(logits)
    variants = {
        "ours": graphed(lambda: topk(logits, k)),
        "torch_topk": graphed(lambda: torch.topk(logits, k)),
        "torch_sort": graphed(lambda: torch.sort(logits, dim=-1, descending=True)),
        "copy": graphed(lambda: copy.copy_(logits)),
    }
    if first:  # the first launch alone (the one that reads the logits); and a chunk per program
        variants["ours_first_launch"] = graphed(lambda: topk(logits, k, launches=1))
        variants["ours_one_chunk_per_program"] = graphed(lambda: topk(logits, k, per_program=1))
    for chunk in chunks:  # the first launch's chunk forced: what the plan's choice is worth
        variants[f"ours_chunk_{chunk}"] = graphed(lambda chunk=chunk: topk(logits, k, chunk=chunk))
    checks = {}
    if peer is not None:
        variants["flashinfer"] = graphed(lambda: peer(logits, k))
        fi_values, fi_indices = peer(logits, k)  # its answer at this shape, checked like ours
        checks["flashinfer_values_match"] = bool(torch.equal(fi_values, ref_values))
        checks["flashinfer_indices_point_at_values"] = bool(torch.equal(logits.gather(1, fi_indices), fi_values))
    times = gpu_us_each(variants, rounds=rounds, rep_ms=20)
    return {
        "dtype": dtype,
        "vocab": vocab,
        "k": k,
        "batch": batch,
        "logits_bytes": logits.numel() * logits.element_size(),
        "copy_bytes": 2 * logits.numel() * logits.element_size(),  # the copy reads and writes them
        "launches": len(plan(batch, vocab, k)),
        "plan": plan(batch, vocab, k),
        "values_match": bool(torch.equal(values, ref_values)),
        "indices_point_at_values": bool(torch.equal(logits.gather(1, indices), values)),
        **checks,
        "time_us": times,
        "speedup": {  # per round: the peer's time over ours
            "vs_torch_topk": paired(times["torch_topk"], times["ours"]),
            "vs_torch_sort": paired(times["torch_sort"], times["ours"]),
            **({"vs_flashinfer": paired(times["flashinfer"], times["ours"])} if peer is not None else {}),
        },
    }


# --8<-- [end:point]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    vocab = SMALL["vocab"] if small else VOCAB
    batches, secondary_batches = (
        (SMALL["batches"], SMALL["secondary_batches"]) if small else (BATCHES, SECONDARY_BATCHES)
    )
    secondary = SMALL["secondary"] if small else SECONDARY
    chunks, sweep = (SMALL["chunks"], SMALL["sweep_batches"]) if small else (CHUNKS, list(TARGETS_US))
    rounds = 3 if small else 12
    peer, peer_note = flashinfer_top_k() if cuda else (None, "CPU run: FlashInfer needs a GPU")
    main = [race(b, vocab, K, "float32", dev, rounds, chunks if b in sweep else (), peer, b in sweep) for b in batches]
    extra = [  # fewer rounds: the secondary grid only says where ours stops winning
        race(b, v, k, d, dev, max(3, rounds * 2 // 3), (), peer if k == K else None)
        for d, v, k in secondary
        for b in secondary_batches
    ]

    def row(p, peer, theirs):  # a row of the scoreboard (coursekit/scoreboard.py)
        dtype = {"float32": "fp32", "bfloat16": "bf16"}[p["dtype"]]
        name = f"Triton top-k, {dtype}, V = {p['vocab']:,}, k = {p['k']}, batch {p['batch']}"
        return {
            "name": name,
            "peer": peer,
            "ours": p["time_us"]["ours"],
            "theirs": theirs,
            "bar": 1.0,
            "chapter": CHAPTER,
        }

    races = [row(p, "torch.topk", p["time_us"]["torch_topk"]) for p in main]
    races += [row(p, "torch.topk", p["time_us"]["torch_topk"]) for p in extra if p["k"] != K]  # k = 1 and 1,024
    races += [  # FlashInfer where it ran: its top_k, sorted like ours
        row(p, f"FlashInfer {flashinfer_version()} top_k (sorted=True)", p["time_us"]["flashinfer"])
        for p in main
        if "flashinfer" in p["time_us"]
    ]
    for p in (p for p in main if p["batch"] in TARGETS_US and not small):  # the target: a constant, paired by round
        bar = TARGETS_US[p["batch"]]
        races.append(
            row(p, f"the course's target, {bar:g} us", summarize([bar] * p["time_us"]["ours"]["n"], "us", rounds=True))
        )
    everything = main + extra
    return {
        "repetitions": min(t["n"] for p in everything for t in p["time_us"].values()),
        "vocab": vocab,
        "k": K,
        "targets_us": {str(b): us for b, us in TARGETS_US.items()},
        "points": main,
        "secondary": extra,
        "all_values_match": all(p["values_match"] and p["indices_point_at_values"] for p in everything),
        "flashinfer_all_values_match": all(
            p["flashinfer_values_match"] and p["flashinfer_indices_point_at_values"]
            for p in everything
            if "flashinfer_values_match" in p
        )
        if peer is not None
        else None,
        "faster_than_torch_topk_at_every_batch": all(p["speedup"]["vs_torch_topk"]["median"] > 1 for p in main),
        "flashinfer": {
            "raced": peer is not None,
            "version": flashinfer_version(),
            "note": peer_note or "raced at every k = 50 point, sorted output against sorted output",
        },
        "notes": [] if cuda else ["CPU run: Triton's interpreter, no CUDA graphs; times are host times"],
        "races": races,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"top-k on {device_name()}: us per call (graph replays), k = {r['k']} unless noted")
    head = ("dtype", "V", "k", "batch", "ours", "topk", "sort", "copy", "x topk", "x sort")
    print("  " + " ".join(f"{h:>9}" for h in head))
    for p in r["points"] + r["secondary"]:
        t, s = p["time_us"], p["speedup"]
        cells = [p["dtype"], p["vocab"], p["k"], p["batch"]]
        cells += [f"{t[v]['median']:.1f}" for v in ("ours", "torch_topk", "torch_sort", "copy")]
        cells += [f"{s['vs_torch_topk']['median']:.2f}", f"{s['vs_torch_sort']['median']:.2f}"]
        print("  " + " ".join(f"{c:>9}" for c in cells))
    print(f"  values equal torch.topk's everywhere: {r['all_values_match']}")
    print(f"  faster than torch.topk at every batch: {r['faster_than_torch_topk_at_every_batch']}")
    print(f"  FlashInfer: {r['flashinfer']['note']}")
    for note in r["notes"]:
        print(f"  note: {note}")
