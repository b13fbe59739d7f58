"""The course's Triton top-k (_topk.py) off its ordinary path, on the GPU: rows that make it reread its
chunks, timed against torch.topk; and the special values of tests/test_m12_topk.py run on the device.

Timed (float32, V = 262,144, k = 50, batch 1 and 64), every row beside the ordinary one:
- "normal": i.i.d. N(0, 1) logits, the rows race.py times;
- "masked": all but 1% of each row set to -inf (2,621 allowed tokens at random positions, as a
  grammar or a ban list masks a vocabulary); "masked_few": all but 32 (fewer than k survive: the top
  k then ends in -inf, ties taken by lowest index);
- "ascending": each row sorted ascending (the largest values together, at the end of the row);
- "bf16_ties": N(0, 1) rounded to bfloat16 and held in float32 (8 bits of mantissa: many equal values).
A first-launch chunk whose filter keeps more than its slots (a chunk with fewer than k finite group
maxima keeps every element) takes the exact path: it reads the chunk again 32 times, unless fewer than
k keys lie above its threshold, and takes the ties at the threshold by index. Every
variant (ours and torch.topk, on each row and batch) is captured once into a CUDA graph (race.graphed)
and timed as replays, all in the same interleaved rounds (bench.gpu_us_each: CUDA events, L2 flushed
before each call); ratios are per round: each row's time over the normal row's, torch.topk's over ours.

Checked, for each timed row, on the eager call and on the graph's last replay: the values equal
torch.topk's; every index points at its value, none repeats; the indices are the kernel's documented
order (radix key from the largest, ties by lowest index; _special_rows.documented_order). Beside it,
how many first-launch chunks take the exact path, computed on the host by the kernel's rules (with
several chunks a program, a running threshold set by an earlier chunk can spare a later one).

Special rows (_special_rows.SPECIAL_ROWS, the rows tests/test_m12_topk.py checks in Triton's
interpreter): NaN (fewer and more than k, a negative NaN), infinities, signed zeros, sorted rows,
equal values, few distinct values, large values in few groups, the top k in a tail chunk. The tests
run the kernel in Triton's interpreter (numpy's nanmax for tl.max); here it runs compiled, as the
device runs it (a maxnum: both drop NaN), eager and as a graph replay, checked the same way.

On the CPU (small=True): Triton's interpreter, V = 512, batch 1, host times of plain calls (no graphs),
two of the special rows (tests/test_m12_topk.py runs them all)."""

# --8<-- [start:imports]
import contextlib

import torch
from _special_rows import SPECIAL_ROWS, documented_order, radix_keys  # the rows, the promised order
from _topk import FINAL_MAX, plan, topk  # the course's kernel (_topk.py)
from race import graphed  # capture once, replay (race.py)

# --8<-- [end:imports]
from coursekit.bench import device_name, gpu_us_each, host_us_each, summarize

PROCESSES = 1  # one process: every number is a device time (CUDA events around graph replays)

VOCAB, K = 262144, 50
BATCHES = [1, 64]
ALLOWED_FRACTION = 0.01  # "masked": the share of a row left finite
ALLOWED_FEW = 32  # "masked_few": fewer than k finite values
CASES = ["normal", "masked", "masked_few", "ascending", "bf16_ties"]
SMALL = {"vocab": 512, "batches": [1], "special_rows": ["signed_zeros", "few_distinct"]}


# --8<-- [start:rows]
def make_rows(case: str, batch: int, vocab: int, dev: str) -> torch.Tensor:
    """[batch, vocab] float32 logits of one kind (see the docstring)."""
    x = torch.randn(batch, vocab, device=dev)
    if case in ("masked", "masked_few"):
        allowed = max(1, round(vocab * ALLOWED_FRACTION)) if case == "masked" else ALLOWED_FEW
        keep = torch.rand(batch, vocab, device=dev).argsort(dim=1)[:, :allowed]  # scattered positions
        masked = torch.full_like(x, float("-inf"))
        return masked.scatter(1, keep, x.gather(1, keep))
    if case == "ascending":
        return x.sort(dim=1).values
    if case == "bf16_ties":
        return x.to(torch.bfloat16).float()
    return x


# --8<-- [end:rows]


def key_value(key: torch.Tensor) -> torch.Tensor:
    """The float32 of radix keys (int64 in [0, 2^32)), as the kernel's key_value: NaN for 0xFFFFFFFF."""
    bits = torch.where(key >> 31 == 1, key ^ 0x80000000, key ^ 0xFFFFFFFF)
    return ((bits + 2**31) % 2**32 - 2**31).to(torch.int32).view(torch.float32)


