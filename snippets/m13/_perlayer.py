"""The module's model (_model.py) with gpt-fast's cache layout: every block owns its keys and values.

_model.py keeps the static KV cache as one stacked buffer, [layers, 2, batch, heads, max_len, head_dim],
and each block writes a view of it (self.kv[i][0]). Here each block registers two buffers of its own,
k and v, [batch, heads, max_len, head_dim], and writes them in place with index_copy_ at pos (a (1,)
int64 tensor on the device), so the tensor written is a buffer of the module, not a view of one.
Everything else (weights, the whole-sequence forward, the mask) is _model.py's: build_perlayer()
returns this model with the same seeded weights as _model.build(), shared with the stacked-cache
model it also returns.
"""

import torch
import torch.nn.functional as F
from _model import CPU, GPT, Block, Config, build
from torch import nn


# --8<-- [start:block]
class PerLayerBlock(Block):
    def __init__(self, cfg: Config):
        super().__init__(cfg)
        self.register_buffer("k", None, persistent=False)  # this layer's keys: setup_cache(batch)
        self.register_buffer("v", None, persistent=False)

    def forward(self, x, cache=None, pos=None):
        if pos is None:  # a whole sequence: _model.py's block
            return super().forward(x)
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        self.k.index_copy_(2, pos, k)  # the buffer itself, not a view of a shared one
        self.v.index_copy_(2, pos, v)
        seen = torch.arange(self.k.shape[2], device=x.device) <= pos
        y = F.scaled_dot_product_attention(q, self.k, self.v, attn_mask=seen.view(1, 1, 1, -1))
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))


# --8<-- [end:block]


class PerLayerGPT(GPT):
    def __init__(self, cfg: Config):
        super().__init__(cfg)
        self.blocks = nn.ModuleList(PerLayerBlock(cfg) for _ in range(cfg.layers))

    # --8<-- [start:cache]
    def setup_cache(self, batch: int) -> None:
        c, p = self.cfg, self.head.weight
        shape = (batch, c.heads, c.max_len, c.d // c.heads)
        for block in self.blocks:  # allocated once, one pair per layer: fixed addresses
            block.k = torch.zeros(shape, device=p.device, dtype=p.dtype)
            block.v = torch.zeros(shape, device=p.device, dtype=p.dtype)

    def forward(self, idx, pos=None, targets=None):
        if pos is None:  # training or prefill: _model.py's forward
            return super().forward(idx, targets=targets)
        x = self.embed(idx) + self.pos_embed(pos)
        for block in self.blocks:
            x = block(x, pos=pos)
        return self.head(self.norm(x))

    # --8<-- [end:cache]


def cache_bytes(model: PerLayerGPT) -> int:
    return sum(t.numel() * t.element_size() for b in model.blocks for t in (b.k, b.v))


def build_perlayer(cfg: Config, device: str, dtype: torch.dtype) -> tuple[PerLayerGPT, GPT]:
    """(the per-layer model, _model.build's stacked-cache model); both hold the same weight tensors."""
    stacked = build(cfg, device, dtype)
    with torch.device("meta"):  # no second initialisation: the weights come from the stacked model
        model = PerLayerGPT(cfg)
    model.load_state_dict(stacked.state_dict(), assign=True)
    return model, stacked


if __name__ == "__main__":
    model, stacked = build_perlayer(CPU, "cpu", torch.float32)
    model.setup_cache(1)
    stacked.setup_cache(1)
    idx = torch.randint(CPU.vocab, (1, 8))
    with torch.no_grad():
        full = model(idx)[0]
        steps = torch.cat([model(idx[:, i : i + 1], torch.tensor([i]))[0] for i in range(8)])
        old = torch.cat([stacked(idx[:, i : i + 1], torch.tensor([i]))[0] for i in range(8)])
    print(f"decode, a cache per layer, against a full forward: max |diff| {(full - steps).abs().max():.2e}")
    print(f"  against the stacked cache's decode: max |diff| {(old - steps).abs().max():.2e}")
