"""Parameter spaces of a problem: random sweep configurations and reduced sizes for CPU machines.

A problem's sizes and settings are the module globals its get_inputs()/get_init_inputs() read. A
problem may declare its sweep space and its small sizes:

    KBENCH_SWEEP = {"batch_size": [1, 2, 3], "length": [7, 16, 37], "stride": [1, 2, 3]}
    KBENCH_SMALL = {"batch_size": 2, "length": 512}

Without a declaration (every KernelBench file as it is) both are derived from the globals those two
functions read: integers, booleans and tuples of integers. Two kinds of those are not varied:
globals computed from other globals (`bias_shape = (out_channels, 1, 1)`), which follow their
sources under `overridden`, and axis globals and broadcast shapes (see `is_axis`,
`is_broadcast_shape`), which keep their official value.
"""

from __future__ import annotations

import math
import random
import re
from types import ModuleType
from typing import Iterator

from kbench.problem import derived_globals, overridden

SWEEP_DECLARATION = "KBENCH_SWEEP"
SMALL_DECLARATION = "KBENCH_SMALL"

# Sweep inputs stay small: a sweep of 8 configurations costs seconds, not minutes.
SWEEP_INPUT_BYTES = 16 << 20
# Reduced sizes on a CPU device: the reference should run in well under a second.
SMALL_INPUT_BYTES = 2 << 20

# Knobs recognised by name, with the small values a derived sweep draws from (first match wins).
KNOB_VALUES = [
    (re.compile(r"output_padding|out_pad"), [0, 1]),
    (re.compile(r"padding|pad"), [0, 1, 2]),
    (re.compile(r"stride"), [1, 2, 3]),
    (re.compile(r"dilation"), [1, 2, 3]),
    (re.compile(r"groups"), [1, 2, 4]),
    (re.compile(r"kernel"), [1, 2, 3, 5]),
]


# Axis-selecting globals (`dim = 1` of a cumsum, `reduce_dim`, `axes = (2, 3)`) are not sizes. KernelBench
# also names sizes `dim` (`dim = 393216`), `dim1` and `embed_dim`, so a global is an axis only when its
# name's last word is dim/dims/axis/axes and every value is an axis of a tensor of rank MAX_RANK. A
# small size so named (`hidden_dim = 4`) then keeps its official value too, which is already small.
AXIS_NAME = re.compile(r"(?:\w*_)?(?:dim|dims|axis|axes)")
MAX_RANK = 8


def is_axis(name: str, value: object) -> bool:
    """Whether a global selects a dimension (kept as it is) rather than sizing one."""
    values = value if isinstance(value, tuple) else (value,)
    return bool(AXIS_NAME.fullmatch(name.lower())) and all(
        type(v) is int and -MAX_RANK <= v < MAX_RANK for v in values)


def is_broadcast_shape(name: str, value: object) -> bool:
    """A tuple of ones that is not a knob (`bias_shape = (1, 1, 1)`) broadcasts: it is not a size."""
    return isinstance(value, tuple) and bool(value) and set(value) == {1} and _knob_values(name) is None


def parameter_globals(module: ModuleType) -> dict[str, object]:
    """Globals read by get_inputs()/get_init_inputs() that a sweep can vary: ints, bools, int tuples.

    Derived globals, axes and broadcast shapes are left out: they follow their sources or keep their
    official value.
    """
    derived = derived_globals(module)
    names = []
    for function_name in ("get_inputs", "get_init_inputs"):
        function = getattr(module, function_name, None)
        code = getattr(function, "__code__", None)
        if code is not None:
            names.extend(code.co_names)
    found = {}
    for name in dict.fromkeys(names):
        value = getattr(module, name, None)
        if name in derived or is_axis(name, value) or is_broadcast_shape(name, value):
            continue
        if isinstance(value, bool) or (isinstance(value, int)) or (
                isinstance(value, tuple) and value and all(type(v) is int for v in value)):
            found[name] = value
    return found


