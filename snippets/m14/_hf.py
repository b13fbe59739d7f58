"""The peer: Hugging Face transformers' own generation routes, each run as a careful user runs it.

Three routes over the same LlamaForCausalLM (transformers 5.17; its source is what this file follows):
- static batching with the dynamic cache: `generate` on batches of left-padded prompts;
- static batching with the static cache and torch.compile: one StaticCache per batch size, reset between
  batches, every batch left-padded to one length (a choice: the cache would hold shorter prompts too; the
  compiled decode step's shape is set by the batch and max_cache_len, not by the prompt). transformers
  compiles it by itself (`_valid_auto_compile_criteria`: a compileable cache on CUDA; its default
  CompileConfig is mode="reduce-overhead", i.e. CUDA graphs); the prefill stays eager. On the CPU the same
  call runs uncompiled (transformers only auto-compiles on an accelerator);
- continuous batching: `generate_batch` (ContinuousBatchingManager), with an explicit paged cache size, and
  its online form, requests added at their arrival times, per-token timestamps recorded.
Every route is greedy and generates exactly `max_new_tokens` per request: EOS is switched off (the random
model may emit token 2), the same as on our side, so both do the same work.
"""

import time

import torch
from transformers import ContinuousBatchingConfig, GenerationConfig, StaticCache

PAD_TO = 512  # the workload's longest prompt: static-cache batches are all left-padded to it
PAD_ID = 0  # any id: padded positions are masked out
CB_SETTINGS = dict(  # generate_batch: HF's default block size (256), its paged cache sized for the whole
    block_size=256,  # workload (256 requests x ceil(640 / 256) blocks, with room to spare) rather than 90%
    num_blocks=1024,  # of free memory, so that our engine, raced in the same process, keeps its memory
    max_batch_tokens=8192,  # a fixed token budget per step (unset, transformers infers one from free memory)
)


def prepare(hf):
    """Greedy, no EOS, a pad id: the settings every route shares (generate fills unset values from
    hf.generation_config, where LlamaConfig's eos_token_id=2 would otherwise stop a request early)."""
    hf.generation_config.eos_token_id = None
    hf.generation_config.bos_token_id = None
    hf.generation_config.pad_token_id = PAD_ID
    return hf


def generation_config(new_tokens: int, compile: bool = True) -> GenerationConfig:
    return GenerationConfig(
        do_sample=False,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        eos_token_id=None,
        pad_token_id=PAD_ID,
        disable_compile=not compile,
    )


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


