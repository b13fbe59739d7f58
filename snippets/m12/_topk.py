"""The course's Triton top-k: the k largest values of each row of a [batch, n] tensor of logits and
their indices, largest first, exact. Made for what torch.topk does slowly: few rows, long ones (batch
1 to 256, a vocabulary of 32k to 256k, k from 1 to 1,024; float32, bfloat16 or float16).

The algorithm: filter, then rank what is left. A row is cut into chunks, one program each (at batch 1
a 256k row is 32 programs: one program reading 1 MiB alone could not meet the batch-1 bar). A program
holds its chunk in registers as GROUPS x ROWS (GROUPS >= 2k strided groups: element i is in group
i % GROUPS) and takes each group's maximum. At least k elements are >= the k-th largest maximum, t, so
the chunk's top k are all >= t: the elements >= t are a superset of it (about 1.25k of them on random
data: 60 of 4,096 for k = 50). Each gets a slot from a running count and is written, as its value's
float32 bits above its index, to SLOTS slots (index -1 in the slots left). The next launch reads those
slots as a shorter row and filters them the same way; the last one holds its whole row in one program,
gathers its survivors in a small buffer as 64-bit keys (the value's radix key above 2^31 - 1 - index),
counts for each how many survivors are larger (its rank) and writes the first k at their ranks. At
V = 256k and k <= 64 that is two launches.

t is found among the GROUPS maxima as uint32 radix keys (torch's own map of floats to keys,
TopKTypeConfig<float>::convert in SortingRadixSelect.cuh), two bits per step: three counts per step,
packed 8 bits each into one int32 sum, 16 sums in all; then the chunk is compared with t as floats.
Where more than SLOTS elements pass (many ties at t, or the large values gathered in fewer than k of
the strided groups), the program finds the chunk's exact k-th key instead (unless fewer than k keys
lie above t: then t is it) by deciding its 32 bits one count at a time, and takes, of the keys equal
to it, those with the lowest indices the same way; it reads its chunk again, a few rows at a time, so
that this rare path costs registers only while it runs. It then keeps exactly k.

Against the alternatives:
- radix select (torch.topk's multi-block path at these shapes, mbtopk in TensorTopK.cu): exact in
  four passes of 8 bits over the row for float32, but the blocks of a row must agree on each digit
  before the next pass, so each pass is several launches (launches.py counts them all).
- bitonic (tl.sort, tl.topk on every chunk): about 27 compare-and-swap rounds over every element for
  k = 64, most of them across threads or warps: at batch 256 (67 M elements) far more work than
  reading them. Here nothing is sorted; the last launch ranks a few hundred survivors by counting.
- two-stage candidates then merge: this is that, with a filter in place of a per-chunk sort: one max
  and one compare per element, a handful of sums per chunk.
- a threshold search over the whole row (FlashInfer's sort-free sampling pivots on thresholds, pass
  after pass): every pass reads the row and needs a count over all of it; the group maxima give each
  chunk a safe threshold in its one read, with no agreement between programs.

Ties and special values: equal values are taken lowest index first and written in that order;
torch.topk does not define its order of ties (its docs: the indices of tied elements may vary), so
the indices agree with torch.topk's up to which of the elements tied at the k-th value are taken.
NaN ranks above +inf, as in torch.topk (the CUDA radix map and the CPU comparator both put it first);
every NaN comes back as the NaN 0x7FFFFFFF. -0.0 ranks just below +0.0, as in torch's CUDA map (its
CPU comparator calls them equal). An all-equal row returns indices 0 to k-1; sorted rows, all -inf
rows and rows of +-inf need nothing special. Values are rebuilt from their keys: exact.

Launch settings are planned, not autotuned (plan): a launch's chunk sets the shape of the next
launch's input, which an autotuner timing one kernel cannot weigh; race.py times three chunk sizes.
"""

# --8<-- [start:imports]
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # no GPU: Triton runs the kernels in its interpreter, on the CPU
import triton  # noqa: E402  (imported after the switch above, as Triton's documentation has it)
import triton.language as tl  # noqa: E402

# --8<-- [end:imports]

