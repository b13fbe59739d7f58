"""The course's Triton top-k: the k largest values of each row of a [batch, n] tensor of logits and
their indices, largest first, exact. Made for what torch.topk does slowly: few rows, long ones (batch
1 to 256, a vocabulary of 32k to 256k, k from 1 to 1,024; float32, bfloat16 or float16).

The algorithm: filter, then rank what is left. A row is cut into chunks (at batch 1 a 256k row is 32
programs of one chunk each: one program reading 1 MiB alone could not meet the batch-1 bar). A program
holds its chunk in registers as GROUPS x ROWS (GROUPS >= 2k strided groups: element i is in group
i % GROUPS) and takes each group's maximum. At least k elements are >= the k-th largest maximum, t, so
the chunk's top k are all >= t: the elements >= t are a superset of it (about 1.25k of them on random
data: 60 of 4,096 for k = 50). Each gets a slot from a running count and is written, as its value's
float32 bits above its index, to SLOTS slots (index -1 in the slots left). The next launch reads those
slots as a shorter row and filters them the same way; the last one holds its whole row in one program,
gathers its survivors in a small buffer as 64-bit keys (the value's radix key above 2^31 - 1 - index),
ranks them (for each, how many survivors are larger; for k > 64, a bitonic sort of the keys, tl.sort)
and writes the first k at their ranks. At V = 256k and k <= 64 that is two launches.

At large batches a program of the first launch takes up to 16 chunks of its row in turn, with a
running threshold: the first chunk's t holds for the row (k of its elements are >= t, and each has a
lower index than any later element equal to t), so each later chunk keeps only its elements > t, and
needs no threshold of its own unless more than SLOTS pass (then it finds one as above and the running
threshold rises). The threshold search is then paid once in up to 16 chunks.

t is found among the GROUPS maxima as uint32 radix keys (torch's own map of floats to keys,
TopKTypeConfig<float>::convert in SortingRadixSelect.cuh), two bits per step: three counts per step,
packed 8 bits each into one int32 sum, 16 sums in all; then the chunk is compared with t as floats.
Where more than SLOTS elements pass (many ties at t, or the large values gathered in fewer than k of
the strided groups), the program finds the chunk's exact k-th key instead (unless fewer than k keys
lie above t: then t is it) by deciding its 32 bits one count at a time, reading its chunk again, a
few rows at a time, so that this rare path costs registers only while it runs; and it takes, of the
keys equal to it, those with the lowest indices: in the first launch by counting the ties before each
in index order (one more read of the chunk, a few rows at a time), in later ones (the survivors are
not in index order) by a search of their indices, rereading the chunk. It then keeps exactly k.

Against the alternatives:
- radix select (torch.topk's multi-block path at these shapes, mbtopk in TensorTopK.cu): exact in
  four passes of 8 bits over the row for float32, but the blocks of a row must agree on each digit
  before the next pass, so each pass is several launches (launches.py counts them all).
- bitonic (tl.sort, tl.topk on every chunk): about 27 compare-and-swap rounds over every element for
  k = 64, most of them across threads or warps: at batch 256 (67 M elements) far more work than
  reading them. Here only the last launch's survivors are ever sorted, and only for k > 64.
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
launch's input, which an autotuner timing one kernel cannot weigh; race.py times other chunk sizes
and chunks per program beside the plan's.
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
def last_tie(
    src_row,
    start,
    n,
    m,
    tie,
    EVEN: tl.constexpr,
    GROUPS: tl.constexpr,
    ROWS: tl.constexpr,
    TILE: tl.constexpr,
):
    """The index of the m-th, in index order, of the chunk's logits whose key is tie: the chunk read
    again TILE rows at a time (few registers, as kth_largest_reread). Element (g, r) of the first
    launch's chunk has index start + r * GROUPS + g, so the ties before an element are those of the
    tiles before, of the rows before in its tile, and of the groups above in its row."""
    seen = tl.zeros([], tl.int32)
    last = tl.full([], -1, tl.int32)
    for r in range(0, ROWS, TILE):
        pos = start + tl.arange(0, GROUPS)[:, None] + (r + tl.arange(0, TILE))[None, :] * GROUPS
        x, valid, idx = load_elements(src_row, pos, n, True, EVEN)
        is_tie = (valid & (radix_key(x) == tie)).to(tl.int32)
        per_row = tl.sum(is_tie, axis=0)
        before = seen + (tl.cumsum(per_row, axis=0) - per_row)[None, :] + tl.cumsum(is_tie, axis=0) - is_tie
        last = tl.maximum(last, tl.max(tl.where((is_tie > 0) & (before < m), idx, -1)))
        seen += tl.sum(per_row)
    return last


@triton.jit
def select(
    x,
    valid,
    idx,
    k,
    src_row,
    start,
    n,
    floor,
    FIRST: tl.constexpr,
    EVEN: tl.constexpr,
    GROUPS: tl.constexpr,
    ROWS: tl.constexpr,
    SLOTS: tl.constexpr,
    RUNNING: tl.constexpr,
):
    """(keep, floor): a mask of at most SLOTS elements of the chunk x [GROUPS, ROWS] (float32; valid:
    which are elements, idx: their indices) that holds its k largest, ties taken by lowest index, of
    those whose key is >= floor (a threshold from the program's earlier chunks; 0: none); and the
    threshold for the chunks after it. That is t + 1, where t is the key it kept at or above, if k of
    the chunk's elements have a key >= t: an element of a later chunk that ties at t has a higher
    index than each of them, so it cannot make the top k (a row masked to -inf but for a few logits
    then pays the exact path once, not in every chunk). Else (t is the floor) it is t. RUNNING: there
    are chunks after it (else the threshold is not raised)."""
    maxima = tl.max(tl.where(valid, x, float("-inf")), axis=1)  # group g: elements g, g + GROUPS, ...
    if GROUPS <= 128:  # >= k maxima, so >= k elements, have a key >= t
        own = kth_largest_small(radix_key(maxima), k)
    else:
        own = kth_largest(radix_key(maxima), k)
    t = tl.maximum(own, floor)  # both thresholds hold: the higher one
    # k of the chunk's elements have a key >= t when t is its own (a group past the row's end has the
    # maximum -inf too, but no chunk of the row follows one with such groups)
    reached = own >= floor
    keep = valid & ~(x < key_value(t))  # x >= t as floats, or NaN: every key >= t (and -0.0 at t = +0.0)
    if tl.sum(keep.to(tl.int32)) > SLOTS:  # too many (ties at t, or an adversarial order): exact
        above = tl.sum((valid & (radix_key(x) > t)).to(tl.int32))
        if above >= k:  # else t is the k-th largest key already
            t = kth_largest_reread(src_row, start, n, k, t, False, FIRST, EVEN, GROUPS, ROWS, min(8, ROWS))
            above = tl.sum((valid & (radix_key(x) > t)).to(tl.int32))
            reached = tl.full([], True, tl.int1)  # t is the chunk's own k-th largest key
        key = tl.where(valid, radix_key(x), 0)
        # of the elements whose key is t, the k - above with the lowest indices
        if FIRST:  # the logits, in index order
            last = last_tie(src_row, start, n, k - above, t, EVEN, GROUPS, ROWS, max(1, min(ROWS, 1024 // GROUPS)))
            keep = (key > t) | ((key == t) & valid & (idx <= last))
        else:  # survivors are not in index order: a search of ~index, rereading the chunk
            lowest = kth_largest_reread(src_row, start, n, k - above, t, True, FIRST, EVEN, GROUPS, ROWS, min(8, ROWS))
            keep = (key > t) | ((key == t) & valid & ((~idx).to(tl.uint32, bitcast=True) >= lowest))
    if RUNNING:
        t = tl.where(reached & (t < 0xFF800000), t + 1, t)  # +inf's and NaN's keys stay (t + 1: a NaN)
    return keep, t


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
    EVEN: tl.constexpr,  # n is a multiple of CHUNKS chunks: no element to mask
    ROWS: tl.constexpr,
    GROUPS: tl.constexpr,  # the chunk is GROUPS x ROWS elements: GROUPS >= 2k strided groups
    SLOTS: tl.constexpr,
    CHUNKS: tl.constexpr,  # chunks per program, one after another (1 at the last launch)
    SORT: tl.constexpr,  # the last launch ranks its survivors by sorting them (else by counting)
    BLOCK_J: tl.constexpr,  # counting: the last launch compares its SLOTS keys with BLOCK_J others at a time
):
    row = tl.program_id(1).to(tl.int64)
    src_row = src_ptr + row * src_row_stride
    s = tl.arange(0, SLOTS)
    floor = tl.full([], 0, tl.uint32)  # the running threshold: no float's key is 0
    for c in range(CHUNKS):
        chunk = tl.program_id(0) * CHUNKS + c
        start = chunk * (ROWS * GROUPS)
        # The chunk as [GROUPS, ROWS], element (g, r) at r * GROUPS + g: the loads and the scatter stores
        # below get one layout (consecutive lanes on consecutive addresses, one element each). With 4 warps
        # under Triton 3.6 each thread then holds whole groups and the chunk skips shared memory; with 16
        # warps a group spans four warps and its maximum goes through shared memory.
        pos = start + tl.arange(0, GROUPS)[:, None] + tl.arange(0, ROWS)[None, :] * GROUPS
        x, valid, idx = load_elements(src_row, pos, n, FIRST, EVEN)
        # The chunks before left a threshold: at least k of their elements rank above any element below
        # it, so the row's top k are >= it. Below it, nothing; if few enough pass, no threshold of its own.
        if CHUNKS == 1:  # the chunk alone: its own threshold
            keep, floor = select(x, valid, idx, k, src_row, start, n, floor, FIRST, EVEN, GROUPS, ROWS, SLOTS, False)
        else:
            keep = valid & ~(x < key_value(floor))  # key_value(0) is NaN: every element, at the first chunk
            if tl.sum(keep.to(tl.int32)) > SLOTS:
                keep, floor = select(x, valid, idx, k, src_row, start, n, floor, FIRST, EVEN, GROUPS, ROWS, SLOTS, True)
        group_total = tl.sum(keep.to(tl.int32), axis=1)
        count = tl.sum(group_total, axis=0)
        before = tl.cumsum(group_total, axis=0) - group_total  # survivors in the groups before
        slot = tl.cumsum(keep.to(tl.int32), axis=1) + before[:, None] - 1  # a slot each, group after group
        if not LAST:  # the survivors, then index -1 in the slots left
            bits = x.to(tl.int32, bitcast=True).to(tl.int64)
            survivor = (bits << 32) | idx.to(tl.uint32, bitcast=True).to(tl.int64)
            base = row * (tl.num_programs(0) * CHUNKS * SLOTS) + chunk * SLOTS
            tl.store(dst_ptr + base + slot, survivor, mask=keep)
            tl.store(dst_ptr + base + s, tl.full([SLOTS], -1, tl.int64), mask=s >= count)
        else:  # one program per row: the survivors meet in scratch as 64-bit keys, ranked there
            key64 = (radix_key(x).to(tl.uint64) << 32) | (0x7FFFFFFF - idx).to(tl.uint64)  # ties: lower index first
            base = row * SLOTS
            tl.store(scratch_ptr + base + slot, key64.to(tl.int64, bitcast=True), mask=keep)
            tl.debug_barrier()  # every thread's stores above are visible to every thread of the program
            mine = tl.load(scratch_ptr + base + s, mask=s < count, other=0).to(tl.uint64, bitcast=True)
            if SORT:  # largest first: a key's place is its rank (the empty slots, 0, sort last)
                mine = tl.sort(mine, descending=True)
                rank = s
            else:  # how many survivors are larger: all distinct, so 0 to count - 1
                rank = tl.zeros([SLOTS], tl.int32)
                for j in tl.range(0, count, BLOCK_J):  # the survivors only
                    js = j + tl.arange(0, BLOCK_J)
                    others = tl.load(scratch_ptr + base + js, mask=js < count, other=0).to(tl.uint64, bitcast=True)
                    rank += tl.sum((others[None, :] > mine[:, None]).to(tl.int32), axis=1)  # 0: larger than nothing
            write = (s < count) & (rank < k)
            out = row * k + rank
            tl.store(dst_ptr + out, key_value((mine >> 32).to(tl.uint32)).to(dst_ptr.dtype.element_ty), mask=write)
            tl.store(dst_idx_ptr + out, (0x7FFFFFFF - (mine & 0x7FFFFFFF).to(tl.int32)).to(tl.int64), mask=write)


# --8<-- [end:kernel]


# --8<-- [start:launch]
# Read once, not per call (as module 11's grouped GEMM does): the SMs a first launch should fill.
NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4
PER_PROGRAM_MAX = 16  # the most chunks a first-launch program takes in turn
SORT_FROM = 512  # the last launch sorts its survivors from this many slots on; below, it counts ranks


def plan(
    batch: int, n_cols: int, k: int, chunk: int | None = None, last_max: int = FINAL_MAX, per_program: int | None = None
) -> list[dict]:
    """The launches for a [batch, n_cols] input and this k: each one's chunk, groups, slots, warps,
    chunks per program and way of ranking. "Many" chunks: chunks of 4,096 would fill every SM 4
    times. The first launch's chunk: 8,192 elements for 128 groups (33 <= k <= 64) unless there are
    many, else 4,096; at least 4 x slots, 16 x slots if many (k > 512: 32,768); or chunk, if given.
    Chunks of 4,096, and of 8,192 in 128 groups, get 4 warps (each thread then holds whole groups, and
    their maxima need no shared memory); other chunks 16. If there are many, a program takes up to 16
    chunks of its row in turn (4 for k > 512) while at least a program per two SMs is left; or
    per_program, if given (race.py times some of the choices the plan does not make). Each next
    launch reads the survivors as its row, until one program can hold a whole row (last_max
    elements): that one is last, with a warp per 512 elements (4 to 16), ranking its survivors by
    sorting them from SORT_FROM slots on, else by counting."""
    kp = triton.next_power_of_2(k)
    groups = max(16, 2 * kp)  # >= 2k groups: about 1.25k survivors per chunk on random data
    slots = groups  # room in each chunk's output
    last_slots = max(slots, min(4 * kp, 2048))  # the last launch's filter sees fewer, larger groups
    many = batch * triton.cdiv(n_cols, 4096) >= 4 * NUM_SMS  # chunks of 4,096 would fill every SM 4 times
    if chunk is None:
        chunk = 8192 if groups == 128 and not many else 4096  # with 128 groups: whole groups per thread
        chunk = max(chunk, (16 if many else 4) * slots)  # large k: 1,024 and more groups
    if chunk & (chunk - 1) or chunk < 2 * slots:
        raise ValueError(f"chunk must be a power of two >= {2 * slots} for k = {k}")
    if last_max & (last_max - 1) or last_max < 4 * slots:
        raise ValueError(f"last_max must be a power of two >= {4 * slots} for k = {k}")
    if per_program is None:  # as many chunks per program as leave a program per two SMs
        most = PER_PROGRAM_MAX if groups < 1024 else 4
        per_program = 1
        while many and per_program < most and 2 * batch * triton.cdiv(n_cols, chunk * per_program * 2) >= NUM_SMS:
            per_program *= 2
    if per_program < 1 or per_program & (per_program - 1):
        raise ValueError(f"per_program must be a power of two >= 1; got {per_program}")
    levels, n = [], n_cols
    while max(groups, triton.next_power_of_2(n)) > (last_max if levels else chunk):
        size = last_max if levels else chunk
        whole_groups = size <= 4096 or (size == 8192 and groups == 128)  # with 128 groups: whole ones per thread
        cpp = 1 if levels else min(per_program, triton.next_power_of_2(triton.cdiv(n, size)))
        levels.append({"chunk": size, "groups": groups, "slots": slots, "warps": 4 if whole_groups else 16})
        levels[-1].update({"per_program": cpp, "sort": False})
        n = triton.cdiv(n, size * cpp) * cpp * slots
    size = max(groups, triton.next_power_of_2(n))
    levels.append({"chunk": size, "groups": groups, "slots": last_slots, "warps": min(16, max(4, size // 512))})
    levels[-1].update({"per_program": 1, "sort": last_slots >= SORT_FROM})
    return levels


def topk(
    logits: torch.Tensor,
    k: int,
    chunk: int | None = None,
    last_max: int = FINAL_MAX,
    launches: int | None = None,
    per_program: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the k largest of each row of logits [batch, n], largest first, as
    torch.topk(logits, k) returns them up to the order of ties. chunk, last_max, per_program: as in
    plan. launches: make only the first few launches (to time them alone; what is returned is then
    not filled in)."""
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
    levels = plan(batch, n_cols, k, chunk, last_max, per_program)
    for i, lv in enumerate(levels[:launches]):
        per, last = lv["per_program"], i == len(levels) - 1
        programs = triton.cdiv(n, lv["chunk"] * per)
        chunks = programs * per  # the last program's chunks past the row are empty: all slots -1
        if last:
            dst, dst_idx = values, indices
            scratch = torch.empty(batch, lv["slots"], dtype=torch.int64, device=dev)
        else:
            dst = dst_idx = scratch = torch.empty(batch, chunks * lv["slots"], dtype=torch.int64, device=dev)
        topk_level_kernel[(programs, batch)](
            src,
            stride,
            n,
            k,
            dst,
            dst_idx,
            scratch,
            FIRST=i == 0,
            LAST=last,
            EVEN=n % (lv["chunk"] * per) == 0,
            ROWS=lv["chunk"] // lv["groups"],
            GROUPS=lv["groups"],
            SLOTS=lv["slots"],
            CHUNKS=per,
            SORT=lv["sort"],
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
