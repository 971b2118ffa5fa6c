"""Build a trained target and draft on the GPU machine, and the target embedded at Llama-3-8B's cost.

    python3 build_pair.py OUT_DIR [--quick]        (OUT_DIR e.g. /tmp/sgmodels; --quick: CPU-sized)

Seeded throughout. Steps, each timed into OUT_DIR/pair.json:

1. corpus: the .py files of the installed packages (every folder of sys.path, sorted, read as
   UTF-8), split into train and held-out by the SHA-1 of each file's path under its folder
   (one in ten held out);
2. a byte-level BPE tokenizer (the `tokenizers` package) trained on the training text,
   saved as an HF fast tokenizer (`tokenizer.json`, `tokenizer_config.json`);
3. the target `ts` (Llama, head_dim 128) trained with torch on the GPU, then the draft `ds`
   (a smaller Llama, same tokenizer) distilled from it (KL to the target's next-token
   distribution), both saved as HF Llama checkpoints (config.json + bf16 safetensors);
4. `t8b`: `ts` embedded exactly into Llama-3-8B's shapes (tiny_llama.embed), written shard
   by shard;
5. `heldout-prompts.jsonl` (workload prompts cut from held-out files at line starts) and
   `exact-ids.json` (held-out token sequences for check_exact.py).

A second run finds pair.json and does nothing (the models are cached on a warm machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_llama as tl

SEED = 38
SPECIALS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2 (bos 1, eos 2 in every config.json)
FULL = {
    "vocab": 8192,
    "corpus_mb": 96,
    "tokenizer_mb": 24,
    "seq": 512,
    "batch": 48,
    "target": dict(hidden=1024, layers=8, heads=8, kv_heads=2, intermediate=2816),
    "draft": dict(hidden=512, layers=3, heads=4, kv_heads=1, intermediate=1408),
    "target_steps": 1800,
    "draft_steps": 1200,
    "max_train_s": 180,
    "max_draft_s": 80,
}
QUICK = {
    **FULL,
    "vocab": 512,
    "corpus_mb": 1,
    "tokenizer_mb": 1,
    "seq": 64,
    "batch": 4,
    "target": dict(hidden=128, layers=2, heads=2, kv_heads=1, intermediate=256),
    "draft": dict(hidden=128, layers=1, heads=1, kv_heads=1, intermediate=128),
    "target_steps": 20,
    "draft_steps": 10,
    "big": dict(hidden=256, layers=3, heads=4, kv_heads=2, intermediate=512),
}


def source_files() -> list[tuple[str, Path]]:
    """(key, path) of every .py file under the folders of sys.path, sorted by key."""
    found: dict[str, Path] = {}
    for root in sorted({p for p in sys.path if p and os.path.isdir(p)}):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = Path(dirpath) / name
                    found.setdefault(str(path.relative_to(root)), path)
    return sorted(found.items())


def is_heldout(key: str) -> bool:
    return hashlib.sha1(key.encode()).digest()[0] % 10 == 0


def read_corpus(limit_bytes: int) -> tuple[list[str], list[str], dict]:
    """Train and held-out texts (files of 200 B to 200 kB), in the order of their keys' hashes."""
    files = sorted(source_files(), key=lambda kp: hashlib.sha1(kp[0].encode()).hexdigest())
    train: list[str] = []
    held: list[str] = []
    sizes = [0, 0]
    for key, path in files:
        part = 1 if is_heldout(key) else 0
        if sizes[part] >= (limit_bytes // 10 if part else limit_bytes):
            continue
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if not 200 <= len(text) <= 200_000:
            continue
        (held if part else train).append(text)
        sizes[part] += len(text)
    return train, held, {"files_seen": len(files), "train_files": len(train), "heldout_files": len(held),
                         "train_bytes": sizes[0], "heldout_bytes": sizes[1]}  # fmt: skip


def train_tokenizer(texts: list[str], vocab: int, limit_bytes: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    used, sample = 0, []
    for text in texts:
        if used >= limit_bytes:
            break
        sample.append(text)
        used += len(text)
    tok.train_from_iterator(sample, trainer)
    return tok


def save_tokenizer(tok, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
              "unk_token": "<unk>", "model_max_length": 2048, "add_bos_token": False}  # fmt: skip
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def encode(tok, texts: list[str]) -> torch.Tensor:
    """All texts' ids, each followed by </s>, as one int32 tensor."""
    eos = tok.token_to_id("</s>")
    ids: list[int] = []
    for enc in tok.encode_batch(texts):
        ids.extend(enc.ids)
        ids.append(eos)
    return torch.tensor(ids, dtype=torch.int32)


def batches(data: torch.Tensor, seq: int, batch: int, seed: int):
    """Endless random windows of seq + 1 tokens (seeded)."""
    gen = torch.Generator().manual_seed(seed)
    while True:
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=gen)
        yield torch.stack([data[s : s + seq + 1] for s in starts.tolist()]).long()


def _lr(step: int, steps: int, peak: float) -> float:
    warm = max(1, steps // 20)
    if step < warm:
        return peak * (step + 1) / warm
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, steps - warm))))


