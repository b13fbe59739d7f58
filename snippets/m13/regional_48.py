"""regional.py at 48 layers (about 600 M parameters in bf16): whole-model against per-block
(regional) compilation, cold and warm, each case in its own child process with its own Inductor
cache directory; forward only, 1 x 1,024 tokens. A snippet of its own because a cold whole-model
compile of 48 layers takes about a minute by itself; nested_compile_region is left to regional.py
(4 and 16 layers) for the same reason.

On the CPU (small=True): as regional.py's CPU path, at 3 layers."""

# --8<-- [start:imports]
import torch
from regional import report, run_cases  # the cases, each in child processes (regional.py)

# --8<-- [end:imports]

PROCESSES = 1  # every case runs in its own child processes; its first-call seconds are one sample each
LAYERS = [48]
STRATEGIES = ["whole", "regional"]


def measure(small: bool = False) -> dict:
    return run_cases([3] if small else LAYERS, STRATEGIES, small)


if __name__ == "__main__":
    report(measure(small=not torch.cuda.is_available()))
