"""Overridden globals: derived globals follow, axis globals stay (issue: verdicts on real run folders, class 3)."""

from __future__ import annotations

import itertools
import textwrap
import types
from pathlib import Path

import pytest
import torch

from kbench import params
from kbench.config import RunConfig
from kbench.problem import derived_globals, load_module, overridden
from kbench.results import Status
from kbench.schedule.child import evaluate

from conftest import PROBLEMS, SOLUTIONS

KERNELBENCH = Path(__file__).resolve().parents[2] / "shared" / "kernelbench"
DERIVED = PROBLEMS / "conv_bias_derived.py"
CUMSUM = PROBLEMS / "cumsum_dim.py"


def module_from(tmp_path: Path, source: str, name: str = "problem.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return load_module(path, "test_overrides")


def reference_error(module, overrides: dict) -> str | None:
    """Build and run the reference the way the worker does; None if it runs."""
    with torch.no_grad(), overridden(module, overrides):
        torch.manual_seed(0)
        try:
            module.Model(*module.get_init_inputs())(*module.get_inputs())
        except Exception as error:
            return f"{type(error).__name__}: {error}"
    return None


def sweep_skips(module) -> tuple[int, int]:
    """(ran, skipped) as worker._sweep counts them: 8 wanted, at most 4 draws each, CPU cap."""
    ran = skipped = 0
    draws = params.iter_configurations(module, 42, params.SMALL_INPUT_BYTES)
    for configuration in itertools.islice(draws, 8 * 4):
        if ran == 8:
            break
        if reference_error(module, configuration) is None:
            ran += 1
        else:
            skipped += 1
    return ran, skipped


def snapshot(module) -> dict:
    return {name: value for name, value in vars(module).items() if not name.startswith("__")}


def test_derived_global_follows_its_source_and_everything_is_restored():
    module = load_module(DERIVED, "test_overrides")
    before, model_class = snapshot(module), module.Model
    with overridden(module, {"out_channels": 16}):
        assert module.bias_shape == (16, 1, 1)
        assert module.Model is model_class  # definitions are not re-run
    after = snapshot(module)
    assert after.keys() == before.keys() and all(after[name] is before[name] for name in before)


def test_reference_with_a_derived_global_runs_at_small_sizes_and_in_the_sweep():
    module = load_module(DERIVED, "test_overrides")
    small = params.small_overrides(module)
    assert "out_channels" in small and "bias_shape" not in small
    # What the old mechanism did (set the overrides, leave bias_shape at its import-time value) fails:
    stale = {**small, "bias_shape": module.bias_shape}
    assert "must match the size" in reference_error(module, stale)
    assert reference_error(module, small) is None
    assert "bias_shape" not in params.sweep_space(module)[0]  # it follows out_channels, it is not drawn
    assert sweep_skips(module) == (8, 0)


def test_axis_global_keeps_its_value_and_the_sweep_skips_nothing():
    module = load_module(CUMSUM, "test_overrides")
    space, _ = params.sweep_space(module)
    assert "dim" not in space and "batch_size" in space
    assert "dim" not in params.small_overrides(module)
    assert sweep_skips(module) == (8, 0)


@pytest.mark.parametrize("name, value, axis", [
    ("dim", 1, True), ("dim", -1, True), ("dims", (2, 3), True), ("axis", 0, True), ("reduce_dim", 1, True),
    ("reduction_dim", 2, True), ("sum_dim", 1, True), ("max_dim", 1, True),
    ("dim", 393216, False), ("dim", 512, False), ("dim1", 4096, False), ("dim2", 1, False),
    ("embed_dim", 128, False), ("hidden_dim", 256, False), ("input_dim", 784, False), ("batch_size", 1, False),
])
def test_axis_rule(name, value, axis):
    assert params.is_axis(name, value) is axis


def test_broadcast_shapes_are_not_swept(tmp_path):
    """`bias_shape = (1, 1, 1)` (KernelBench level 2 #36) drawn as (5, 5, 5) breaks the reference."""
    module = module_from(tmp_path, """
        import torch
        batch_size = 16
        features = 64
        bias_shape = (1, 1, 1)
        output_padding = (1, 1, 1)
        def get_inputs():
            return [torch.rand(batch_size, features, 1, 1)]
        def get_init_inputs():
            return [bias_shape, output_padding]
    """)
    space, _ = params.sweep_space(module)
    assert "bias_shape" not in space and "output_padding" in space  # a knob of ones is still swept


@pytest.mark.skipif(not KERNELBENCH.is_dir(), reason="needs ../shared/kernelbench")
def test_axis_rule_on_kernelbench_files():
    """`dim` is an axis in the cumsum and reduction problems and a size in the activations and ViT."""
    expected = {
        "level1/89_cumsum.py": ("dim", False), "level1/47_Sum_reduction_over_a_dimension.py": ("reduce_dim", False),
        "level2/24_Conv3d_Min_Softmax.py": ("dim", False), "level2/80_Gemm_Max_Subtract_GELU.py": ("max_dim", False),
        "level1/19_ReLU.py": ("dim", True), "level3/28_VisionTransformer.py": ("dim", True),
        "level3/31_VisionAttention.py": ("embed_dim", True), "level1/33_BatchNorm.py": ("dim1", True),
    }
    for relative, (name, swept) in expected.items():
        module = load_module(KERNELBENCH / relative, "test_kb")
        assert (name in params.parameter_globals(module)) is swept, relative


def test_tuple_unpacking_and_chained_assignments(tmp_path):
    module = module_from(tmp_path, """
        height = width = 128
        depth, rows, cols = (4, 32, 32)
        area = height * width
        volume = depth * rows * cols
    """)
    with overridden(module, {"height": 3, "rows": 5}):
        assert (module.height, module.width, module.area) == (3, 128, 384)
        assert (module.depth, module.rows, module.cols, module.volume) == (4, 5, 32, 640)
    assert (module.height, module.area, module.rows, module.volume) == (128, 16384, 32, 4096)


def test_globals_computed_by_a_function_call_follow(tmp_path):
    module = module_from(tmp_path, """
        import math
        def _shape():
            return (out_channels, 1, 1)
        constant = math.prod((2, 3))
        width = int(64)
        out_channels = 64
        bias_shape = _shape()
        scale_shape = tuple(2 * c for c in (out_channels,))
    """)
    with overridden(module, {"out_channels": 6}):
        assert module.bias_shape == (6, 1, 1) and module.scale_shape == (12,)
    assert module.bias_shape == (64, 1, 1)
    assert derived_globals(module) == {"bias_shape", "scale_shape"}  # modules and builtins are not sources


def test_an_assignment_that_fails_to_rerun_keeps_its_value_with_a_warning(tmp_path):
    module = module_from(tmp_path, """
        embed_dim = 128
        num_heads = 8
        head_dim = embed_dim // num_heads
        width = head_dim * 2
    """)
    with pytest.warns(RuntimeWarning, match="head_dim kept its value.*ZeroDivisionError"):
        with overridden(module, {"num_heads": 0}):
            # width reads head_dim, which could not be recomputed: it keeps its value too
            assert (module.num_heads, module.head_dim, module.width) == (0, 16, 32)
    assert module.num_heads == 8


def test_augmented_assignments_apply_once(tmp_path):
    module = module_from(tmp_path, """
        import math
        n = 4
        n += 1
        for i in range(3):
            pass
        m = i + n
        i += 10
        items = [1]
        items += [n]
    """)
    with overridden(module, {"unrelated": 1}):
        # `i += 10` reads i from the loop, which is not re-run: re-running it would add 10 again
        assert (module.n, module.i, module.m, module.items) == (5, 12, 7, [1, 5])
    with overridden(module, {"n": 9}):
        # m read the loop's i before `i += 10`; the re-run cannot know that i, so m keeps its value
        assert (module.n, module.i, module.m, module.items) == (9, 12, 7, [1, 9])
    assert module.items == [1, 5] and not hasattr(module, "unrelated")


def test_nested_blocks_keep_the_outer_overrides(tmp_path):
    module = load_module(DERIVED, "test_overrides")
    with overridden(module, {"out_channels": 16}):
        with overridden(module, {"batch_size": 2}):
            assert (module.out_channels, module.bias_shape, module.batch_size) == (16, (16, 1, 1), 2)
        assert (module.bias_shape, module.batch_size) == ((16, 1, 1), 32)
    assert module.bias_shape == (128, 1, 1)


def test_restored_after_an_exception():
    module = load_module(DERIVED, "test_overrides")
    with pytest.raises(ValueError):
        with overridden(module, {"out_channels": 16}):
            raise ValueError
    assert (module.out_channels, module.bias_shape) == (128, (128, 1, 1))


def test_module_without_source_gets_plain_overrides():
    module = types.ModuleType("no_source")
    exec("out_channels = 8\nbias_shape = (out_channels, 1, 1)\n", vars(module))
    with overridden(module, {"out_channels": 2}):
        assert (module.out_channels, module.bias_shape) == (2, (8, 1, 1))
    assert module.out_channels == 8


def test_copy_of_the_reference_is_correct_at_reduced_sizes(tmp_path):
    """End to end on the CPU: small sizes reduce out_channels; the row must not blame the candidate."""
    config = RunConfig(device="cpu", cache_dir=tmp_path, time=False, trials=2, timeout_s=120)
    result = evaluate(DERIVED, SOLUTIONS / "conv_bias_derived" / "copy.py", config)
    assert result.status == Status.CORRECT, result.message
    assert "out_channels=64" in result.sizes
    assert result.sweep.run == 8 and result.sweep.skipped == 0