MAX_K = 1024
FINAL_MAX = 16384  # the most elements the last launch holds in one program (registers: 32 per thread)


# --8<-- [start:keys]
@triton.jit
def radix_key(x):
    """Float to a uint32 whose unsigned order is the float order: negative floats have all bits
    flipped, positive ones the sign bit set; NaN becomes 0xFFFFFFFF, above +inf. No float maps to 0."""
    bits = x.to(tl.float32).to(tl.uint32, bitcast=True)
    key = tl.where((bits >> 31) == 1, ~bits, bits | 0x80000000)
    return tl.where((bits & 0x7FFFFFFF) > 0x7F800000, 0xFFFFFFFF, key)


@triton.jit
def key_value(key):
    """The float of a key (radix_key's inverse; NaN comes back as 0x7FFFFFFF)."""
    bits = tl.where((key >> 31) == 1, key ^ 0x80000000, ~key)
    return bits.to(tl.float32, bitcast=True)


# --8<-- [end:keys]


# --8<-- [start:select]
@triton.jit
def load_elements(src_row, pos, n, FIRST: tl.constexpr, EVEN: tl.constexpr):
    """The elements at positions pos of a row: values as float32 (exact for bfloat16 and float16),
    whether each is an element, and its index in the logits."""
    if FIRST:  # the logits
        if EVEN:  # every position is an element: no mask to compute or apply
            x = tl.load(src_row + pos).to(tl.float32)
            valid = tl.full(pos.shape, True, tl.int1)
        else:
            valid = pos < n
            x = tl.load(src_row + pos, mask=valid, other=float("-inf")).to(tl.float32)
        idx = pos
    else:  # a survivor of the launch before: its value's float32 bits above its index; -1 if empty
        packed = tl.load(src_row + pos, mask=pos < n, other=-1)
        idx = packed.to(tl.int32)  # the low 32 bits
        x = (packed >> 32).to(tl.int32).to(tl.float32, bitcast=True)
        valid = idx >= 0
    return x, valid, idx


@triton.jit
def kth_largest(key, k):
    """The k-th largest of the uint32 keys (repeats counted): its 32 bits decided from the top, a bit
    kept when at least k keys are >= the prefix with it set. One count over the keys per bit."""
    t = tl.full([], 0, tl.uint32)
    one = tl.full([], 1, tl.uint32)
    for i in range(32):
        trial = t | (one << (31 - i))
        t = tl.where(tl.sum((key >= trial).to(tl.int32)) >= k, trial, t)
    return t


@triton.jit
def kth_largest_small(key, k):
    """kth_largest for at most 255 keys, two bits per step: the counts at or above the three
    prefixes with the next two bits set to 01, 10, 11 are summed together in one int32 (8 bits
    each), so 16 sums over the keys instead of 32."""
    t = tl.full([], 0, tl.uint32)
    one = tl.full([], 1, tl.uint32)
    for i in range(16):
        shift = 30 - 2 * i
        at_least = tl.sum(
            (key >= (t | (one << shift))).to(tl.int32)
            + ((key >= (t | ((one * 2) << shift))).to(tl.int32) << 8)
            + ((key >= (t | ((one * 3) << shift))).to(tl.int32) << 16)
        )
        digit = ((at_least & 255) >= k).to(tl.uint32) + (((at_least >> 8) & 255) >= k) + ((at_least >> 16) >= k)
        t = t | (digit << shift)  # the counts fall as the digit grows: the digit is how many reach k
    return t


