"""The judge's reading of held outputs (kbench/runner/held.py), on a CPU: the allocation a handle opens stands in as
host memory (opening handles is the CUDA driver's; the GPU tests open real ones, tests/test_gpu.py)."""

from __future__ import annotations

import pytest
import torch

from kbench.runner import held
from kbench.runner.wire import HeldOutputs, HeldRef

HANDLE = bytes(range(64))


@pytest.fixture()
def imports(monkeypatch):
    """Imports whose one allocation, 4 KiB of host memory, holds 0, 1, 2, ... as float32."""
    allocation = torch.arange(1024, dtype=torch.float32).view(torch.uint8)
    found = held.Imports(torch.device("cpu"))
    monkeypatch.setattr(found, "_open", lambda handle: allocation)
    return found


def test_a_place_is_read_where_the_runner_named_it_and_made_once(imports):
    view, start, end = imports.place(HANDLE, HeldRef(0, 64, (2, 1), 1), torch.float32, (3, 2))
    assert torch.equal(view, torch.tensor([[17.0, 18.0], [19.0, 20.0], [21.0, 22.0]]))  # 16 floats in, offset 1
    assert (start, end) == (68, 92)
    assert imports.place(HANDLE, HeldRef(0, 64, (2, 1), 1), torch.float32, (3, 2))[0] is view


@pytest.mark.parametrize("ref, shape, why", [
    (HeldRef(0, 2, (1,), 0), (4,), "not aligned"),
    (HeldRef(0, 4000, (1,), 0), (100,), "does not lie in its allocation"),
    (HeldRef(0, 0, (1024,), 0), (2, 1), "does not lie in its allocation"),  # its stride reaches past the end
    (HeldRef(0, 0, (1,), 0), (2, 2), "does not lie in its allocation"),  # a stride per dimension, or none read
    (HeldRef(0, 0, (0, 1), 0), (64, 4), "share memory"),  # an expanded row: 256 values read from 16 bytes
    (HeldRef(0, 0, (8, 2), 0), (4, 4), "leave gaps"),  # every other element of a wider buffer
])
def test_a_place_beyond_its_allocation_is_never_read(imports, ref, shape, why):
    with pytest.raises(held.HoldUnusable, match=why):
        imports.place(HANDLE, ref, torch.float32, shape)


def test_dense_layouts_are_contiguous_ones_with_their_dimensions_in_any_order():
    from kbench.layouts import dense

    assert dense((3, 4), (1, 3)) and dense((3, 1, 4), (4, 99, 1)) and dense((5,), (1,))
    assert not dense((3, 4), (0, 1)) and not dense((3, 4), (4, 2)) and not dense((2, 2), (1, 1))


def test_each_call_s_output_is_copied_into_its_slot(imports):
    calls = HeldOutputs((HANDLE,), ((HeldRef(0, 0, (1,), 0),), (HeldRef(0, 16, (1,), 0),)))
    slots = torch.zeros(2, 4)
    spans = held.copy_held(imports, calls, 0, torch.float32, (4,), list(slots.unbind(0)))
    assert torch.equal(slots, torch.tensor([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]))
    assert spans == [(HANDLE, 0, 16), (HANDLE, 16, 32)] and not held.overlapping(spans)


def test_a_call_whose_output_is_not_held_is_refused(imports):
    calls = HeldOutputs((HANDLE,), ((HeldRef(0, 0, (1,), 0),), (None,)))
    with pytest.raises(held.HoldUnusable, match="does not share"):
        held.copy_held(imports, calls, 0, torch.float32, (4,), list(torch.zeros(2, 4).unbind(0)))


def test_an_allocation_is_closed_once_batches_in_a_row_have_not_named_it(monkeypatch):
    """Batches of different lengths in turn (the time alone's of one call and of eight) name different allocations:
    one is closed only after UNUSED_BATCHES batches in a row named none of it, not reopened inside the judge's clock
    at the next long batch; close() closes every one."""
    closed = []
    monkeypatch.setattr(held, "_close", lambda pointer, device: closed.append(pointer))
    imports = held.Imports(torch.device("cpu"))
    short, long = bytes(64), bytes(range(64))
    imports.opened = {short: (1, None), long: (2, None)}
    assert held.UNUSED_BATCHES >= 1  # a long batch's allocations outlive the short batch between two long ones
    for _ in range(held.UNUSED_BATCHES):  # batches that name the short batch's allocation only
        imports.used = {short}
        imports.close_unused()
    assert closed == [] and set(imports.opened) == {short, long}
    imports.used = {short}
    imports.close_unused()
    assert closed == [2] and set(imports.opened) == {short}
    imports.close()
    assert closed == [2, 1] and imports.opened == {}
