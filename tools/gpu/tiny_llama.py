"""A Llama in plain torch with Hugging Face's weight names, and its exact embedding into wider shapes.

Used by build_pair.py (training the small target and draft on the GPU machine) and by the
tests (CPU, tiny shapes). The forward pass follows transformers' `LlamaForCausalLM`
(checked against transformers 5.19 on CPU): RMSNorm in float32 then times the weight,
rotate-half RoPE (SGLang's `is_neox_style=True`), grouped KV heads (query head i reads KV head
i // (heads / kv_heads)), SiLU-gated MLP, no biases, untied LM head.

`embed(small, big_shape)` returns a state dict of the big shape whose logits equal the small
model's: hidden columns beyond the small width stay exactly zero in the residual stream,
every extra head, MLP column and layer adds exactly zero to it, and the RMSNorm weights are
scaled by sqrt(small / big) with eps scaled by small / big (the mean square over the padded
width is small / big times the small one's), so that the norm equals the small model's.
Weights that multiply those zeros (or whose product is zeroed downstream) are filled with
small random values rather than zeros, so the big model's matrix products run on non-zero data as a trained model's do.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F

HEAD_DIM = 128


@dataclass(frozen=True)
class Shape:
    """The hyper-parameters of a Llama that matter to its weights and its forward pass."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    head_dim: int = HEAD_DIM
    eps: float = 1e-5
    rope_theta: float = 10000.0
    context: int = 2048

    def hf_config(self) -> dict:
        """config.json for transformers and SGLang (`LlamaForCausalLM`, bf16, untied head)."""
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab,
            "hidden_size": self.hidden,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.intermediate,
            "rms_norm_eps": self.eps,
            "rope_theta": self.rope_theta,
            "max_position_embeddings": self.context,
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "bos_token_id": 1,
            "eos_token_id": 2,
        }

    @classmethod
    def from_hf_config(cls, config: dict) -> Shape:
        return cls(
            vocab=config["vocab_size"],
            hidden=config["hidden_size"],
            layers=config["num_hidden_layers"],
            heads=config["num_attention_heads"],
            kv_heads=config["num_key_value_heads"],
            intermediate=config["intermediate_size"],
            head_dim=config.get("head_dim", config["hidden_size"] // config["num_attention_heads"]),
            eps=config["rms_norm_eps"],
            rope_theta=config["rope_theta"],
            context=config["max_position_embeddings"],
        )


LLAMA_3_8B = dict(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336)


def _layer_names(i: int) -> dict[str, str]:
    p = f"model.layers.{i}."
    return {
        "in_norm": p + "input_layernorm.weight",
        "q": p + "self_attn.q_proj.weight",
        "k": p + "self_attn.k_proj.weight",
        "v": p + "self_attn.v_proj.weight",
        "o": p + "self_attn.o_proj.weight",
        "post_norm": p + "post_attention_layernorm.weight",
        "gate": p + "mlp.gate_proj.weight",
        "up": p + "mlp.up_proj.weight",
        "down": p + "mlp.down_proj.weight",
    }


def init_weights(shape: Shape, generator: torch.Generator, std: float = 0.02) -> dict[str, torch.Tensor]:
    """Random float32 weights (normal, `std`; output projections scaled by 1/sqrt(2 layers))."""

    def normal(*size: int, scale: float = std) -> torch.Tensor:
        return torch.randn(*size, generator=generator) * scale

    h, hd = shape.hidden, shape.head_dim
    out_scale = std / math.sqrt(2 * shape.layers)
    w = {"model.embed_tokens.weight": normal(shape.vocab, h), "model.norm.weight": torch.ones(h)}
    w["lm_head.weight"] = normal(shape.vocab, h)
    for i in range(shape.layers):
        n = _layer_names(i)
        w[n["in_norm"]] = torch.ones(h)
        w[n["post_norm"]] = torch.ones(h)
        w[n["q"]] = normal(shape.heads * hd, h)
        w[n["k"]] = normal(shape.kv_heads * hd, h)
        w[n["v"]] = normal(shape.kv_heads * hd, h)
        w[n["o"]] = normal(h, shape.heads * hd, scale=out_scale)
        w[n["gate"]] = normal(shape.intermediate, h)
        w[n["up"]] = normal(shape.intermediate, h)
        w[n["down"]] = normal(h, shape.intermediate, scale=out_scale)
    return w


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def _rope(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate-half RoPE over the last dimension of (batch, heads, seq, head_dim)."""
    seq, dim = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim))
    freqs = torch.outer(torch.arange(seq, device=x.device, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    half = dim // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _attention(x: torch.Tensor, w: dict[str, torch.Tensor], n: dict[str, str], shape: Shape) -> torch.Tensor:
    b, s, _ = x.shape
    hd = shape.head_dim
    q = F.linear(x, w[n["q"]]).view(b, s, shape.heads, hd).transpose(1, 2)
    k = F.linear(x, w[n["k"]]).view(b, s, shape.kv_heads, hd).transpose(1, 2)
    v = F.linear(x, w[n["v"]]).view(b, s, shape.kv_heads, hd).transpose(1, 2)
    q, k = _rope(q, shape.rope_theta), _rope(k, shape.rope_theta)
    rep = shape.heads // shape.kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(out.transpose(1, 2).reshape(b, s, shape.heads * hd), w[n["o"]])


def forward(w: dict[str, torch.Tensor], shape: Shape, tokens: torch.Tensor) -> torch.Tensor:
    """Logits (batch, seq, vocab) for token ids (batch, seq), in the weights' dtype."""
    x = F.embedding(tokens, w["model.embed_tokens.weight"])
    for i in range(shape.layers):
        n = _layer_names(i)
        x = x + _attention(_rms_norm(x, w[n["in_norm"]], shape.eps), w, n, shape)
        hidden = _rms_norm(x, w[n["post_norm"]], shape.eps)
        x = x + F.linear(F.silu(F.linear(hidden, w[n["gate"]])) * F.linear(hidden, w[n["up"]]), w[n["down"]])
    return F.linear(_rms_norm(x, w["model.norm.weight"], shape.eps), w["lm_head.weight"])


# --- the exact embedding -----------------------------------------------------------------


def big_shape(small: Shape, **big: int) -> Shape:
    """The shape `small` embeds into: the given widths (default Llama-3-8B's), the small model's
    vocabulary, head_dim, RoPE and context, and eps scaled by small / big hidden."""
    dims = {**LLAMA_3_8B, **big}
    return replace(small, **dims, eps=small.eps * small.hidden / dims["hidden"])


def check_embeddable(small: Shape, big: Shape) -> None:
    """ValueError naming the mismatch when `small` cannot be embedded exactly into `big`."""
    problems = []
    if small.head_dim != big.head_dim:
        problems.append(f"head_dim {small.head_dim} != {big.head_dim} (RoPE pairs would not line up)")
    for field in ("hidden", "layers", "heads", "kv_heads", "intermediate"):
        if getattr(small, field) > getattr(big, field):
            problems.append(f"{field} {getattr(small, field)} > {getattr(big, field)}")
    rep_small, rep_big = small.heads // small.kv_heads, big.heads // big.kv_heads
    if rep_small > rep_big or big.heads % big.kv_heads or small.heads % small.kv_heads:
        problems.append(f"query heads per KV head {rep_small} must be <= {rep_big}")
    if (small.vocab, small.rope_theta) != (big.vocab, big.rope_theta):
        problems.append("vocabulary and rope_theta must be the same")
    if problems:
        raise ValueError("cannot embed exactly: " + "; ".join(problems))


def _head_map(small: Shape, big: Shape) -> list[int]:
    """Big query head of each small query head, so that each lands in its KV head's group."""
    rep_small, rep_big = small.heads // small.kv_heads, big.heads // big.kv_heads
    return [(i // rep_small) * rep_big + i % rep_small for i in range(small.heads)]


def _rows(heads: list[int], hd: int) -> torch.Tensor:
    return torch.cat([torch.arange(h * hd, (h + 1) * hd) for h in heads]) if heads else torch.zeros(0, dtype=torch.long)


class Filler:
    """Small random values for weights whose contribution is zeroed elsewhere."""

    def __init__(self, generator: torch.Generator, std: float = 0.02, device: torch.device | str = "cpu"):
        self.generator, self.std, self.device = generator, std, torch.device(device)

    def __call__(self, *size: int) -> torch.Tensor:
        return torch.randn(*size, generator=self.generator, device=self.device) * self.std

    def zeros(self, *size: int) -> torch.Tensor:
        return torch.zeros(*size, device=self.device)

    def ones(self, *size: int) -> torch.Tensor:
        return torch.ones(*size, device=self.device)

    def rows(self, heads: list[int], hd: int) -> torch.Tensor:
        return _rows(heads, hd).to(self.device)


def _embed_attention(
    sw: dict[str, torch.Tensor], sn: dict[str, str] | None, small: Shape, big: Shape, fill: Filler
) -> dict[str, torch.Tensor]:
    """q, k, v, o of one big layer; `sn` None: an extra layer that adds zero."""
    d, hd = small.hidden, big.head_dim
    q, k = fill(big.heads * hd, big.hidden), fill(big.kv_heads * hd, big.hidden)
    v = fill.zeros(big.kv_heads * hd, big.hidden)  # extra KV heads read nothing
    o = fill.zeros(big.hidden, big.heads * hd)  # padded hidden rows stay zero
    # columns of o for heads whose KV head has zero values may be anything: their output is zero
    real_kv = set(range(small.kv_heads)) if sn else set()
    rep_big = big.heads // big.kv_heads
    free_heads = [h for h in range(big.heads) if h // rep_big not in real_kv]
    o[:d, fill.rows(free_heads, hd)] = fill(d, len(free_heads) * hd)
    if sn is not None:
        qrows = fill.rows(_head_map(small, big), hd)
        kvrows = fill.rows(list(range(small.kv_heads)), hd)
        q[qrows, :d] = sw[sn["q"]]
        k[kvrows, :d] = sw[sn["k"]]
        v[kvrows, :d] = sw[sn["v"]]
        v[kvrows, d:] = fill(len(kvrows), big.hidden - d)  # times the zero padded inputs
        o[:d, qrows] = sw[sn["o"]]
    return {"q": q, "k": k, "v": v, "o": o}


def _embed_mlp(
    sw: dict[str, torch.Tensor], sn: dict[str, str] | None, small: Shape, big: Shape, fill: Filler
) -> dict[str, torch.Tensor]:
    """gate, up, down of one big layer: extra columns have zero `up` rows, so silu(gate) * 0 = 0."""
    d, m = small.hidden, small.intermediate if sn else 0
    gate = fill(big.intermediate, big.hidden)
    up = fill.zeros(big.intermediate, big.hidden)
    down = fill.zeros(big.hidden, big.intermediate)
    down[:d] = fill(d, big.intermediate)
    if sn is not None:
        gate[:m, :d] = sw[sn["gate"]]
        up[:m, :d] = sw[sn["up"]]
        up[:m, d:] = fill(m, big.hidden - d)
        down[:d, :m] = sw[sn["down"]]
    return {"gate": gate, "up": up, "down": down}


def embed_layer(sw: dict[str, torch.Tensor], index: int, small: Shape, big: Shape, fill: Filler) -> dict[str, torch.Tensor]:
    """The float32 weights of big layer `index` (small layer `index`, or one adding zero)."""
    sn = _layer_names(index) if index < small.layers else None
    scale = math.sqrt(small.hidden / big.hidden)
    parts = {**_embed_attention(sw, sn, small, big, fill), **_embed_mlp(sw, sn, small, big, fill)}
    for norm in ("in_norm", "post_norm"):
        weight = fill.ones(big.hidden)
        if sn is not None:
            weight[: small.hidden] = sw[sn[norm]] * scale
        parts[norm] = weight
    names = _layer_names(index)
    return {names[key]: value for key, value in parts.items()}


def embed_outer(sw: dict[str, torch.Tensor], small: Shape, big: Shape, fill: Filler) -> dict[str, torch.Tensor]:
    """Embedding table, final norm and LM head of the big model."""
    d = small.hidden
    emb = fill.zeros(small.vocab, big.hidden)
    emb[:, :d] = sw["model.embed_tokens.weight"]
    norm = fill.ones(big.hidden)
    norm[:d] = sw["model.norm.weight"] * math.sqrt(small.hidden / big.hidden)
    head = fill(small.vocab, big.hidden)
    head[:, :d] = sw["lm_head.weight"]
    return {"model.embed_tokens.weight": emb, "model.norm.weight": norm, "lm_head.weight": head}


def embed(sw: dict[str, torch.Tensor], small: Shape, big: Shape, seed: int = 0) -> dict[str, torch.Tensor]:
    """The whole big state dict in float32 (for tests and small shapes; build_pair.py streams
    `embed_outer` and `embed_layer` into shards instead)."""
    check_embeddable(small, big)
    fill = Filler(torch.Generator().manual_seed(seed))
    sw = {k: v.float().cpu() for k, v in sw.items()}
    out = embed_outer(sw, small, big, fill)
    for i in range(big.layers):
        out.update(embed_layer(sw, i, small, big, fill))
    return out


# --- Hugging Face checkpoint files ---------------------------------------------------------


def save_checkpoint(folder: Path, shape: Shape, shards: list[dict[str, torch.Tensor]]) -> None:
    """config.json, model-0000i-of-0000n.safetensors (bf16) and the index SGLang and transformers read."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(shape.hf_config(), indent=1))
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    index: dict[str, str] = {}
    total = 0
    for i, shard in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {k: v.to(torch.bfloat16).contiguous().cpu() for k, v in shard.items()}
        save_file(tensors, str(folder / name), metadata={"format": "pt"})
        index.update(dict.fromkeys(tensors, name))
        total += sum(t.numel() * 2 for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": index}))


def load_checkpoint(folder: Path) -> tuple[Shape, dict[str, torch.Tensor]]:
    """Shape and bf16 weights of a checkpoint that save_checkpoint wrote."""
    from safetensors.torch import load_file

    shape = Shape.from_hf_config(json.loads((folder / "config.json").read_text()))
    weights: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):
        weights.update(load_file(str(file)))
    return shape, weights


def shape_dict(shape: Shape) -> dict:
    return asdict(shape)