@triton.jit
def kth_largest_reread(
    src_row,
    start,
    n,
    k,
    tie,
    BY_INDEX: tl.constexpr,
    FIRST: tl.constexpr,
    EVEN: tl.constexpr,
    GROUPS: tl.constexpr,
    ROWS: tl.constexpr,
    TILE: tl.constexpr,
):
    """kth_largest over the chunk at start, read again TILE rows at a time (few registers: the exact
    path only). The keys: the elements' radix keys; or, BY_INDEX, ~index of the elements whose key is
    tie (the largest is the lowest index), 0 for the others."""
    t = tl.full([], 0, tl.uint32)
    one = tl.full([], 1, tl.uint32)
    for i in range(32):
        trial = t | (one << (31 - i))
        at_least = tl.zeros([], tl.int32)
        for r in range(0, ROWS, TILE):
            pos = start + tl.arange(0, GROUPS)[:, None] + (r + tl.arange(0, TILE))[None, :] * GROUPS
            x, valid, idx = load_elements(src_row, pos, n, FIRST, EVEN)
            key = tl.where(valid, radix_key(x), 0)
            if BY_INDEX:
                key = tl.where(key == tie, (~idx).to(tl.uint32, bitcast=True), 0)
            at_least += tl.sum((key >= trial).to(tl.int32))
        t = tl.where(at_least >= k, trial, t)
    return t


@triton.jit
def select(
    x,
    valid,
    idx,
    k,
    src_row,
    start,
    n,
    FIRST: tl.constexpr,
    EVEN: tl.constexpr,
    GROUPS: tl.constexpr,
    ROWS: tl.constexpr,
    SLOTS: tl.constexpr,
):
    """A mask of at most SLOTS elements of the chunk x [GROUPS, ROWS] (float32; valid: which are
    elements, idx: their indices) that holds its k largest, ties taken by lowest index."""
    maxima = tl.max(tl.where(valid, x, float("-inf")), axis=1)  # group g: elements g, g + GROUPS, ...
    if GROUPS <= 128:  # >= k maxima, so >= k elements, have a key >= t
        t = kth_largest_small(radix_key(maxima), k)
    else:
        t = kth_largest(radix_key(maxima), k)
    keep = valid & ~(x < key_value(t))  # x >= t as floats, or NaN: every key >= t (and -0.0 at t = +0.0)
    if tl.sum(keep.to(tl.int32)) > SLOTS:  # too many (ties at t, or an adversarial order): exact
        above = tl.sum((valid & (radix_key(x) > t)).to(tl.int32))
        if above >= k:  # else t is the k-th largest key already
            t = kth_largest_reread(src_row, start, n, k, t, False, FIRST, EVEN, GROUPS, ROWS, min(8, ROWS))
            above = tl.sum((valid & (radix_key(x) > t)).to(tl.int32))
        # of the elements whose key is t, the k - above with the lowest indices
        lowest = kth_largest_reread(src_row, start, n, k - above, t, True, FIRST, EVEN, GROUPS, ROWS, min(8, ROWS))
        key = tl.where(valid, radix_key(x), 0)
        keep = (key > t) | ((key == t) & valid & ((~idx).to(tl.uint32, bitcast=True) >= lowest))
    return keep


# --8<-- [end:select]