def _knob_values(name: str) -> list[int] | None:
    for pattern, values in KNOB_VALUES:
        if pattern.search(name.lower()):
            return values
    return None


def _size_values(official: int) -> list[int]:
    """Small, odd and edge sizes, plus sizes around the official one (the input-size cap shrinks them)."""
    around = {official, official + 1, max(1, official // 2 + 1), 2 * official - 1}
    return sorted({1, 2, 3, 5, 7, 16, 37} | around)


def derived_space(module: ModuleType) -> dict[str, list]:
    """A sweep space from the problem's globals: small random sizes, small strides/paddings/dilations."""
    space: dict[str, list] = {}
    for name, official in parameter_globals(module).items():
        if isinstance(official, bool):
            space[name] = [False, True]
        elif isinstance(official, tuple):
            values = _knob_values(name) or _size_values(max(official))
            space[name] = [official] + [tuple(v for _ in official) for v in values]
        else:
            space[name] = _knob_values(name) or _size_values(official)
    return space


def sweep_space(module: ModuleType) -> tuple[dict[str, list], bool]:
    """(space, declared): the problem's KBENCH_SWEEP when present, else a derived one."""
    declared = getattr(module, SWEEP_DECLARATION, None)
    if isinstance(declared, dict) and declared:
        return {name: list(values) for name, values in declared.items()}, True
    return derived_space(module), False


def iter_configurations(module: ModuleType, seed: int, max_input_bytes: int = SWEEP_INPUT_BYTES,
                        attempts: int = 1000) -> Iterator[dict]:
    """Distinct random configurations, deterministic for a seed, each with inputs under the cap."""
    space, _ = sweep_space(module)
    if not space:
        return
    rng = random.Random(seed)
    seen = set()
    for attempt in range(attempts):
        if attempt == 0:
            configuration = near_official(module, space)
        else:
            configuration = {name: rng.choice(values) for name, values in space.items()}
        configuration = shrink_to_fit(module, configuration, max_input_bytes)
        key = repr(sorted(configuration.items()))
        if key not in seen:
            seen.add(key)
            yield configuration


def near_official(module: ModuleType, space: dict[str, list]) -> dict:
    """Every size in the space one above its official value: odd sizes break hard-coded shapes."""
    official = parameter_globals(module)
    return {name: value + 1 for name, value in official.items()
            if name in space and type(value) is int and _knob_values(name) is None}


def small_overrides(module: ModuleType, max_input_bytes: int = SMALL_INPUT_BYTES) -> dict:
    """Reduced sizes for a CPU device: declared KBENCH_SMALL, else the largest sizes halved until small."""
    declared = getattr(module, SMALL_DECLARATION, None)
    if isinstance(declared, dict):
        return dict(declared)
    return shrink_to_fit(module, {}, max_input_bytes)


def shrink_to_fit(module: ModuleType, overrides: dict, max_input_bytes: int) -> dict:
    """Halve the largest size-like global until the inputs fit the cap (knobs are left alone)."""
    overrides = dict(overrides)
    for _ in range(200):
        size = input_bytes(module, overrides)
        if size is None or size <= max_input_bytes:
            return overrides
        current = {**parameter_globals(module), **overrides}
        sizes = {name: value for name, value in current.items()
                 if type(value) is int and value > 1 and _knob_values(name) is None}
        if not sizes:
            return overrides
        largest = max(sizes, key=sizes.get)
        overrides[largest] = max(1, math.ceil(sizes[largest] / 2))
    return overrides


def input_bytes(module: ModuleType, overrides: dict) -> int | None:
    """Bytes of the inputs get_inputs() would make, measured on the meta device (nothing allocated)."""
    import torch

    try:
        with overridden(module, overrides), torch.device("meta"):
            inputs = module.get_inputs()
    except Exception:
        return None
    return sum(value.numel() * value.element_size() for value in inputs if isinstance(value, torch.Tensor))
