"""Which devices a run evaluates on, and with which executor, from the command line's options."""

from __future__ import annotations


class DeviceError(ValueError):
    """The options ask for devices this machine or cluster does not have (a usage error)."""


def executor_and_devices(name: str, ray_address: str | None, requested: str, gpus: str | None):
    """The executor of a sweep and the devices it evaluates on."""
    from kbench.schedule.executor import LocalExecutor

    if name == "local":
        if ray_address:
            raise DeviceError("--ray-address needs --executor ray")
        return LocalExecutor(), devices_for(requested, gpus)
    if gpus:
        raise DeviceError("--gpus is for --executor local; Ray places evaluations on the cluster's GPUs")
    from kbench.schedule.ray_executor import INSTALL_HINT, RayExecutor

    try:
        executor = RayExecutor(ray_address)
    except ModuleNotFoundError as error:
        if error.name != "ray":
            raise
        raise DeviceError(INSTALL_HINT)
    except ConnectionError as error:
        raise DeviceError(f"--ray-address {ray_address}: {error}")
    try:
        return executor, [executor.device_for(requested)]
    except ValueError as error:
        raise DeviceError(str(error))


def devices_for(requested: str, gpus: str | None) -> list[str]:
    """The devices evaluations run on: every visible GPU (or those --gpus names), else the CPU."""
    import torch

    device = checked_device(requested)
    if device == "cpu":
        if gpus:
            raise DeviceError("--gpus needs a CUDA device")
        return ["cpu"]
    if requested != "auto" and gpus is None:
        return [device]
    count = torch.cuda.device_count()
    if gpus is None:
        return [f"cuda:{index}" for index in range(count)]
    try:
        indices = list(range(int(gpus))) if "," not in gpus and len(gpus) <= 2 and int(gpus) > 0 else \
            [int(part) for part in gpus.split(",") if part]
    except ValueError:
        raise DeviceError(f"--gpus {gpus}: expected a count (2) or indices (0,1)")
    if not indices or any(index < 0 or index >= count for index in indices):
        raise DeviceError(f"--gpus {gpus}: {count} CUDA device(s) visible")
    return [f"cuda:{index}" for index in indices]


def checked_device(requested: str) -> str:
    import torch

    from kbench.schedule.child import resolve_device

    device = resolve_device(requested)
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(f"--device {requested}: no CUDA device here; use --device cpu")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"--device {requested}: only {torch.cuda.device_count()} CUDA device(s)")
    elif device != "cpu":
        raise DeviceError(f"--device {requested}: expected auto, cpu, cuda or cuda:N")
    return device
