"""torch.profiler's view of one eager torch.add: the host events around the launch and the kernel."""

# --8<-- [start:imports]
import torch
from torch.profiler import ProfilerActivity, profile

# --8<-- [end:imports]
from coursekit.bench import device_name, summarize

PROCESSES = 1  # one process: kernel counts and profiler busy time are GPU-side, not host timings

NUMEL = 1024
CALLS = 1000


# --8<-- [start:profile]
def profile_adds(a, b, calls: int):
    """torch.profiler over `calls` eager adds of a and b: per-event totals
    (host, and device on a GPU)."""
    # fmt: off
    activities = [ProfilerActivity.CPU] + (
        [ProfilerActivity.CUDA] if a.is_cuda else []
    )
    # fmt: on
    with profile(activities=activities) as prof:
        for _ in range(calls):
            # autograd on (a and b require grad): the full eager path
            torch.add(a, b)
        if a.is_cuda:
            torch.cuda.synchronize()
    return prof.key_averages()


# --8<-- [end:profile]


def measure(small: bool = False) -> dict:
    cuda = torch.cuda.is_available()
    dev = "cuda" if cuda else "cpu"
    a = torch.randn(NUMEL, device=dev, requires_grad=True)
    b = torch.randn(NUMEL, device=dev, requires_grad=True)
    calls = 20 if small else CALLS
    repeats = 3 if small else 10
    per_rep = []  # {event name: (count, host us per call, device us per call)} for each repetition
    for _ in range(repeats + 1):  # the first profile is a warm-up (CUPTI start-up costs)
        events = profile_adds(a, b, calls)
        per_rep.append({e.key: (e.count, e.cpu_time_total / calls, e.device_time_total / calls) for e in events})
    per_rep = per_rep[1:]

    names = sorted(set.intersection(*(set(r) for r in per_rep)))
    rows = {}
    for name in names:
        counts = {r[name][0] for r in per_rep}
        rows[name] = {
            "count_per_call": max(counts) / calls,
            "host_us_per_call": summarize([r[name][1] for r in per_rep], "us", "host"),
            "device_us_per_call": summarize([r[name][2] for r in per_rep], "us", "device"),
        }
    # The kernel: the one device event that ran once per call and is not a host-side op.
    kernel = [
        n
        for n in names
        if rows[n]["count_per_call"] == 1
        and not n.startswith(("aten::", "cuda"))
        and rows[n]["device_us_per_call"]["median"] > 0
    ]
    kernel_name = kernel[0] if kernel else None
    return {
        "repetitions": repeats,
        "calls": calls,
        "numel": NUMEL,
        "events": rows,
        # the three layers the chapter names, per torch.add (profiler overhead included)
        "aten_add": rows["aten::add"],
        "launch": rows.get("cudaLaunchKernel", rows["aten::add"] if not cuda else None),
        "kernel": rows[kernel_name] if kernel_name else rows["aten::add"],
        "kernel_name": kernel_name or "none (CPU run)",
        "table": events.table(sort_by="cpu_time_total", row_limit=8, max_name_column_width=40),
    }


if __name__ == "__main__":
    r = measure(small=not torch.cuda.is_available())
    print(f"torch.profiler, {r['calls']} x torch.add of {r['numel']} floats on {device_name()}")
    print(r["table"])
