"""Where does a trained RL policy's logit come from? Split it, on held-out text, into the head's term
(scale x raw), the surprisal prior's term and the calibrated rate offset, and report their mean and
spread per class of byte, with the mean probability and the share of bytes where the mode ends a chunk
(p > 0.5). It shows what the estimator taught the head, against a policy-off run whose head never moved.
Also, by the length of the word (a run of letters), the share of words whose first letter ends a chunk
in the mode, and the share of their other letters that do.

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

BOS = 256
WORD_LENGTHS = {"1-2": (1, 2), "3-5": (3, 5), "6+": (6, 10**9)}


def held_out_rows(data: str | None, rows: int, length: int) -> torch.Tensor:
    """`rows` rows of `length` bytes after BOS, from the start of the test split."""
    text = b"".join(load_corpus(data).test)[: rows * length]
    ids = torch.tensor(list(text)).view(rows, length)
    return torch.cat([torch.full((rows, 1), BOS), ids], dim=1)


def is_letter(byte: int) -> bool:
    """An ASCII letter."""
    return byte < 128 and chr(byte).isalpha()


def by_word_length(ids: torch.Tensor, ends: torch.Tensor) -> dict:
    """Per word length: the share of words whose first letter is a chunk end, and of their other letters."""
    counts = {name: [0, 0, 0, 0] for name in WORD_LENGTHS}  # first ends, words, inner ends, inner
    for row, row_ends in zip(ids.tolist(), ends.tolist()):
        t = 0
        while t < len(row):
            start = t
            while t < len(row) and is_letter(row[t]):
                t += 1
            if t == start:  # not a letter
                t += 1
                continue
            length = t - start
            c = counts[next(n for n, (lo, hi) in WORD_LENGTHS.items() if lo <= length <= hi)]
            c[0] += row_ends[start]
            c[1] += 1
            c[2] += sum(row_ends[start + 1 : t])
            c[3] += length - 1
    return {
        name: {
            "words": c[1],
            "first_letter": round(c[0] / max(c[1], 1), 4),
            "inner": round(c[2] / max(c[3], 1), 4),
        }
        for name, c in counts.items()
    }


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
    head = policy.policy.logit_scale * policy.head(policy.features(x, ids)).float()[..., -1]
    term = (
        0.0
        if policy.prior is None
        else policy.prior.logit_term(policy.prior.cue(early_logits, ids))
    )
    prior = torch.as_tensor(term).expand_as(head)
    probs = seen["out"].probs
    offset = policy.rate.offset  # 0.0 under the rate loss, which has none
    result = {"run": run, "rate_offset": round(float(offset), 3)}
    for name, mask in byte_classes(ids).items():
        mask[:, 0] = False  # BOS is forced
        result[name] = {
            "bytes": int(mask.sum()),
            "head": [round(float(head[mask].mean()), 3), round(float(head[mask].std()), 3)],
            "prior": [round(float(prior[mask].mean()), 3), round(float(prior[mask].std()), 3)],
            "mean_p": round(float(probs[mask].mean()), 4),
            "mode": round(float((probs[mask] > 0.5).float().mean()), 4),
        }
    result["by_word_length"] = by_word_length(ids[:, 1:], (probs[:, 1:] > 0.5).long())
    result["ends"] = probs[:, 1:] > 0.5  # the mode, for --pairs (not written out)
    return result


def mode_difference(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Share of bytes where two modes differ, and where only the first or only the second ends a chunk."""
    return {
        "differ": round(float((a != b).float().mean()), 4),
        "first_only": round(float((a & ~b).float().mean()), 4),
        "second_only": round(float((~a & b).float().mean()), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="RL run or checkpoint directories")
    parser.add_argument(
        "--data", default=None, help="corpus whose test split to read (default: embedded)"
    )
    parser.add_argument("--rows", type=int, default=16, help="rows of 512 bytes")
    parser.add_argument("--out", default=None, help="also write the results here as JSON")
    parser.add_argument(
        "--pairs",
        action="store_true",
        help="runs come two by two: also how far each pair's modes differ",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    ids = held_out_rows(args.data, args.rows, 512)
    results = [logit_parts(run, ids) for run in args.runs]
    for r in results:
        print(f"{r['run']}: rate offset {r['rate_offset']}")
        for name, part in r.items():
            if name == "by_word_length":
                print(
                    "  mode by word length (first letter / inner letters): "
                    + ", ".join(
                        f"{k} {v['first_letter']:.2f}/{v['inner']:.3f}" for k, v in part.items()
                    )
                )
            elif isinstance(part, dict):
                print(
                    f"  {name:12s} head {part['head'][0]:+6.2f} ± {part['head'][1]:4.2f}  prior "
                    f"{part['prior'][0]:+6.2f} ± {part['prior'][1]:4.2f}  p {part['mean_p']:.3f}  "
                    f"mode {part['mode']:.3f}"
                )
    ends = [r.pop("ends") for r in results]
    if args.pairs:
        for i in range(0, len(results) - 1, 2):
            results[i]["mode_against_next"] = diff = mode_difference(ends[i], ends[i + 1])
            print(f"{results[i]['run']} against {results[i + 1]['run']}: {diff}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