def kl(logits: torch.Tensor, target: torch.Tensor, vocab: int) -> torch.Tensor:
    """KL(target || draft) per token, the draft's distillation loss."""
    flat = (F.log_softmax(logits, -1).reshape(-1, vocab), F.log_softmax(target, -1).reshape(-1, vocab))
    return F.kl_div(*flat, log_target=True, reduction="batchmean")


def train(shape, data, cfg: dict, steps: int, max_s: float, teacher=None, seed: int = SEED) -> tuple[dict, dict]:
    """Train a Llama of `shape` on `data` (next-token loss, or KL to `teacher`=(weights, shape))."""
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)  # same pair on every machine, where torch can
    weights = {k: v.to(dev).requires_grad_(True) for k, v in tl.init_weights(shape, torch.Generator().manual_seed(seed)).items()}
    decay = [v for k, v in weights.items() if v.dim() == 2]
    rest = [v for k, v in weights.items() if v.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), fused=dev == "cuda")  # fmt: skip
    t0, losses, step = time.time(), [], 0
    for step, xy in enumerate(batches(data, cfg["seq"], cfg["batch"], seed)):
        if step >= steps or time.time() - t0 > max_s:
            break
        xy = xy.to(dev, non_blocking=True)
        for group in opt.param_groups:
            group["lr"] = _lr(step, steps, 1e-3)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=dev == "cuda"):
            logits = tl.forward(weights, shape, xy[:, :-1]).float()
            if teacher is None:
                loss = F.cross_entropy(logits.reshape(-1, shape.vocab), xy[:, 1:].reshape(-1))
            else:
                with torch.no_grad():
                    target = tl.forward(teacher[0], teacher[1], xy[:, :-1]).float()
                loss = kl(logits, target, shape.vocab)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(weights.values()), 1.0)
        opt.step()
        if step % 100 == 0:
            losses.append((step, round(loss.item(), 4)))
            print(f"  step {step} loss {loss.item():.3f} ({time.time() - t0:.0f}s)", flush=True)
    done = {k: v.detach() for k, v in weights.items()}
    return done, {"steps": step, "planned_steps": steps, "seconds": round(time.time() - t0, 1), "losses": losses}


@torch.no_grad()
def evaluate(target, draft, data: torch.Tensor, cfg: dict, windows: int = 64) -> dict:
    """Held-out loss of both, and how often the draft's top-1 is the target's (greedy acceptance
    of one drafted token)."""
    xy = next(batches(data, cfg["seq"], windows, SEED + 7)).to(target[0]["lm_head.weight"].device)
    out = {}
    with torch.autocast(xy.device.type, dtype=torch.bfloat16, enabled=xy.device.type == "cuda"):
        lt = tl.forward(target[0], target[1], xy[:, :-1]).float()
        ld = tl.forward(draft[0], draft[1], xy[:, :-1]).float()
    for name, logits in (("target", lt), ("draft", ld)):
        out[f"{name}_heldout_loss"] = round(
            F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xy[:, 1:].reshape(-1)).item(), 4
        )
        out[f"{name}_heldout_top1"] = round((logits.argmax(-1) == xy[:, 1:]).float().mean().item(), 4)
    out["draft_agrees_with_target_top1"] = round((lt.argmax(-1) == ld.argmax(-1)).float().mean().item(), 4)
    return out


