"""The block logic of PyTorch's CUDA caching allocator in plain Python: sizes and addresses only, no
device. Module 08's snippets run it as their CPU stand-in and store its predictions beside what the
GPU measured, so that a page can show the rules and the measurement agreeing (or not).

What it models, for one device and any number of streams: rounding (round_size), the small and large
pools, segment sizes (get_allocation_size), best-fit reuse on the same stream, splitting and its
limits (should_split), merging on free, the limit of set_per_process_memory_fraction, the retry that
empties the cache before giving up, record_stream's delayed free, and expandable segments (pages
mapped and unmapped inside one growing range). What it leaves out: max_split_size_mb,
roundup_power2_divisions, garbage_collection_threshold, CUDA-graph pools, and expandable segments'
preference for blocks that can grow. The names follow DeviceCachingAllocator in
c10/cuda/CUDACachingAllocator.cpp."""

KiB, MiB, GiB = 2**10, 2**20, 2**30

# --8<-- [start:constants]
# torch 2.11: c10/core/AllocatorConfig.h, namespace c10::CachingAllocator (earlier releases had them at
# the top of c10/cuda/CUDACachingAllocator.cpp, with the same values and comments).
# kLargeBuffer, "large" allocations may be packed in 20 MiB blocks: in torch 2.11 the default of
# AcceleratorAllocatorConfig::large_segment_size_ (c10/core/AllocatorConfig.h), which the
# PYTORCH_ALLOC_CONF key large_segment_size_mb changes; expandable segments map the large pool in
# pages of this size and the small pool in pages of kSmallBuffer.
# --8<-- [start:sizes]
K_MIN_BLOCK_SIZE = 512  # every request is rounded up to a multiple of this
K_SMALL_SIZE = 1048576  # the largest "small" request: 1 MiB
K_SMALL_BUFFER = 2097152  # a small-pool segment: 2 MiB
K_MIN_LARGE_ALLOC = 10485760  # from 1 to 10 MiB: share 20 MiB segments
K_ROUND_LARGE = 2097152  # from 10 MiB, a new segment: the request rounded up to this
K_LARGE_BUFFER = 20971520  # the shared large-pool segment: 20 MiB
# --8<-- [end:sizes]
CONSTANTS = {
    "kMinBlockSize": K_MIN_BLOCK_SIZE,
    "kSmallSize": K_SMALL_SIZE,
    "kSmallBuffer": K_SMALL_BUFFER,
    "kMinLargeAlloc": K_MIN_LARGE_ALLOC,
    "kRoundLarge": K_ROUND_LARGE,
    "kLargeBuffer": K_LARGE_BUFFER,
}
# --8<-- [end:constants]