# --8<-- [start:exact]
def exact_path_chunks(x: torch.Tensor, k: int, chunk=None, last_max=FINAL_MAX, per_program=None) -> int:
    """How many of the first launch's chunks take the exact path, by the kernel's rules (select and the
    running threshold in _topk.py), computed here: a chunk as [groups, rows] (element i in group i %
    groups); a program's chunks in turn, each filtered against the running threshold (the floor) and,
    if more than the slots pass, against t, the higher of the floor and the k-th largest group
    maximum's key; more than the slots at or above t is the exact path. The floor after such a chunk:
    t + 1 where t is its own (the k-th largest group maximum's key, or after the exact path its k-th
    largest key if k keys lie above the threshold), else t. tl.max drops NaN (a maxnum on the GPU,
    numpy's nanmax in Triton 3.6's interpreter): a group's maximum is NaN only when all of the group
    is NaN."""
    batch, n = x.shape
    level = plan(batch, n, k, chunk, last_max, per_program)[0]
    size, groups, slots, per = level["chunk"], level["groups"], level["slots"], level["per_program"]
    programs = -(-n // (size * per))
    pad = programs * per * size - n
    shape = (batch, programs, per, size // groups, groups)
    xs = torch.nn.functional.pad(x.float(), (0, pad), value=float("-inf")).view(shape)
    valid = torch.nn.functional.pad(torch.ones_like(x, dtype=torch.bool), (0, pad)).view(shape)
    keys = torch.where(valid, radix_keys(xs), 0)
    maxima = xs.nan_to_num(nan=float("-inf"), posinf=float("inf"), neginf=float("-inf")).amax(dim=3)
    maxima = torch.where(xs.isnan().all(dim=3), float("nan"), maxima)
    own = radix_keys(maxima).topk(k, dim=-1).values[..., -1]  # [batch, programs, per]: each chunk's t
    kth = keys.flatten(3).topk(k, dim=-1).values[..., -1]  # each chunk's k-th largest key
    floor, exact = torch.zeros(batch, programs, dtype=torch.int64, device=x.device), 0
    for c in range(per):
        xc, vc, kc = xs[:, :, c], valid[:, :, c], keys[:, :, c]
        passing = lambda t: (vc & ~(xc < key_value(t)[:, :, None, None])).sum(dim=(2, 3))  # noqa: E731
        searched = passing(floor) > slots if per > 1 else torch.ones_like(floor, dtype=torch.bool)
        t = torch.maximum(own[:, :, c], floor)
        took = searched & (passing(t) > slots)
        exact += int(took.sum())
        reread = took & ((kc > t[:, :, None, None]).sum(dim=(2, 3)) >= k)
        t = torch.where(reread, kth[:, :, c], t)
        reached = (own[:, :, c] >= floor) | reread  # k of the chunk's keys are >= t
        t = torch.where(reached & (t < 0xFF800000), t + 1, t)
        floor = torch.where(searched, t, floor)
    return exact


# --8<-- [end:exact]


def same_values(values: torch.Tensor, ref: torch.Tensor) -> bool:
    """Equal as floats, NaN where the other has NaN."""
    nan = values.isnan()
    return bool(torch.equal(nan, ref.isnan()) and torch.equal(values[~nan], ref[~nan]))


def checks(x: torch.Tensor, k: int, values: torch.Tensor, indices: torch.Tensor) -> dict:
    """What one output of ours is checked for, against torch.topk on the same device."""
    ref = torch.topk(x, k).values
    picked = x.gather(1, indices.clamp(0, x.shape[1] - 1))
    return {
        "values_match": same_values(values, ref),
        "indices_point_at_values": bool(((indices >= 0) & (indices < x.shape[1])).all())
        and same_values(picked, values),
        "indices_distinct": all(len(set(row)) == k for row in indices.tolist()),
        "documented_order": bool(torch.equal(indices, documented_order(x, k))),
    }


def passed(check: dict) -> bool:
    return all(check.values())


def timed(cases: list[str], batches: list[int], vocab: int, dev: str, rounds: int) -> list[dict]:
    """Ours and torch.topk on each kind of row at each batch, all in the same interleaved rounds."""
    cuda = dev == "cuda"
    points, variants, outputs = [], {}, {}
    for batch in batches:
        for case in cases:
            x = make_rows(case, batch, vocab, dev)
            eager = checks(x, K, *topk(x, K))
            name = f"{case}@{batch}"

            def ours(x=x, name=name):  # keeps what it returns: after the timing, the graph's last replay
                outputs[name] = topk(x, K)

            variants[f"ours:{name}"] = graphed(ours)
            variants[f"torch_topk:{name}"] = graphed(lambda x=x: torch.topk(x, K))
            points.append({"case": case, "batch": batch, "x": x, "eager": eager, "name": name})
    if cuda:
        times = gpu_us_each(variants, rounds=rounds, rep_ms=20)
    else:  # the interpreter takes a second a call: two plain calls each
        times = host_us_each(
            {n: (fn, contextlib.nullcontext) for n, fn in variants.items()}, calls=1, repeats=2, warmup=0
        )
    for p in points:
        x, name = p.pop("x"), p.pop("name")
        replay = checks(x, K, *outputs[name])
        ours, theirs = times[f"ours:{name}"], times[f"torch_topk:{name}"]
        base = f"normal@{p['batch']}"
        p.update(
            {
                "time_us": {"ours": ours, "torch_topk": theirs},
                "vs_torch_topk": summarize([t / o for t, o in zip(theirs["rounds"], ours["rounds"])], "x"),
                "ours_vs_normal": summarize(
                    [o / n for o, n in zip(ours["rounds"], times[f"ours:{base}"]["rounds"])], "x"
                ),
                "torch_vs_normal": summarize(
                    [o / n for o, n in zip(theirs["rounds"], times[f"torch_topk:{base}"]["rounds"])], "x"
                ),
                "chunks": p["batch"] * -(-vocab // plan(p["batch"], vocab, K)[0]["chunk"]),
                "exact_path_chunks": exact_path_chunks(x, K),
                "finite_per_row": int(x.isfinite().sum(dim=1).min()),
                "replay": replay,
                "checks_pass": passed(p["eager"]) and passed(replay),
            }
        )
    return points


def special_rows(names: list[str], dev: str) -> list[dict]:
    """Each special row run eager and as a graph replay on this device, checked against torch.topk."""
    cuda = dev == "cuda"
    out = []
    for name in names:
        build, k, options = SPECIAL_ROWS[name]
        x = build(dev)
        eager = checks(x, k, *topk(x, k, **options))
        row = {"row": name, "rows": x.shape[0], "n": x.shape[1], "k": k, "options": options, "eager": eager}
        if cuda:
            kept = {}
            replay = graphed(lambda x=x, k=k, options=options: kept.update(out=topk(x, k, **options)))
            replay()
            row["replay"] = checks(x, k, *kept["out"])
        else:
            row["replay"] = None  # no graphs on the CPU
        row["exact_path_chunks"] = exact_path_chunks(x, k, **options)
        row["chunks"] = x.shape[0] * -(-x.shape[1] // plan(*x.shape, k, **options)[0]["chunk"])
        row["checks_pass"] = passed(eager) and (row["replay"] is None or passed(row["replay"]))
        out.append(row)
    return out


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    vocab = SMALL["vocab"] if small else VOCAB
    batches = SMALL["batches"] if small else BATCHES
    rounds = 8  # as race.py's secondary points: the effects timed here are large
    points = timed(CASES, batches, vocab, dev, rounds)
    rows = special_rows(SMALL["special_rows"] if small else list(SPECIAL_ROWS), dev)
    notes = [
        "points: one per kind of row (case) and batch; time_us: ours and torch.topk, graph replays, same rounds",
        "ours_vs_normal / torch_vs_normal: per round, the time on this row over the time on the normal row "
        "of the same batch (ours over ours, torch.topk over torch.topk); vs_torch_topk: torch.topk over ours",
        "eager / replay: checks of the eager call's output and of the graph's last replay: values equal "
        "torch.topk's (NaN where it has NaN), indices point at their values and do not repeat, indices in "
        "the documented order (radix key from the largest, ties by lowest index)",
        "exact_path_chunks: of the first launch's chunks (chunks), how many take the exact path, "
        "computed on the host by the kernel's rules (the running threshold included)",
        "finite_per_row: the fewest finite values in a row",
        "special_rows: tests/test_m12_topk.py's rows (_special_rows.py), run on this device",
    ]
    if not cuda:
        notes.append(
            "CPU run: Triton's interpreter, V = 512, batch 1, host times of two plain calls (no graphs; "
            "replay is the last timed call), two special rows"
        )
    return {
        "repetitions": min(t["n"] for p in points for t in p["time_us"].values()),
        "device": device_name(),
        "vocab": vocab,
        "k": K,
        "allowed_fraction": ALLOWED_FRACTION,
        "allowed_few": ALLOWED_FEW,
        "points": points,
        "special_rows": rows,
        "all_checks_pass": all(p["checks_pass"] for p in points + rows),
        "notes": notes,
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"top-k on rows off the ordinary path, {r['device']}: us per call (graph replays), k = {r['k']}")
    head = ("row", "batch", "ours", "topk", "x normal", "x topk", "exact", "checks")
    print("  " + " ".join(f"{h:>10}" for h in head))
    for p in r["points"]:
        t = p["time_us"]
        cells = [p["case"], p["batch"], f"{t['ours']['median']:.1f}", f"{t['torch_topk']['median']:.1f}"]
        cells += [f"{p['ours_vs_normal']['median']:.2f}", f"{p['vs_torch_topk']['median']:.2f}"]
        cells += [f"{p['exact_path_chunks']}/{p['chunks']}", "ok" if p["checks_pass"] else "FAIL"]
        print("  " + " ".join(f"{c:>10}" for c in cells))
    print("  special rows on this device (eager and replayed, against torch.topk):")
    for row in r["special_rows"]:
        print(
            f"    {row['row']:>28}: {'ok' if row['checks_pass'] else 'FAIL'}, exact path in "
            f"{row['exact_path_chunks']} of {row['chunks']} first-launch chunks"
        )
    print(f"  every check passed: {r['all_checks_pass']}")
    for note in r["notes"]:
        print(f"  note: {note}")
