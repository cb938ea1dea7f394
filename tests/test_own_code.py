"""The harness watch over kbench's own code and the builtins (own_code.OwnCode): every kind of replacement a
candidate could make in the worker is named, and nothing is named when nothing changed."""

from __future__ import annotations

import builtins

import pytest

import kbench.fresh
import kbench.guards
import kbench.stats
import kbench.timing
from kbench.own_code import OwnCode


@pytest.fixture
def own_code() -> OwnCode:
    taken = OwnCode()
    assert taken.changed() == []
    return taken


def test_a_replaced_function_is_named(own_code, monkeypatch):
    monkeypatch.setattr(kbench.timing, "_measure", lambda side, timer: (0.0, 0.0, 0.0))
    assert own_code.changed() == ["kbench.timing._measure"]


def test_a_changed_threshold_is_named(own_code, monkeypatch):
    monkeypatch.setattr(kbench.stats, "SLOWDOWN_MIN_RATIO", 1000.0)
    assert own_code.changed() == ["kbench.stats.SLOWDOWN_MIN_RATIO"]


def test_a_method_s_swapped_code_and_defaults_are_named(own_code, monkeypatch):
    method = kbench.fresh.FreshRounds.candidate_done
    monkeypatch.setattr(method, "__code__", kbench.fresh.FreshRounds.reference_done.__code__)
    assert own_code.changed() == ["kbench.fresh.FreshRounds.candidate_done"]
    monkeypatch.undo()
    monkeypatch.setattr(kbench.stats.slowdown, "__defaults__", (1000.0, 0.0))
    assert own_code.changed() == ["kbench.stats.slowdown"]


def test_a_container_changed_in_place_is_named(own_code):
    kbench.guards.UTILITY_OPS.add("convolution")
    try:
        assert own_code.changed() == ["kbench.guards.UTILITY_OPS"]
    finally:
        kbench.guards.UTILITY_OPS.discard("convolution")
    assert own_code.changed() == []


def test_a_global_that_shadows_a_builtin_and_a_replaced_builtin_are_named(own_code, monkeypatch):
    monkeypatch.setattr(kbench.timing, "min", lambda *args: 0, raising=False)
    monkeypatch.setattr(builtins, "len", lambda value: 0)
    assert sorted(own_code.changed()) == ["builtins.len", "kbench.timing.min (added)"]


def test_a_replaced_builtin_that_the_comparison_uses_cannot_blind_it(own_code, monkeypatch):
    monkeypatch.setattr(builtins, "all", lambda iterable: True)
    assert own_code.changed() == ["builtins.all"]


def test_a_change_that_blinds_the_naming_is_still_reported(own_code, monkeypatch):
    """Naming the difference goes through kbench's own token classes; rigging them hides the name, not the
    change."""
    import kbench.reach

    monkeypatch.setattr(kbench.reach.Same, "__eq__", lambda self, other: True)
    changes = own_code.changed()
    assert len(changes) == 1 and "could not be told" in changes[0], changes


def test_importing_a_submodule_of_kbench_later_is_no_change(own_code):
    """An import binds the submodule in its package: a candidate (or kbench) importing one is not tampering."""
    import sys

    import kbench

    module = sys.modules.pop("kbench.plot", None)
    had = "plot" in vars(kbench)
    plot = vars(kbench).pop("plot", None)
    try:
        taken = OwnCode()
        import kbench.plot  # noqa: F401
        assert taken.changed() == []
    finally:
        if module is not None:
            sys.modules["kbench.plot"] = module
        if had:
            kbench.plot = plot


def test_a_harmless_addition_does_not_hide_a_change_beside_it(own_code, monkeypatch):
    """A builtin added (never named: it shadows nothing) next to a change the naming cannot tell."""
    import kbench.reach

    monkeypatch.setattr(builtins, "kbench_test_extra", 1, raising=False)
    assert own_code.changed() == []
    monkeypatch.setattr(kbench.reach.Same, "__eq__", lambda self, other: True)
    changes = own_code.changed()
    assert len(changes) == 1 and "could not be told" in changes[0], changes
