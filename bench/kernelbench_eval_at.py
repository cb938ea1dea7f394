"""KernelBench's own eval_kernel_against_ref on one (problem, solution) pair at a precision, as kb_eval_one.py runs it
(5 correctness trials, 100 timed trials, device 0, backend cuda) but with `precision` chosen: one KBJSON line with
compiled, correctness, runtime_ms, ref_runtime_ms, speedup, metadata. Run with the evaluator folder (kb_eval_one.py's,
holding kernelbench/) first on sys.path: usage: python kernelbench_eval_at.py EVALUATOR PROBLEM SOLUTION BUILD
PRECISION (float32, float16 or bfloat16)."""
import json
import os
import sys
import types

evaluator, problem, solution, build, precision = sys.argv[1:6]
sys.path.insert(0, evaluator)
for name, attrs in {"dotenv": {"load_dotenv": lambda *a, **k: None}, "openai": {"OpenAI": object},
                    "litellm": {"completion": None}}.items():  # LLM clients KernelBench imports and never uses here
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules.setdefault(name, module)

import torch  # noqa: E402
from kernelbench.eval import eval_kernel_against_ref  # noqa: E402

out = {"problem": os.path.basename(problem), "solution": os.path.basename(solution), "precision": precision}
try:
    result = eval_kernel_against_ref(open(problem).read(), open(solution).read(), seed_num=42, num_correct_trials=5,
                                     num_perf_trials=100, measure_performance=True, build_dir=build, device=0,
                                     backend="cuda", precision=getattr(torch, precision))
    if result is None:
        out["result"] = None
    else:
        out.update(compiled=result.compiled, correctness=result.correctness, runtime_ms=result.runtime,
                   ref_runtime_ms=result.ref_runtime,
                   metadata={key: str(value)[:300] for key, value in (result.metadata or {}).items()})
        if result.runtime and result.runtime > 0 and result.ref_runtime and result.ref_runtime > 0:
            out["speedup"] = round(result.ref_runtime / result.runtime, 3)
except BaseException as error:
    out["exception"] = f"{type(error).__name__}: {str(error)[:400]}"
print("KBJSON " + json.dumps(out))