# --8<-- [start:static]
def left_pad(prompts: list[list[int]], length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids and attention_mask, every prompt left-padded to `length` (generate derives the
    position ids from the mask, so padding does not move a prompt's positions)."""
    ids = torch.full((len(prompts), length), PAD_ID, dtype=torch.long)
    mask = torch.zeros((len(prompts), length), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, length - len(prompt) :] = torch.tensor(prompt)
        mask[row, length - len(prompt) :] = 1
    return ids.to(device), mask.to(device)


def static_batches(hf, requests, batch_size, cache="dynamic", compile=False, pad_to=PAD_TO, warmup=True) -> dict:
    """generate() over batches of `batch_size` requests, one batch after another (static batching).
    cache="static": one StaticCache per batch shape, reset before each batch, every batch padded to
    `pad_to` (a choice; at batch 256 each batch's longest prompt is 512 anyway); cache="dynamic": each
    batch padded to its own longest prompt (nothing is compiled, so less padding is simply less work).
    Warm-up: the first batch, untimed (with compile=True, that is when the decode step compiles and its
    graphs record)."""
    new_tokens = requests[0]["max_new_tokens"]
    config = generation_config(new_tokens, compile=compile and cache == "static")
    batches = [requests[i : i + batch_size] for i in range(0, len(requests), batch_size)]
    if not hasattr(hf, "static_caches"):  # (batch, length) -> StaticCache: allocated once, then only reset, so
        hf.static_caches = {}  # the compiled step's CUDA graphs keep reading the same addresses across calls
    caches = hf.static_caches

    def run(batch):
        prompts = [r["prompt"] for r in batch]
        length = pad_to if cache == "static" else max(map(len, prompts))
        ids, mask = left_pad(prompts, length, hf.device)
        kwargs = {}
        if cache == "static":
            key = (len(batch), pad_to + new_tokens)
            if key not in caches:
                caches[key] = StaticCache(config=hf.config, max_cache_len=pad_to + new_tokens)
            kwargs["past_key_values"] = caches[key]
            kwargs["past_key_values"].reset()
        out = hf.generate(input_ids=ids, attention_mask=mask, generation_config=config, **kwargs)
        return out[:, length:].tolist()  # the new tokens (to the host: the end of this batch)

    warmup_s = None
    if warmup:
        _sync()
        start = time.perf_counter()
        run(batches[0])
        _sync()
        warmup_s = time.perf_counter() - start
    _sync()
    start = time.perf_counter()
    tokens = {}
    for batch in batches:
        for request, row in zip(batch, run(batch)):
            tokens[request["id"]] = row
    _sync()
    return {
        "tokens": tokens,
        "seconds": time.perf_counter() - start,
        "warmup_s": warmup_s,
        "batches": len(batches),
        "compiled": bool(compile and cache == "static" and hf.device.type == "cuda"),
    }


# --8<-- [end:static]


# --8<-- [start:continuous]
def cb_config(**overrides) -> ContinuousBatchingConfig:
    return ContinuousBatchingConfig(**{**CB_SETTINGS, **overrides})


def continuous(hf, requests, settings=None, warmup=True) -> dict:
    """generate_batch: HF's continuous batching. The manager is kept between calls
    (persistent_manager=True), so the timed call reuses the warm-up's paged cache and CUDA graphs;
    the warm-up is one full untimed run of the same requests."""
    new_tokens = requests[0]["max_new_tokens"]
    config = generation_config(new_tokens)
    cb = cb_config(**(settings or {}))
    prompts = [r["prompt"] for r in requests]

    def run():
        out = hf.generate_batch(
            prompts, generation_config=config, continuous_batching_config=cb, persistent_manager=True
        )
        return [result.generated_tokens for result in out.values()]  # in the order of the inputs

    warmup_s = None
    if warmup:
        start = time.perf_counter()
        run()
        warmup_s = time.perf_counter() - start
    _sync()
    start = time.perf_counter()
    rows = run()
    _sync()
    seconds = time.perf_counter() - start
    return {
        "tokens": {r["id"]: row for r, row in zip(requests, rows)},
        "seconds": seconds,
        "warmup_s": warmup_s,
        "attn_implementation": f"paged|{hf.config._attn_implementation}",
    }


# --8<-- [end:continuous]


def release(hf):
    """Free generate_batch's kept manager (its paged cache and graphs) and the kept static caches."""
    hf.destroy_cached_continuous_batching_manager()
    hf.static_caches = {}
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --8<-- [start:online]
def online(hf, requests, arrivals, settings=None, warmup_requests=None) -> list[dict]:
    """HF's continuous batching manager fed each request at its arrival time (seconds from the start),
    from this thread, while its own thread generates; per-token times from its record_timestamps
    (time.perf_counter when the token reached the host). Returns per request the same fields as our
    Engine.serve: id, tokens, arrival_s, first_token_s, token_s (seconds from the start)."""
    release(hf)  # a manager kept by generate_batch would be returned here instead of a fresh one
    config = generation_config(requests[0]["max_new_tokens"])
    manager = hf.init_continuous_batching(
        generation_config=config, continuous_batching_config=cb_config(**(settings or {}))
    )
    manager.warmup()
    manager.start()
    try:
        for i, r in enumerate(warmup_requests or []):  # untimed: the first steps' allocations and graphs
            manager.add_request(r["prompt"], request_id=f"warm{i}", max_new_tokens=r["max_new_tokens"])
        for _ in warmup_requests or []:
            manager.get_result(timeout=600)
        start = time.perf_counter()
        for r, at in zip(requests, arrivals):
            delay = start + at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            manager.add_request(
                r["prompt"], request_id=str(r["id"]), max_new_tokens=r["max_new_tokens"], record_timestamps=True
            )
        results = {}
        while len(results) < len(requests):
            result = manager.get_result(timeout=600)
            if result is None:
                raise RuntimeError("HF's continuous batching stopped before every request finished")
            if result.is_finished():
                results[result.request_id] = result
    finally:
        manager.stop(block=True, timeout=60)
        manager.destroy()
    out = []
    for r, at in zip(requests, arrivals):
        result = results[str(r["id"])]
        if result.error is not None:
            raise RuntimeError(f"request {r['id']} failed in HF's continuous batching: {result.error}")
        token_s = [t - start for t in result.timestamps]
        out.append(
            {
                "id": r["id"],
                "tokens": result.generated_tokens,
                "arrival_s": at,
                "first_token_s": token_s[0],
                "token_s": token_s,
            }
        )
    return out


# --8<-- [end:online]


if __name__ == "__main__":
    from _model import TINY, hf_model
    from _workload import requests

    hf = prepare(hf_model(TINY, device="cpu", dtype=torch.float32))
    reqs = requests(4, 4, 12, 5, vocab=TINY["vocab_size"])
    out = static_batches(hf, reqs, batch_size=2)
    print(f"static batching, dynamic cache, 4 requests in batches of 2: {out['batches']} batches")
    print(f"tokens: {out['tokens']}")
