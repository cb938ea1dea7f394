"""The room a candidate's outputs get in the judge's arenas: what the reference's outputs need, with a bounded
slack, reserved before the candidate's code runs, so that a runner can never make the judge allocate more."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kbench.loading import tensor_bytes

# What a candidate's output may take beyond the reference's: twice its bytes and this much (a wider dtype, a
# different shape: the comparison fails those, with a clearer message than a refusal of room).
ROOM_SLACK_BYTES = 1 << 20


@dataclass(frozen=True)
class OutputRoom:
    """The bytes of each tensor the reference returns at the evaluation's sizes (the judge's own reference run): the
    judge reserves that room for the candidate's outputs before it runs, and gives no more than
    `allowed(index)` bytes to output `index`, nor room for more outputs, however much the runner asks."""

    sizes: tuple[int, ...]

    @classmethod
    def of(cls, output) -> "OutputRoom":
        values = output if isinstance(output, (tuple, list)) else [output]
        return cls(tuple(tensor_bytes(value) for value in values if isinstance(value, torch.Tensor)))

    def allowed(self, index: int) -> int:
        return 2 * self.sizes[index] + ROOM_SLACK_BYTES

    def refusal(self, asked: list[int]) -> str | None:
        """Why the judge gives no room for `asked` (bytes per output), or None."""
        if len(asked) > len(self.sizes):
            return f"returned {len(asked)} tensors where the reference returns {len(self.sizes)}"
        for index, size in enumerate(asked):
            if size > self.allowed(index):
                return (f"output {index} takes {size} bytes, more than kbench gives it ({self.allowed(index)}: "
                        f"twice the reference's {self.sizes[index]} and {ROOM_SLACK_BYTES})")
        return None