# --8<-- [start:rules]
# --8<-- [start:placement]
def round_size(nbytes: int) -> int:
    """The block a request gets: a multiple of 512 bytes."""
    return max(
        K_MIN_BLOCK_SIZE,
        -(-nbytes // K_MIN_BLOCK_SIZE) * K_MIN_BLOCK_SIZE,
    )


def pool_of(size: int) -> str:
    """Up to 1 MiB a block lives in the small pool, above in the large."""
    return "small" if size <= K_SMALL_SIZE else "large"


# --8<-- [start:segments]
def allocation_size(size: int) -> int:
    """What one cudaMalloc asks for when no cached block fits: a segment."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return -(-size // K_ROUND_LARGE) * K_ROUND_LARGE


def should_split(pool: str, remaining: int, expandable: bool = False) -> bool:
    """Is the rest of a block, past the request, cut off as a free block?"""
    if pool == "small" or expandable:
        return remaining >= K_MIN_BLOCK_SIZE
    return remaining > K_SMALL_SIZE  # large: keeps up to 1 MiB as slack


# --8<-- [end:segments]
# --8<-- [end:placement]
def format_size(nbytes: int) -> str:
    """The allocator's format_size, as its out-of-memory message prints sizes."""
    if nbytes <= KiB:
        return f"{nbytes} bytes"
    if nbytes <= MiB:
        return f"{nbytes / KiB:.2f} KiB"
    if nbytes <= GiB:
        return f"{nbytes / MiB:.2f} MiB"
    return f"{nbytes / GiB:.2f} GiB"


# --8<-- [end:rules]


# --8<-- [start:stats]
MEMORY_STATS = {  # torch.cuda.memory_stats() key: the name Model.state() gives the same number
    "allocated_bytes.all.current": "allocated_bytes",
    "reserved_bytes.all.current": "reserved_bytes",
    "inactive_split_bytes.all.current": "inactive_split_bytes",  # free, inside segments that hold live blocks
    "segment.all.current": "segments",  # cudaMalloc'd segments (mapped pages of expandable segments are not)
    "reserved_bytes.all.peak": "peak_reserved_bytes",
    "num_alloc_retries": "num_alloc_retries",  # cudaMalloc failed (or the limit was hit): cache emptied, retried
    "num_ooms": "num_ooms",
    "num_device_alloc": "num_device_alloc",  # cudaMalloc or cuMemMap calls
    "num_device_free": "num_device_free",  # cudaFree or cuMemUnmap calls
    "num_sync_all_streams": "num_sync_all_streams",  # waits on every event record_stream left (empty_cache)
}


def from_memory_stats(stats: dict, segments: list | None = None) -> dict:
    """Model.state()'s numbers from torch.cuda.memory_stats() (and the largest free block from
    torch.cuda.memory_snapshot()'s segments, when given)."""
    state = {name: stats.get(key, 0) for key, name in MEMORY_STATS.items()}
    if segments is not None:
        free = [b["size"] for s in segments for b in s["blocks"] if b["state"] == "inactive"]
        state["largest_free_bytes"] = max(free, default=0)
    return state


# --8<-- [end:stats]


class Block:
    __slots__ = ("addr", "size", "state", "segment", "stream", "uses")

    def __init__(self, addr, size, state, segment, stream):
        self.addr, self.size, self.state, self.segment, self.stream = addr, size, state, segment, stream
        self.uses = set()  # streams recorded with record_stream; after free(), its outstanding events


class Segment:
    __slots__ = ("pool", "stream", "expandable", "base", "blocks")

    def __init__(self, pool, stream, expandable, base):
        self.pool, self.stream, self.expandable, self.base = pool, stream, expandable, base
        self.blocks = []  # by address; states: allocated, free, pending (freed, events outstanding), unmapped


class Model:
    """One device's caching allocator as sizes and addresses: malloc, free, record_stream, synchronize,
    empty_cache and state() (the memory_stats the snippets read). ``limit`` is the byte allowance of
    set_per_process_memory_fraction; ``expandable`` is PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."""

    oom_error = MemoryError
    ADDRESS_SPACE = 2**40  # an expandable segment's virtual range: far more than it ever maps

    def __init__(self, limit: int | None = None, expandable: bool = False):
        self.limit, self.expandable = limit, expandable
        self.segments, self.top, self.peak_reserved, self.trace = [], 0, 0, []
        self.counts = dict.fromkeys(("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"), 0)
        self.counts["num_sync_all_streams"] = 0

    def malloc(self, nbytes: int, stream: int = 0) -> Block:
        self._process_events()
        size = round_size(nbytes)
        pool = pool_of(size)
        block = self._best_fit(pool, stream, size) or self._new_block(pool, stream, size)
        if block is None:  # free every cached segment that holds no live block, then try once more
            self.empty_cache()
            self.counts["num_alloc_retries"] += 1
            block = self._new_block(pool, stream, size)
        if block is None:
            self.counts["num_ooms"] += 1
            self.trace.append(("oom", None, size))
            raise MemoryError(self.oom_message(size))
        if should_split(pool, block.size - size, block.segment.expandable):
            rest = Block(block.addr + size, block.size - size, "free", block.segment, stream)
            block.segment.blocks.insert(block.segment.blocks.index(block) + 1, rest)
            block.size = size
        block.state = "allocated"
        self.trace.append(("alloc", block.addr, nbytes))  # the history records the size requested
        return block

    def free(self, block: Block) -> None:
        if block.uses:  # used on other streams: an event on each, the block waits until they complete
            block.state = "pending"
        else:
            self._free_block(block)

    def record_stream(self, block: Block, stream: int) -> None:
        if stream != block.stream:
            block.uses.add(stream)

    def synchronize(self) -> None:
        """The device drained: every recorded event has completed (the blocks return at the next malloc)."""
        for block in self._blocks("pending"):
            block.uses.clear()

    def empty_cache(self) -> None:
        self.synchronize()  # synchronize_and_free_events
        self.counts["num_sync_all_streams"] += 1
        self._process_events()
        for segment in list(self.segments):
            if segment.expandable:
                for block in self._blocks("free", segment):
                    self._unmap(block)
                if all(b.state == "unmapped" for b in segment.blocks):
                    self.segments.remove(segment)
            elif len(segment.blocks) == 1 and segment.blocks[0].state == "free":
                self.segments.remove(segment)
                self.counts["num_device_free"] += 1
                self.trace.append(("segment_free", segment.base, segment.blocks[0].size))

    def reserved(self) -> int:
        return sum(b.size for s in self.segments for b in s.blocks if b.state != "unmapped")

    def state(self) -> dict:
        """The numbers memory_stats and memory_snapshot give for the same state."""
        blocks = [b for s in self.segments for b in s.blocks]
        split = [b for s in self.segments if not s.expandable and len(s.blocks) > 1 for b in s.blocks]
        return {
            "allocated_bytes": sum(b.size for b in blocks if b.state == "allocated"),
            "reserved_bytes": self.reserved(),
            "inactive_split_bytes": sum(b.size for b in split if b.state == "free"),
            "segments": sum(not s.expandable for s in self.segments),  # mapped pages are not segments
            "largest_free_bytes": max((b.size for b in blocks if b.state == "free"), default=0),
            "peak_reserved_bytes": self.peak_reserved,
            **self.counts,
        }

    def actions(self) -> dict:
        """How many of each action the history holds (as _record_memory_history's trace names them)."""
        counted = {}
        for action, _, _ in self.trace:
            counted[action] = counted.get(action, 0) + 1
        return counted

    def oom_message(self, size: int) -> str:
        s = self.state()
        return (
            f"(model) CUDA out of memory. Tried to allocate {format_size(allocation_size(size))}. "
            + (f"{format_size(self.limit)} allowed; " if self.limit is not None else "")
            + f"Of the allocated memory {format_size(s['allocated_bytes'])} is allocated by PyTorch, and "
            f"{format_size(s['reserved_bytes'] - s['allocated_bytes'])} is reserved by PyTorch but unallocated."
        )

    # -- the allocator's internals
    def _blocks(self, state, segment=None):
        return [b for s in ([segment] if segment else self.segments) for b in s.blocks if b.state == state]

    def _best_fit(self, pool, stream, size):
        fits = [b for s in self.segments if (s.pool, s.stream) == (pool, stream) for b in s.blocks]
        fits = [b for b in fits if b.state == "free" and b.size >= size]
        return min(fits, key=lambda b: (b.size, b.addr), default=None)

    def _process_events(self):
        for block in self._blocks("pending"):
            if not block.uses:
                self._free_block(block)

    def _grew(self):
        self.peak_reserved = max(self.peak_reserved, self.reserved())

    def _new_block(self, pool, stream, size):
        """alloc_block: a new segment (cudaMalloc), or pages mapped into the expandable one."""
        if self.limit is not None and self.reserved() + allocation_size(size) > self.limit:
            return None  # the fraction is checked first, against what a cudaMalloc would ask for
        if self.expandable:
            return self._map_for(pool, stream, size)
        segment = Segment(pool, stream, False, self.top)
        segment.blocks.append(Block(self.top, allocation_size(size), "free", segment, stream))
        self.top += allocation_size(size)
        self.segments.append(segment)
        self.counts["num_device_alloc"] += 1
        self.trace.append(("segment_alloc", segment.base, allocation_size(size)))
        self._grew()
        return segment.blocks[0]

    def _free_block(self, block):
        self.trace.append(("free_completed", block.addr, block.size))
        block.state = "free"
        self._merge(block)

    def _merge(self, block):
        """A free (or unmapped) block absorbs neighbours in the same state; returns the merged block."""
        blocks = block.segment.blocks
        i = blocks.index(block)
        if i + 1 < len(blocks) and blocks[i + 1].state == block.state:
            block.size += blocks.pop(i + 1).size
        if i > 0 and blocks[i - 1].state == block.state:
            blocks[i - 1].size += blocks.pop(i).size
            return blocks[i - 1]
        return block

    def _page(self, segment):
        return K_SMALL_BUFFER if segment.pool == "small" else K_LARGE_BUFFER

    def _map_for(self, pool, stream, size):
        """find_expandable_block, then map_block until one free block holds size bytes."""
        segment = next((s for s in self.segments if s.expandable and (s.pool, s.stream) == (pool, stream)), None)
        if segment is None:
            segment = Segment(pool, stream, True, self.top)
            segment.blocks.append(Block(self.top, self.ADDRESS_SPACE, "unmapped", segment, stream))
            self.top += self.ADDRESS_SPACE
            self.segments.append(segment)
        blocks = segment.blocks
        for i, b in enumerate(blocks):  # the lowest unmapped range that, with a free block before it, fits
            if b.state != "unmapped":
                continue
            start = i - 1 if i > 0 and blocks[i - 1].state == "free" else i
            reach = 0
            for c in blocks[start:]:
                if c.state not in ("free", "unmapped") or reach >= size:
                    break
                reach += c.size
            if reach >= size:
                break
        addr = blocks[start].addr
        while True:
            candidate = next(b for b in blocks if b.addr == addr)
            if candidate.state == "free" and candidate.size >= size:
                return candidate
            target = candidate if candidate.state == "unmapped" else blocks[blocks.index(candidate) + 1]
            have = candidate.size if candidate.state == "free" else 0
            self._map(target, min(size - have, target.size))

    def _map(self, block, nbytes):
        """Map whole pages from the block's start (page-aligned) to cover nbytes."""
        page = self._page(block.segment)
        mapped = min(-(-nbytes // page) * page, block.size)
        if mapped < block.size:
            rest = Block(block.addr + mapped, block.size - mapped, "unmapped", block.segment, block.stream)
            block.segment.blocks.insert(block.segment.blocks.index(block) + 1, rest)
            block.size = mapped
        block.state = "free"
        self.counts["num_device_alloc"] += 1
        self.trace.append(("segment_map", block.addr, mapped))
        self._merge(block)
        self._grew()

    def _unmap(self, block):
        """Unmap the whole pages strictly inside a free block (release_blocks on an expandable segment)."""
        page, base = self._page(block.segment), block.segment.base
        lo = base + -(-(block.addr - base) // page) * page
        hi = base + (block.addr + block.size - base) // page * page
        if hi <= lo:
            return
        blocks = block.segment.blocks
        i = blocks.index(block)
        pieces = [(block.addr, lo - block.addr, "free"), (lo, hi - lo, "unmapped")]
        pieces.append((hi, block.addr + block.size - hi, "free"))
        new = [Block(a, n, s, block.segment, block.stream) for a, n, s in pieces if n > 0]
        blocks[i : i + 1] = new
        self.counts["num_device_free"] += 1
        self.trace.append(("segment_unmap", lo, hi - lo))
        self._merge(next(b for b in new if b.state == "unmapped"))


if __name__ == "__main__":
    print(f"{'request':>12} {'pool':>6} {'block':>12} {'segment':>12}")
    for n in (1, 4 * KiB, 1 * MiB, 1 * MiB + 1, 4 * MiB, 10 * MiB - 1, 10 * MiB, 33 * MiB + 5):
        size = round_size(n)
        print(f"{n:>12} {pool_of(size):>6} {size:>12} {allocation_size(size):>12}")
