"""The timing loop's side of a runner: its ring (K input sets in the judge's arenas and, per output, K slots), the
batches of calls over it, and the outputs kept for the judge's calibration batches. Also how a call's outputs are
described and laid out, which the plain calls' replies (serve.py) share."""

from __future__ import annotations

import contextlib
import traceback

import torch

from kbench.failures import one_line
from kbench.layouts import nbytes
from kbench.loading import synchronize
from kbench.runner.arenas import aliasing, dtype_name
from kbench.runner.held import Exports


# Outputs keep() keeps: distinct memory for calls in turn, at the cost of that many untimed calls of the reference.
KEPT_SETS = 2


class Ring:
    """The ring's input sets (each a list of arguments, views of the judge's arenas), its output slots (an arena
    buffer and a stride in bytes per output), the outputs `keep` kept, and the last batch's held outputs."""

    def __init__(self):
        self.calls: list[list] = []
        self.slots: list[tuple[torch.Tensor, int]] = []
        self.kept: list = []
        self.held: list[list[torch.Tensor]] = []  # per call of the last batch, its plain outputs (with `hold`)
        self.exports = Exports()

    def load(self, calls: list[list], slots: list[tuple[torch.Tensor, int]]) -> None:
        self.calls, self.slots = calls, slots

    def clear(self) -> None:
        self.calls, self.slots, self.kept, self.held = [], [], [], []
        self.exports = Exports()  # the memory it named may go back to the driver now

    def batch(self, model, message: dict, device: torch.device) -> dict:
        """`count` calls, call i on the ring's input set i; then the device is synchronised and the reply sent. Each
        call's outputs are copied into slot i of the output arenas or, with `hold` (on a GPU), left where the call
        put them, kept alive until the next batch and named in the reply by their allocations' IPC handles (held.py;
        None for one the driver will not export), once every call is queued and before the synchronisation. The
        judge's clock runs from its request until it holds its own copy of every output (kbench/judge/remote.py);
        this process times nothing. The work per call beside the model's is kept small (the slots' views are made
        once per batch): on a GPU it overlaps the calls' kernels. With `kept`, each call returns the kept outputs at
        no cost."""
        self.held = []  # the last batch's outputs go: the allocator can hand this batch's calls the same memory
        if message.get("kept"):
            if not self.kept:
                return _failure("a batch of kept outputs before any were kept")
            kept = iter(self.kept * (int(message["count"]) // max(len(self.kept), 1) + 1))
            model = lambda *arguments: next(kept)  # noqa: E731 (calls that cost nothing, laid out as the model's)
        count = int(message["count"])
        if count > len(self.calls):
            return _failure(f"a batch of {count} on a ring of {len(self.calls)}")
        hold = bool(message.get("hold")) and device.type == "cuda"
        reply: dict = {"sequence": False, "outputs": [], "aliases_input": []}
        batch = self.calls[:count]
        advance_versions([item for arguments in batch for item in arguments])  # the judge wrote new contents
        try:
            with precision(message.get("precision")):
                for index, arguments in enumerate(batch):
                    items, sequence = as_items(model(*arguments))
                    if index == 0:
                        layout = _layout(items, sequence)
                        reply.update(sequence=sequence, outputs=[describe(item) for item in items],
                                     aliases_input=aliasing(items, arguments))
                        rings, failure = _slot_rings(items, self.slots, len(self.calls))
                        if failure:
                            return _failure(failure)
                        targets = [ring.unbind(0) for ring in rings]  # each call's slot, made once
                    elif _layout(items, sequence) != layout:
                        return _failure(f"call {index} of a batch returned outputs unlike call 0's")
                    plain = [item for item in items if is_plain(item)]
                    if hold:
                        self.held.append(plain)
                    else:
                        for target, item in zip(targets, plain):
                            target[index].copy_(item.detach())
            if hold:  # while the calls' kernels run: the names cost the host a few microseconds a call
                reply["held"] = self._named()
            synchronize(device)
        except Exception as error:
            traceback.print_exc()
            return _failure(one_line(error))
        return reply

    def _named(self) -> dict:
        """The held outputs' places, per call, per plain output (None: an empty one, or one the driver will not
        export)."""
        self.exports.begin()
        calls = [[place.to_wire() if item.numel() and (place := self.exports.export(item)) is not None else None
                  for item in call] for call in self.held]
        return {"handles": self.exports.to_wire(), "calls": calls}

    def keep(self, model, device: torch.device) -> dict:
        """The model's outputs on the ring's first input sets (KEPT_SETS of them), kept (untimed): the judge's
        calibration batches return them in place of calls, in turn (judge/timed_sides.py fixed_cost), so that what a
        batch costs beyond its calls, the outputs' copies and all, is measured with calls that cost nothing, whose
        outputs are not all the same memory (a copy of one output over and over can be read from L2)."""
        self.held = []
        try:
            self.kept = [model(*arguments) for arguments in self.calls[:KEPT_SETS]]
            synchronize(device)
        except Exception as error:
            traceback.print_exc()
            return _failure(one_line(error))
        return {"ok": True}


def _failure(message: str) -> dict:
    return {"failure": {"status": "runtime_error", "message": message}}


@contextlib.contextmanager
def precision(policy_name: str | None):
    """A call under another precision policy (the reference's runner times PyTorch's defaults as a baseline),
    the problem's policy back after it."""
    if not policy_name:
        yield
        return
    from kbench import policy
    before = {name: setting.read() for name, setting in policy.SETTINGS.items()}
    policy.apply_policy(policy_name)
    try:
        yield
    finally:
        policy.apply(before)


def as_items(output) -> tuple[list, bool]:
    if isinstance(output, (tuple, list)):
        return list(output), True
    return [output], False


def advance_versions(arguments: list) -> None:
    """Each argument tensor's version counter one up: the judge rewrote its contents behind autograd's back."""
    tensors = tuple(item for item in arguments if isinstance(item, torch.Tensor))
    if tensors:
        torch._C._autograd._unsafe_set_version_counter(tensors, tuple(tensor._version + 1 for tensor in tensors))


def _layout(items: list, sequence: bool) -> tuple:
    return sequence, tuple((type(item), item.dtype, item.shape, item.device) if isinstance(item, torch.Tensor)
                           else type(item) for item in items)


def _slot_rings(items: list, slots: list, count: int) -> tuple[list, str]:
    """Per plain tensor output: its arena's `count` slots seen as one [count, *shape] tensor of its dtype; or what
    does not fit."""
    plain = [item for item in items if is_plain(item)]
    if len(plain) > len(slots):
        return [], f"{len(plain)} outputs, the ring has slots for {len(slots)}"
    rings = []
    for number, (item, (buffer, stride)) in enumerate(zip(plain, slots)):
        size = nbytes(item.dtype, item.shape)
        if size > stride:
            return [], f"output {number} needs {size} bytes, its slots hold {stride} (the reference's output)"
        if not size:
            rings.append(torch.empty((count, *item.shape), dtype=item.dtype, device=buffer.device))
            continue
        element = item.element_size()
        inner = torch.empty(tuple(item.shape), dtype=item.dtype, device="meta").stride()
        rings.append(buffer[:count * stride].view(item.dtype).as_strided((count, *item.shape),
                                                                        (stride // element, *inner)))
    return rings, ""


def is_plain(item) -> bool:
    return type(item) in (torch.Tensor, torch.nn.Parameter)


def describe(item) -> dict:
    if not isinstance(item, torch.Tensor):
        return {"kind": type(item).__name__[:100], "dtype": "", "shape": [], "device": ""}
    kind = "Tensor" if is_plain(item) else type(item).__name__[:100]
    try:
        return {"kind": kind, "dtype": dtype_name(item.dtype), "shape": list(item.shape), "device": str(item.device)}
    except Exception:  # a subclass whose attributes raise
        return {"kind": kind, "dtype": "", "shape": [], "device": ""}
