"""Where does a trained RL policy's logit come from? Split it, on held-out text, into the head's term
(scale x raw), the surprisal prior's term and the calibrated rate offset, and report their mean and
spread per class of byte, with the mean probability and the share of bytes where the mode ends a chunk
(p > 0.5). It shows what the estimator taught the head, against a policy-off run whose head never moved.

    python benchmarks/logit_parts.py RUN [RUN ...] [--data NAME] [--rows 16] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from policy_signal import byte_classes

from rltok.checkpoint import load
from rltok.data import load_corpus
from rltok.layers.blocks import rms_norm

BOS = 256


def held_out_rows(data: str | None, rows: int, length: int) -> torch.Tensor:
    """`rows` rows of `length` bytes after BOS, from the start of the test split."""
    text = b"".join(load_corpus(data).test)[: rows * length]
    ids = torch.tensor(list(text)).view(rows, length)
    return torch.cat([torch.full((rows, 1), BOS), ids], dim=1)


@torch.no_grad()
def logit_parts(run: str, ids: torch.Tensor) -> dict:
    """Per byte class: mean and spread of the head's and the prior's terms, mean p, share with p > 0.5."""
    model = load(run).eval()
    policy = model.boundary
    seen = {}
    hook = policy.register_forward_hook(lambda _, inputs, out: seen.update(inputs=inputs, out=out))
    model(ids)
    hook.remove()
    x, _, early_logits = seen["inputs"]
    head = policy.cfg.logit_scale * policy.head(rms_norm(x)).float()[..., -1]
    prior = torch.as_tensor(policy._prior(policy._cue(early_logits, ids))).expand_as(head)
    probs = seen["out"].probs
    offset = getattr(policy, "rate_offset", None)
    result = {"run": run, "rate_offset": None if offset is None else round(float(offset), 3)}
    for name, mask in byte_classes(ids).items():
        mask[:, 0] = False  # BOS is forced
        result[name] = {
            "bytes": int(mask.sum()),
            "head": [round(float(head[mask].mean()), 3), round(float(head[mask].std()), 3)],
            "prior": [round(float(prior[mask].mean()), 3), round(float(prior[mask].std()), 3)],
            "mean_p": round(float(probs[mask].mean()), 4),
            "mode": round(float((probs[mask] > 0.5).float().mean()), 4),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="RL run or checkpoint directories")
    parser.add_argument(
        "--data", default=None, help="corpus whose test split to read (default: embedded)"
    )
    parser.add_argument("--rows", type=int, default=16, help="rows of 512 bytes")
    parser.add_argument("--out", default=None, help="also write the results here as JSON")
    args = parser.parse_args()
    torch.manual_seed(0)
    ids = held_out_rows(args.data, args.rows, 512)
    results = [logit_parts(run, ids) for run in args.runs]
    for r in results:
        print(f"{r['run']}: rate offset {r['rate_offset']}")
        for name, part in r.items():
            if isinstance(part, dict):
                print(
                    f"  {name:12s} head {part['head'][0]:+6.2f} ± {part['head'][1]:4.2f}  prior "
                    f"{part['prior'][0]:+6.2f} ± {part['prior'][1]:4.2f}  p {part['mean_p']:.3f}  "
                    f"mode {part['mode']:.3f}"
                )
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
