"""The options the evaluating commands (`kbench eval`, `kbench sweep`) share, and the RunConfig they make."""

from __future__ import annotations

from pathlib import Path

import click

from kbench.config import PRECISIONS, PYTORCH_DEFAULT, STRICT_FP32, RunConfig, default_cache_dir


def run_options(command):
    """Options shared by the commands that evaluate solutions."""
    options = [
        click.option("--device", default="auto", show_default=True,
                     help="auto (CUDA when present), cpu, cuda or cuda:N."),
        click.option("--trials", default=5, show_default=True, type=click.IntRange(1),
                     help="Correctness trials, each with fresh seeded inputs."),
        click.option("--seed", default=42, show_default=True, type=int,
                     help="Base seed for parameters (models) and inputs (trial i uses seed + i)."),
        click.option("--atol", type=click.FloatRange(0), default=None,
                     help="Absolute tolerance [default: float32 1e-4 (1e-2 under --policy pytorch), "
                          "float16/bfloat16 1e-2]."),
        click.option("--rtol", type=click.FloatRange(0), default=None,
                     help="Relative tolerance [default: as --atol]."),
        click.option("--timeout", "timeout_s", default=None, type=click.FloatRange(1),
                     help="Run limit: wall-clock seconds per evaluation, its builds not counted [default: derived "
                          "from the reference's time: 1000x its calls plus a margin, at least 60 s]."),
        click.option("--build-timeout", "build_timeout_s", default=600.0, show_default=True,
                     type=click.FloatRange(1), help="Build limit: wall-clock seconds of a solution's builds."),
        click.option("--call-timeout", "call_timeout_s", default=60.0, show_default=True, type=click.FloatRange(0),
                     help="A request to the candidate (import, build, a call, a timing batch) that takes longer "
                          "than this, or than 1000x the reference's time for its calls, ends the run as a "
                          "timeout; 0: off."),
        click.option("--time/--no-time", "do_time", default=True, show_default=True,
                     help="Time correct candidates against the reference."),
        click.option("--time-budget", "time_budget_s", default=10.0, show_default=True,
                     type=click.FloatRange(0), help="Seconds of sampling per evaluation at most."),
        click.option("--target-rse", default=0.01, show_default=True, type=click.FloatRange(0),
                     help="Stop sampling once every side's median is known to this relative standard error."),
        click.option("--sweep", "sweep", default=8, show_default=True, type=click.IntRange(0),
                     help="Random parameter configurations checked after the official one (0: off)."),
        click.option("--strict", is_flag=True,
                     help="A sweep failure makes the verdict incorrect (default: a sweep_failed flag)."),
        click.option("--full-size", is_flag=True,
                     help="On a CPU device, run official sizes instead of reduced ones."),
        click.option("--policy", type=click.Choice(["strict", "pytorch"]), default="strict", show_default=True,
                     callback=_parse_policy,
                     help="Precision policy of the check and the main speedup: strict (true float32, no TF32) "
                          "or pytorch (PyTorch's defaults: TF32 convolutions; float32 tolerance 1e-2)."),
        click.option("--precision", type=click.Choice(PRECISIONS), default="float32", show_default=True,
                     help="Cast the floating inputs and both models to this dtype, as KernelBench's precision "
                          "does; float16/bfloat16 runs use tolerance 1e-2 on every output."),
        click.option("--baselines", default="eager,default", show_default=True, callback=_parse_baselines,
                     help="References to time the candidate against, comma-separated: eager (the reference "
                          "under --policy, always; the main speedup), default (PyTorch's default precision "
                          "settings: TF32 convolutions), compile (torch.compile of the reference)."),
        click.option("--guards/--no-guards", "guards", default=True, show_default=True,
                     help="Anti-cheat checks that cost time (fresh timed inputs, timed-output checks, the "
                          "reference timed alone, op, kernel and precision checks; the runner boundary and "
                          "the judge's clock always hold)."),
        click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help=f"Builds and logs [default: {default_cache_dir()}; env KBENCH_CACHE_DIR]."),
        click.option("--out", default=Path("results/results.csv"), show_default=True,
                     type=click.Path(dir_okay=False, path_type=Path), help="Results CSV (rows are appended)."),
        click.option("--json", "as_json", is_flag=True, help="Print results as JSON instead of a table."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _parse_policy(context, parameter, value: str) -> str:
    return {"strict": STRICT_FP32, "pytorch": PYTORCH_DEFAULT}[value]


def _parse_baselines(context, parameter, value: str) -> tuple[str, ...]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in names if name not in ("eager", "default", "compile")]
    if unknown:
        raise click.BadParameter(f"unknown baseline(s) {', '.join(unknown)}; choose from eager, default, compile")
    return tuple(name for name in names if name != "eager")


def build_config(device, trials, seed, atol, rtol, timeout_s, build_timeout_s, call_timeout_s, do_time, time_budget_s,
                 target_rse, sweep, strict, full_size, policy, baselines, guards, cache_dir,
                 precision="float32") -> RunConfig:
    return RunConfig(device=device, trials=trials, seed=seed, atol=atol, rtol=rtol, timeout_s=timeout_s,
                     build_timeout_s=build_timeout_s, call_timeout_s=call_timeout_s, time=do_time,
                     time_budget_s=time_budget_s, target_rse=target_rse, sweep=sweep, strict=strict,
                     full_size=full_size, policy=policy, baselines=baselines,
                     guards=guards, cache_dir=cache_dir or default_cache_dir(), precision=precision)