def write_embedded(folder: Path, weights: dict, small, big, seed: int = SEED) -> None:
    """The embedded target, built on the GPU (when there is one) and written 4 layers a shard."""
    dev = weights["lm_head.weight"].device
    fill = tl.Filler(torch.Generator(device=dev).manual_seed(seed), device=dev)
    sw = {k: v.to(torch.bfloat16).float() for k, v in weights.items()}  # the values ts holds
    shards = [tl.embed_outer(sw, small, big, fill)]
    per = 4
    for first in range(0, big.layers, per):
        shard = {}
        for i in range(first, min(big.layers, first + per)):
            shard.update({k: v.to(torch.bfloat16) for k, v in tl.embed_layer(sw, i, small, big, fill).items()})
        shards.append(shard)
    tl.check_embeddable(small, big)
    tl.save_checkpoint(folder, big, shards)


def heldout_prompts(texts: list[str], n: int, chars: int, seed: int) -> list[str]:
    """`n` prompts of about `chars` characters, each starting at a line start of a held-out file."""
    rng = random.Random(seed)
    out = []
    pool = [t for t in texts if len(t) > 2 * chars]
    while len(out) < n and pool:
        text = rng.choice(pool)
        start = text.rfind("\n", 0, rng.randrange(0, len(text) - chars)) + 1
        end = text.rfind("\n", start, start + chars)
        out.append(text[start : end if end > start else start + chars])
    return out


def exact_sequences(data: torch.Tensor, n: int, length: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(data) - length, (n,), generator=gen).tolist()
    return [data[s : s + length].tolist() for s in starts]


class Timer:
    def __init__(self):
        self.t0, self.marks = time.time(), {}

    def mark(self, name: str) -> None:
        self.marks[name] = round(time.time() - self.t0 - sum(self.marks.values()), 1)
        print(f"[build_pair] {name}: {self.marks[name]} s", flush=True)


def build(out: Path, cfg: dict) -> dict:
    timer, report = Timer(), {"config": {k: v for k, v in cfg.items()}}
    train_texts, held_texts, report["corpus"] = read_corpus(cfg["corpus_mb"] << 20)
    timer.mark("corpus")
    tok = train_tokenizer(train_texts, cfg["vocab"], cfg["tokenizer_mb"] << 20)
    vocab = tok.get_vocab_size()
    train_ids, held_ids = encode(tok, train_texts), encode(tok, held_texts)
    report["tokens"] = {"vocab": vocab, "train": len(train_ids), "heldout": len(held_ids)}
    timer.mark("tokenizer")
    small = tl.Shape(vocab=vocab, **cfg["target"])
    target, report["target_training"] = train(small, train_ids, cfg, cfg["target_steps"], cfg["max_train_s"])
    timer.mark("target")
    dshape = tl.Shape(vocab=vocab, **cfg["draft"])
    draft, report["draft_training"] = train(
        dshape, train_ids, cfg, cfg["draft_steps"], cfg["max_draft_s"], teacher=(target, small)
    )
    timer.mark("draft")
    report["heldout"] = evaluate((target, small), (draft, dshape), held_ids, cfg)
    print("[build_pair]", report["heldout"], flush=True)
    big = tl.big_shape(small, **cfg.get("big", {}))
    for name, shape, weights in (("ts", small, target), ("ds", dshape, draft)):
        tl.save_checkpoint(out / name, shape, [weights])
    write_embedded(out / "t8b", target, small, big)
    for name in ("ts", "ds", "t8b"):
        save_tokenizer(tok, out / name)
    timer.mark("save")
    prompts = heldout_prompts(held_texts, 256, 600, SEED)
    (out / "heldout-prompts.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    (out / "exact-ids.json").write_text(json.dumps(exact_sequences(held_ids, 50, 65, SEED)))
    report["shapes"] = {"ts": tl.shape_dict(small), "ds": tl.shape_dict(dshape), "t8b": tl.shape_dict(big)}
    report["seconds"] = timer.marks
    return report


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--quick", action="store_true", help="CPU-sized models and corpus, to check the code paths")
    args = ap.parse_args(argv)
    manifest = args.out / "pair.json"
    if manifest.exists():
        print(f"[build_pair] {manifest} exists: the pair is built already")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    report = build(args.out, QUICK if args.quick else FULL)
    manifest.write_text(json.dumps(report, indent=1))
    print(json.dumps(report["seconds"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
