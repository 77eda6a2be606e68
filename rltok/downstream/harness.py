"""The `rltok` model of EleutherAI's lm-evaluation-harness (`pip install rltok[eval]`).

lm-eval finds models in its own registry, which has no plugin hook, so the model is registered when
this module is imported. From the shell, `rltok-lm-eval` is lm-eval's own command line with the
model registered first (and `--model rltok` as its default):

    rltok-lm-eval --model rltok --model_args checkpoint=DIR --tasks hellaswag,piqa,arc_easy,lambada_openai

From Python: `import rltok.downstream.harness`, then `lm_eval.simple_evaluate(model="rltok", ...)`.
Scores are byte-level (rltok.downstream.score), so lm-eval's bits_per_byte means what rltok's does.
"""

from __future__ import annotations

import warnings
import zlib

import torch

from rltok.errors import UserError

try:
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model
except ImportError as e:  # the optional extra is not installed
    raise UserError(
        "the lm-evaluation-harness adapter needs lm-eval; install it with "
        "`pip install 'rltok[eval]'`"
    ) from e

from rltok.checkpoint import load
from rltok.downstream.score import Request, continuation_nll, fitted_requests
from rltok.generate import generate


@register_model("rltok")
class RltokLM(LM):
    """Any rltok checkpoint or export (U-Net with any boundary method, flat, bpe-lm) as an lm-eval model."""

    def __init__(
        self,
        checkpoint: str,
        batch_size: int | str = 16,
        device: str = "cpu",
        samples: int = 1,
        greedy: bool = False,
        seed: int = 0,
        **_ignored,
    ):
        super().__init__()
        # lm-eval's default device is cuda
        if device.startswith("cuda") and not torch.cuda.is_available():
            warnings.warn(f"device {device} is not available here; evaluating on the CPU")
            device = "cpu"
        self.model = load(checkpoint, device=device)
        train = self.model.config.train
        self.seq_len, self.precision = train.seq_len, train.precision
        # lm-eval passes "auto" when asked to find a batch size; the run's own is a safe choice
        self.batch_size = int(batch_size) if str(batch_size).isdigit() else train.batch_size
        self.samples, self.greedy, self.seed = int(samples), bool(greedy), int(seed)

    def _score(self, requests: list[Request]) -> list[tuple[float, bool]]:
        return continuation_nll(
            self.model,
            requests,
            self.seq_len,
            self.batch_size,
            self.samples,
            self.greedy,
            self.seed,
            self.precision,
        )

    def loglikelihood(self, requests) -> list[tuple[float, bool]]:
        """log p(continuation | context) in nats, and whether the continuation is the greedy one."""
        scored = []
        for request in requests:
            context, continuation = (s.encode("utf-8") for s in request.args)
            # noise is keyed by context, so the options of one question share their context's chunks
            scored += fitted_requests([(context, continuation)], zlib.crc32(context), self.seq_len)
        return [(-nll, greedy) for nll, greedy in self._score(scored)]

    def loglikelihood_rolling(self, requests) -> list[float]:
        """log p(text) in nats, scored from BOS in consecutive windows like `rltok eval`."""
        texts = [request.args[0].encode("utf-8") for request in requests]
        return [
            -nll for nll, _ in self._score([Request(text, 0, i) for i, text in enumerate(texts)])
        ]

    def generate_until(self, requests) -> list[str]:
        """The continuation of each context, cut before the first stop string."""
        outputs = []
        for request in requests:
            context, kwargs = request.args
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            temperature = (
                float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample", False) else 0.0
            )
            generation = generate(
                self.model,
                [context],
                max_bytes=int(kwargs.get("max_gen_toks", 256)),
                temperature=temperature,
                greedy_boundaries=self.greedy,
                seed=self.seed,
            )[0]
            text = generation.text
            for stop in until:
                if stop and stop in text:
                    text = text[: text.index(stop)]
            outputs.append(text)
        return outputs