# --8<-- [start:kernel]
@triton.jit(do_not_specialize=["src_row_stride"])  # unaligned rows: scalar loads, the stores' layout
def topk_level_kernel(
    src_ptr,  # the first launch: the logits [batch, n] (any float type); later: the survivors (int64)
    src_row_stride,
    n,  # elements per row at this launch
    k,
    dst_ptr,  # the survivors [batch, chunks * SLOTS] (int64); the last launch: the values [batch, k]
    dst_idx_ptr,  # the last launch: the indices [batch, k] (int64)
    scratch_ptr,  # the last launch: [batch, SLOTS] (int64), where its survivors meet to be ranked
    FIRST: tl.constexpr,
    LAST: tl.constexpr,
    EVEN: tl.constexpr,  # n is a multiple of the chunk: no element to mask
    ROWS: tl.constexpr,
    GROUPS: tl.constexpr,  # the chunk is GROUPS x ROWS elements: GROUPS >= 2k strided groups
    SLOTS: tl.constexpr,
    BLOCK_J: tl.constexpr,  # the last launch compares its SLOTS keys with BLOCK_J others at a time
):
    chunk = tl.program_id(0)
    row = tl.program_id(1).to(tl.int64)
    # The chunk as [GROUPS, ROWS], element (g, r) at r * GROUPS + g: the loads and the scatter stores
    # below get one layout (consecutive lanes on consecutive addresses, one element each). With 4 warps
    # under Triton 3.6 each thread then holds whole groups and the chunk skips shared memory; with 16
    # warps a group spans four warps and its maximum goes through shared memory.
    pos = chunk * (ROWS * GROUPS) + tl.arange(0, GROUPS)[:, None] + tl.arange(0, ROWS)[None, :] * GROUPS
    src_row = src_ptr + row * src_row_stride
    x, valid, idx = load_elements(src_row, pos, n, FIRST, EVEN)
    keep = select(x, valid, idx, k, src_row, chunk * (ROWS * GROUPS), n, FIRST, EVEN, GROUPS, ROWS, SLOTS)
    group_total = tl.sum(keep.to(tl.int32), axis=1)
    count = tl.sum(group_total, axis=0)
    before = tl.cumsum(group_total, axis=0) - group_total  # survivors in the groups before
    slot = tl.cumsum(keep.to(tl.int32), axis=1) + before[:, None] - 1  # a slot each, group after group
    s = tl.arange(0, SLOTS)
    if not LAST:  # the survivors, then index -1 in the slots left
        bits = x.to(tl.int32, bitcast=True).to(tl.int64)
        survivor = (bits << 32) | idx.to(tl.uint32, bitcast=True).to(tl.int64)
        base = row * (tl.num_programs(0) * SLOTS) + chunk * SLOTS
        tl.store(dst_ptr + base + slot, survivor, mask=keep)
        tl.store(dst_ptr + base + s, tl.full([SLOTS], -1, tl.int64), mask=s >= count)
    else:  # one program per row: the survivors meet in scratch as 64-bit keys; each one's rank is its place
        key64 = (radix_key(x).to(tl.uint64) << 32) | (0x7FFFFFFF - idx).to(tl.uint64)  # ties: lower index first
        base = row * SLOTS
        tl.store(scratch_ptr + base + slot, key64.to(tl.int64, bitcast=True), mask=keep)
        tl.debug_barrier()  # every thread's stores above are visible to every thread of the program
        mine = tl.load(scratch_ptr + base + s, mask=s < count, other=0).to(tl.uint64, bitcast=True)
        rank = tl.zeros([SLOTS], tl.int32)  # how many survivors are larger: all distinct, so 0 to count - 1
        for j in tl.range(0, count, BLOCK_J):  # the survivors only
            js = j + tl.arange(0, BLOCK_J)
            others = tl.load(scratch_ptr + base + js, mask=js < count, other=0).to(tl.uint64, bitcast=True)
            rank += tl.sum((others[None, :] > mine[:, None]).to(tl.int32), axis=1)  # a 0 is larger than nothing
        write = (s < count) & (rank < k)
        out = row * k + rank
        tl.store(dst_ptr + out, key_value((mine >> 32).to(tl.uint32)).to(dst_ptr.dtype.element_ty), mask=write)
        tl.store(dst_idx_ptr + out, (0x7FFFFFFF - (mine & 0x7FFFFFFF).to(tl.int32)).to(tl.int64), mask=write)


# --8<-- [end:kernel]


# --8<-- [start:launch]
# Read once, not per call (as module 11's grouped GEMM does): the SMs a first launch should fill.
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4


