"""Mirrors of metrics.jsonl in the tools researchers keep open (`rltok train --log-to`): TensorBoard
and Weights & Biases. Each is an optional extra (pip install 'rltok[track]'), imported only when asked
for; the trainer opens them on rank 0 alone. metrics.jsonl stays the record: a tracker receives the
same numbers, under the same names, at the same steps."""

from __future__ import annotations

import html
import json
import os
import secrets
from pathlib import Path

from rltok.errors import UserError

TRACKERS = ("tensorboard", "wandb")
WANDB_ID_FILE = "wandb_run_id"  # beside the checkpoints: a resume continues the same W&B run


def scalars(record: dict) -> dict[str, float]:
    """The record's numbers, less its step (the x of every curve)."""
    return {
        k: v
        for k, v in record.items()
        if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
    }


def held_out_line(document: bytes, most: int = 240) -> str:
    """The longest of the document's first 200 lines, cut to `most` bytes on a character's edge: the
    text whose segmentation a tracker shows at each validation."""
    line = max(document.split(b"\n", 200)[:200], key=len)
    return line[:most].decode("utf-8", errors="ignore")


def _missing(name: str) -> UserError:
    return UserError(
        f"--log-to {name} needs the {name} package, which is not installed; "
        "pip install 'rltok[track]' (or drop --log-to)"
    )


class TensorBoard:
    """Event files in RUN/tensorboard; scalars kept in float64 so they equal metrics.jsonl's."""

    def __init__(self, run_dir: Path, config_json: str, resumed_at: int | None):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise _missing("tensorboard") from None
        # each opening marks a session start: TensorBoard takes the first as the run's beginning and
        # a later one as a restart, hiding what the run logged from that step on (a resume logs the
        # steps after its checkpoint again)
        purge = 0 if resumed_at is None else resumed_at + 1
        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=purge)
        if resumed_at is None:
            self.writer.add_text("config", _code(config_json), 0)

    def log(self, record: dict) -> None:
        """Each number of a metrics.jsonl record, as a scalar at its step."""
        for key, value in scalars(record).items():
            self.writer.add_scalar(
                key, value, record["step"], new_style=True, double_precision=True
            )

    def text(self, step: int, tag: str, text: str) -> None:
        """A text at a step (the Text tab)."""
        self.writer.add_text(tag, _code(text), step)

    def close(self) -> None:
        """Write what is buffered and close the event file."""
        self.writer.close()


class WandB:
    """A W&B run named after the run directory, its files in RUN/wandb; WANDB_MODE=offline writes it
    there alone (`wandb sync` uploads it later), WANDB_PROJECT names the project (default rltok)."""

    def __init__(self, run_dir: Path, config: dict, resumed_at: int | None):
        try:
            import wandb
        except ImportError:
            raise _missing("wandb") from None
        id_file = run_dir / WANDB_ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(4)
        id_file.write_text(run_id)
        try:
            self.run = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "rltok"),
                name=run_dir.name,
                id=run_id,
                resume="allow",
                dir=str(run_dir),
                config=config,
                settings=wandb.Settings(console="off", silent=True),
            )
        except Exception as e:  # wandb's own errors: no login, no network
            raise UserError(
                f"W&B could not start the run ({str(e).strip()}); log in with `wandb login`, or "
                "set WANDB_MODE=offline to write it under the run directory and `wandb sync` it later"
            ) from None
        self.html = wandb.Html

    def log(self, record: dict) -> None:
        """Each number of a metrics.jsonl record, at its step."""
        self.run.log(scalars(record), step=record["step"])

    def text(self, step: int, tag: str, text: str) -> None:
        """A text at a step, as an HTML panel."""
        self.run.log({tag: self.html(f"<pre>{html.escape(text)}</pre>")}, step=step)

    def close(self) -> None:
        """Finish the run (offline: its files are complete)."""
        self.run.finish()


def _code(text: str) -> str:
    """Markdown that shows text as it is (TensorBoard renders text as markdown)."""
    return "\n".join("    " + line for line in text.splitlines())


class Trackers:
    """The trackers a run logs to (none: metrics.jsonl alone); a context that closes them."""

    def __init__(self, names: list[str], run_dir: Path, config: dict, resumed_at: int | None):
        unknown = set(names) - set(TRACKERS)
        if unknown:
            raise UserError(
                f"unknown tracker {', '.join(sorted(unknown))}; choose from {', '.join(TRACKERS)}"
            )
        self.open: list[TensorBoard | WandB] = []
        self._step, self._sent = -1, set()  # the keys sent at the step logged last
        try:
            for name in dict.fromkeys(names):
                if name == "tensorboard":
                    self.open.append(TensorBoard(run_dir, json.dumps(config, indent=1), resumed_at))
                else:
                    self.open.append(WandB(run_dir, config, resumed_at))
        except BaseException:
            self.__exit__()
            raise

    def log(self, record: dict) -> None:
        """Send a metrics.jsonl record to every tracker: each number once per step (a validation
        record repeats its step's `bytes` and `elapsed`)."""
        if record["step"] != self._step:
            self._step, self._sent = record["step"], set()
        fresh = {k: v for k, v in record.items() if k not in self._sent}
        self._sent |= set(fresh) - {"step"}
        for tracker in self.open:
            tracker.log(fresh)

    def text(self, step: int, tag: str, text: str) -> None:
        """Send a text to every tracker."""
        for tracker in self.open:
            tracker.text(step, tag, text)

    def __enter__(self) -> Trackers:
        return self

    def __exit__(self, *exc) -> None:
        for tracker in self.open:
            tracker.close()
