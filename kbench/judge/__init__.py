"""What the judge runs: one evaluation in the worker process, from the problem to the verdict.

Once imported, this package is the attribute `kbench.judge`, where the API's function `kbench.judge` is looked for
before: so calling the package calls that function (kbench.api.judge)."""

import sys
import types


class _CallsTheApi(types.ModuleType):
    def __call__(self, *arguments, **keywords):
        from kbench.api import judge
        return judge(*arguments, **keywords)


sys.modules[__name__].__class__ = _CallsTheApi