def plan(batch: int, n_cols: int, k: int, chunk: int | None = None, last_max: int = FINAL_MAX) -> list[dict]:
    """The launches for a [batch, n_cols] input and this k: each one's chunk, groups, slots and warps.
    The first cuts each row into chunks of 8,192 elements while chunks of 4,096 would give fewer than
    4 programs per SM, or whenever there are 128 groups (33 <= k <= 64), else 4,096; at least 4 x slots;
    or chunk, if given. Chunks of 4,096, and of 8,192 in 128 groups, get 4 warps (with 128 groups each
    thread then holds whole groups, and their maxima need no shared memory); other chunks 16 (race.py
    times the chunks the plan does not pick). Each next launch reads the survivors as its row, until
    one program can hold a whole row (last_max elements): that one is last, with a warp per 512
    elements (4 to 16)."""
    kp = triton.next_power_of_2(k)
    groups = max(16, 2 * kp)  # >= 2k groups: about 1.25k survivors per chunk on random data
    slots = groups  # room in each chunk's output
    last_slots = max(slots, min(4 * kp, 2048))  # the last launch's filter sees fewer, larger groups
    if chunk is None:
        chunk = 8192 if batch * triton.cdiv(n_cols, 4096) < 4 * NUM_SMS or groups == 128 else 4096
        chunk = max(chunk, 4 * slots)
    if chunk & (chunk - 1) or chunk < 2 * slots:
        raise ValueError(f"chunk must be a power of two >= {2 * slots} for k = {k}")
    if last_max & (last_max - 1) or last_max < 4 * slots:
        raise ValueError(f"last_max must be a power of two >= {4 * slots} for k = {k}")
    levels, n = [], n_cols
    while max(groups, triton.next_power_of_2(n)) > (last_max if levels else chunk):
        size = last_max if levels else chunk
        whole_groups = size <= 4096 or (size == 8192 and groups == 128)  # with 128 groups: whole ones per thread
        levels.append({"chunk": size, "groups": groups, "slots": slots, "warps": 4 if whole_groups else 16})
        n = triton.cdiv(n, size) * slots
    size = max(groups, triton.next_power_of_2(n))
    levels.append({"chunk": size, "groups": groups, "slots": last_slots, "warps": min(16, max(4, size // 512))})
    return levels


def topk(
    logits: torch.Tensor, k: int, chunk: int | None = None, last_max: int = FINAL_MAX, launches: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the k largest of each row of logits [batch, n], largest first, as
    torch.topk(logits, k) returns them up to the order of ties. launches: make only the first few
    launches (to time them alone; what is returned is then not filled in)."""
    if logits.dim() != 2:
        raise ValueError("logits must be [batch, n]")
    batch, n_cols = logits.shape
    if not 1 <= k <= min(n_cols, MAX_K):
        raise ValueError(f"k must be between 1 and min(n, {MAX_K}); got k = {k}, n = {n_cols}")
    x = logits if logits.stride(1) == 1 else logits.contiguous()
    dev = x.device
    values = torch.empty(batch, k, dtype=x.dtype, device=dev)
    indices = torch.empty(batch, k, dtype=torch.int64, device=dev)
    src, n, stride = x, n_cols, x.stride(0)
    levels = plan(batch, n_cols, k, chunk, last_max)
    for i, lv in enumerate(levels[:launches]):
        chunks, last = triton.cdiv(n, lv["chunk"]), i == len(levels) - 1
        if last:
            dst, dst_idx = values, indices
            scratch = torch.empty(batch, lv["slots"], dtype=torch.int64, device=dev)
        else:
            dst = dst_idx = scratch = torch.empty(batch, chunks * lv["slots"], dtype=torch.int64, device=dev)
        topk_level_kernel[(chunks, batch)](
            src,
            stride,
            n,
            k,
            dst,
            dst_idx,
            scratch,
            FIRST=i == 0,
            LAST=last,
            EVEN=n % lv["chunk"] == 0,
            ROWS=lv["chunk"] // lv["groups"],
            GROUPS=lv["groups"],
            SLOTS=lv["slots"],
            BLOCK_J=min(lv["slots"], 8192 // lv["slots"]),
            num_warps=lv["warps"],
        )
        src, n = dst, chunks * lv["slots"]
        stride = n
    return values, indices


# --8<-- [end:launch]


if __name__ == "__main__":
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    for batch, n, k in ((1, 262144, 50), (256, 262144, 50), (1, 262144, 1024)):
        print(f"plan for [{batch}, {n}], k = {k}:")
        for level in plan(batch, n, k):
            print(f"  {level}")
    x = torch.randn(2, 3000, device=dev)
    x[1, ::7] = float("nan")
    values, indices = topk(x, 50)
    ref_values, ref_indices = torch.topk(x, 50)
    same = torch.equal(values.nan_to_num(), ref_values.nan_to_num()) and torch.equal(indices[0], ref_indices[0])
    print(f"topk of [2, 3000] (a row with NaN), k = 50: the same values as torch.topk: {same}")
