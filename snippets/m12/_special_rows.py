"""Rows that take the course's top-k (_topk.py) off its ordinary path, and the order it promises.

One definition for two users: tests/test_m12_topk.py checks the kernel on them on the CPU (Triton's
interpreter), and special.py runs the same rows on the GPU, where the kernel is compiled.

Each row: a function of the device that builds it, its k, and the launch options it is run with
(a small chunk or last launch, so that a short row still takes several launches)."""

import torch

INF, NAN = float("inf"), float("nan")


def randn_rows(*shape, dtype=torch.float32, seed=0, device="cpu") -> torch.Tensor:
    """N(0, 1) rows from a seeded generator on the CPU (the same numbers on every device), on device."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype).to(device)


def sorted_rows(device):  # one ascending, one descending
    up = torch.linspace(-3, 3, 3000, device=device)
    return torch.stack([up, up.flip(0)])


def all_equal_rows(device):
    return torch.full((2, 1000), 1.5, device=device)


def few_distinct_rows(device):  # hundreds of ties at the k-th value
    return torch.randint(0, 4, (2, 1000), generator=torch.Generator().manual_seed(5)).float().to(device)


def large_values_in_few_groups(device):
    # Groups are strided: element i is in group i % groups. Every large value in 10 of the 128
    # groups (fewer than k): the k-th largest group maximum is then a small value, and all 160
    # large elements of a 2,048-element chunk pass the filter, more than its 128 slots.
    x = randn_rows(2, 2100, seed=6, device=device)
    x[:, (torch.arange(2100, device=device) % 128) < 10] += 100
    return x


def top_k_in_the_tail_chunk(device):  # sorted: the top 50 in the last, 4-element chunk (4,100 = 8 x 512 + 4)
    return torch.arange(4100, dtype=torch.float32, device=device).repeat(2, 1)


def nan_rows(device):
    x = randn_rows(3, 1000, seed=7, device=device)
    x[0, [10, 555, 999]] = NAN  # fewer NaN than k: all of them first
    x[1, ::5] = NAN  # more NaN than k (200): the first 50 by index
    x[2] = NAN
    x[2, 7] = -NAN  # a NaN with the sign bit set ranks with the others
    return x


def infinity_rows(device):
    x = randn_rows(3, 1000, seed=8, device=device)
    x[0, 100:130] = INF
    x[0, 200:300] = -INF
    x[1] = -INF  # every element -inf
    x[2, :980] = -INF  # 20 finite values, then 30 of the -inf by index
    return x


def signed_zero_rows(device):  # +0.0 above -0.0, as torch's CUDA radix key has it
    x = torch.zeros(1, 1000, device=device)
    x[0, ::2] = -0.0
    x[0, 500:] = -1.0
    return x


# name: (build(device), k, options for topk)
SPECIAL_ROWS = {
    "sorted": (sorted_rows, 50, {"chunk": 512}),
    "all_equal": (all_equal_rows, 50, {"chunk": 256}),
    "few_distinct": (few_distinct_rows, 50, {"chunk": 256}),
    "large_values_in_few_groups": (large_values_in_few_groups, 50, {"chunk": 2048}),
    "top_k_in_the_tail_chunk": (top_k_in_the_tail_chunk, 50, {"chunk": 512}),
    "nan": (nan_rows, 50, {"chunk": 256}),
    "infinities": (infinity_rows, 50, {"chunk": 256}),
    "signed_zeros": (signed_zero_rows, 50, {}),
}


def radix_keys(x: torch.Tensor) -> torch.Tensor:
    """torch's CUDA radix key of each value (TopKTypeConfig<float>::convert), as int64 in [0, 2^32):
    unsigned order is the order topk ranks by; every NaN is 0xFFFFFFFF, above +inf."""
    x = x.float()
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    key = torch.where(bits >> 31 == 1, bits ^ 0xFFFFFFFF, bits | 0x80000000)
    return torch.where(x.isnan(), torch.full_like(key, 0xFFFFFFFF), key)


def documented_order(x: torch.Tensor, k: int) -> torch.Tensor:
    """The indices the kernel promises for rows x: by radix key from the largest, equal keys by
    lowest index (one 64-bit key each, the key above 2^31 - 1 - index, as the kernel's last launch)."""
    index = torch.arange(x.shape[-1], device=x.device)
    return torch.topk(radix_keys(x) * 2**31 + (2**31 - 1 - index), k).indices


if __name__ == "__main__":
    for name, (build, k, options) in SPECIAL_ROWS.items():
        x = build("cpu")
        print(
            f"{name:>28}: {list(x.shape)}, k = {k}, {options or 'the planned launches'}; first indices "
            f"in the documented order: {documented_order(x, k)[0, :5].tolist()}"
        )
