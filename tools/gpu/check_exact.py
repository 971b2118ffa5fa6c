"""Does a served 8B-shaped target give the small target's next tokens? (teacher-forced)

    python3 check_exact.py URL SMALL_DIR IDS_JSON OUT_JSON [--positions 64] [--near-tie 0.05] [--dtype bfloat16]

Sends each held-out sequence of IDS_JSON (build_pair.py's exact-ids.json: 50 sequences of 65
token ids) to SGLang's `/generate` as `input_ids` with `return_logprob`, `logprob_start_len`
0 and `top_logprobs_num` 2 (sglang 0.5.16's input_top_logprobs: the top tokens of the
distribution at each prompt position, the prompt itself teacher-forcing the prefix), and
runs the small model of SMALL_DIR (tiny_llama.forward on its bf16 weights, computed in
float32, or with --dtype bfloat16 in bf16 as SGLang computes) on the same ids. Per position:
do the two top-1 tokens agree; is every disagreement a near-tie in the small model (its two
best log-probabilities within --near-tie); the largest difference between the served and
the small model's log-probability of the served top tokens.
Writes OUT_JSON and prints one summary line; exit 1 if agreement < 97% or a disagreement is
not a near-tie.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_llama as tl


def served_top(url: str, seqs: list[list[int]], k: int = 2) -> list[list[list[tuple[float, int]]]]:
    """Per sequence, per position p >= 1: the served top-k (logprob, token) predicting token p."""
    body = {
        "input_ids": seqs,
        "sampling_params": {"max_new_tokens": 1, "temperature": 0},
        "return_logprob": True,
        "logprob_start_len": 0,
        "top_logprobs_num": k,
    }
    req = urllib.request.Request(url.rstrip("/") + "/generate", json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as resp:
        answers = json.loads(resp.read())
    out = []
    for seq, answer in zip(seqs, answers):
        meta = answer["meta_info"]
        tops = meta["input_top_logprobs"]
        tokens = [entry[1] for entry in meta["input_token_logprobs"]]
        offset = len(seq) - len(tops)  # 0: an entry (empty) for position 0 too; 1: none for it
        if offset not in (0, 1) or tokens != seq[len(seq) - len(tokens) :]:
            raise SystemExit(
                f"check_exact: the logprobs do not line up with the prompt ({len(tops)} tops, {tokens[:5]} vs {seq[:5]})"
            )
        out.append([[(float(e[0]), int(e[1])) for e in tops[p - offset]] for p in range(1, len(seq))])
    return out


def small_logprobs(folder: Path, seqs: list[list[int]], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """log-softmax (float64) of the small model computed in `dtype` at positions 0..n-2
    (predicting tokens 1..n-1)."""
    shape, weights = tl.load_checkpoint(folder)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    w = {k: v.to(dev).to(dtype) for k, v in weights.items()}
    with torch.no_grad():
        logits = tl.forward(w, shape, torch.tensor(seqs, device=dev)[:, :-1])
    return torch.log_softmax(logits.double(), -1).cpu()


def compare(served: list[list[list[tuple[float, int]]]], small: torch.Tensor, positions: int, near_tie: float) -> dict:
    agree, total, max_diff, ties, not_ties = 0, 0, 0.0, [], []
    for s, rows in enumerate(served):
        for p, top in enumerate(rows[:positions]):
            dist = small[s, p]
            best2 = torch.topk(dist, 2)
            gap = float(best2.values[0] - best2.values[1])
            total += 1
            for logprob, token in top:
                max_diff = max(max_diff, abs(logprob - float(dist[token])))
            if top[0][1] == int(best2.indices[0]):
                agree += 1
                continue
            case = {"seq": s, "pos": p + 1, "served": top[0][1], "small": int(best2.indices[0]), "small_gap": round(gap, 5)}
            (ties if gap < near_tie else not_ties).append(case)
    return {
        "positions": total,
        "agree": agree,
        "agreement": round(agree / total, 5),
        "disagreements_near_tie": ties,
        "disagreements_not_near_tie": not_ties,
        "max_logprob_diff": round(max_diff, 5),
        "near_tie": near_tie,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("small", type=Path)
    ap.add_argument("ids", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--near-tie", type=float, default=0.05)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="the small model's arithmetic")
    args = ap.parse_args(argv)
    seqs = json.loads(args.ids.read_text())
    small = small_logprobs(args.small, seqs, getattr(torch, args.dtype))
    result = compare(served_top(args.url, seqs), small, args.positions, args.near_tie)
    result["sequences"] = len(seqs)
    result["small_dtype"] = args.dtype
    args.out.write_text(json.dumps(result, indent=1))
    print(
        f"check_exact ({args.dtype}): {result['agree']}/{result['positions']} top-1 agree ({100 * result['agreement']:.2f}%), "
        f"{len(result['disagreements_near_tie'])} near-tie and {len(result['disagreements_not_near_tie'])} other "
        f"disagreements, largest logprob difference {result['max_logprob_diff']}"
    )
    return 0 if result["agreement"] >= 0.97 and not result["disagreements_not_near_tie"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
