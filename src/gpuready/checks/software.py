"""The software stack: driver ↔ CUDA, torch's arch list, torch sees the GPUs, NCCL, container, env."""

from __future__ import annotations

import re

from gpuready.checks.registry import CheckContext, check, kernel_evidence
from gpuready.i18n import catalogue, said
from gpuready.knowledge import driver_requirement, env_var_rules, version_tuple
from gpuready.model import Finding

_TORCH_INSTALL = "https://pytorch.org/get-started/locally/"


def _torch_problem(context: CheckContext) -> Finding | None:
    torch = context.facts.torch
    if torch is None:
        return context.skip(said("software.torch.not_read"))
    if torch.version is None:
        return context.warn(said("software.torch.unusable", error=torch.error) if torch.error else
                            said("software.torch.not_installed"),
                            observed=torch.error, expected="torch >= 2.4 with CUDA", refs=[_TORCH_INSTALL])
    return None


@check("software.driver_cuda", needs=("torch", "driver_version"))
def software_driver_cuda(context: CheckContext) -> list[Finding]:
    """The driver supports torch's CUDA."""
    torch, driver = context.facts.torch, context.facts.driver_version
    if problem := _torch_problem(context):
        return [problem]
    if not torch.cuda:
        return [context.fail(said("software.driver_cuda.cpu_only", torch=torch.version),
                             observed=torch.version, expected="a CUDA build", refs=[_TORCH_INSTALL])]
    if not version_tuple(driver):
        return [context.warn(said("software.driver_cuda.not_a_version", driver=repr(driver[:40]), cuda=torch.cuda),
                             observed=driver)]
    requirement = driver_requirement(torch.cuda)
    if requirement is None:
        return [context.warn(said("software.driver_cuda.unknown_cuda", cuda=torch.cuda, driver=driver),
                             observed=torch.cuda)]
    versions = {"driver": driver, "cuda": torch.cuda, "minimum": requirement.minimum}
    observed = f"driver {driver}, torch {torch.version} (CUDA {torch.cuda})"
    below_minimum = _older(driver, requirement.minimum)
    if below_minimum is None:
        return [context.warn(said("software.driver_cuda.short_version", **versions),
                             observed=observed, expected=f">= {requirement.minimum}",
                             refs=[requirement.minimum_source])]
    if below_minimum:
        return [context.fail(said("software.driver_cuda.too_old", **versions,
                                  upgrade_to=requirement.full_feature or requirement.minimum),
                             observed=observed, expected=f">= {requirement.minimum}",
                             refs=[requirement.minimum_source])]
    if requirement.full_feature and _older(driver, requirement.full_feature) is not False:
        return [context.passed(said("software.driver_cuda.minor_compat", **versions,
                                    full_feature=requirement.full_feature), observed=observed,
                               expected=f">= {requirement.full_feature} for every feature",
                               refs=[requirement.minimum_source, requirement.full_feature_source or ""])]
    return [context.passed(said("software.driver_cuda.pass", **versions), observed=observed,
                           expected=f">= {requirement.full_feature or requirement.minimum}",
                           refs=[requirement.full_feature_source or requirement.minimum_source])]


def _older(version: str, than: str) -> bool | None:
    """Whether driver `version` is below `than`, field by field as the table says (`455.23` < `455.23.04`); None for
    a version without a dot (no driver has one) whose number is the one `than` starts with (`580` against `580.65.06`):
    that cannot be told."""
    mine, theirs = version_tuple(version), version_tuple(than)
    if len(mine) == 1 and len(theirs) > 1 and mine[0] == theirs[0]:
        return None
    return mine < theirs


def _arch_supported(capability: str, arch_list: list[str]) -> tuple[bool, str, bool]:
    """PyTorch's own rule: SASS for the same major (sm_XY with X = major, Y <= minor), or PTX at or below it.
    (supported, the arch that runs it, whether that is PTX, JIT-compiled at first use)."""
    major, minor = version_tuple(capability)
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", arch)
        if not match:
            continue
        kind, arch_major, arch_minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if kind == "sm" and arch_major == major and arch_minor <= minor and (not suffix or arch_minor == minor):
            return True, arch, False
        if kind == "compute" and (arch_major, arch_minor) <= (major, minor) and not suffix:
            return True, arch, True
    return False, "", False


@check("software.torch_arch", needs=("torch",))
def software_torch_arch(context: CheckContext) -> list[Finding]:
    """torch has kernels for every GPU."""
    torch = context.facts.torch
    if problem := _torch_problem(context):
        return [problem]
    if torch.arch_list is None:
        return [context.skip(said("software.torch_arch.not_read"))]
    if not torch.arch_list:
        return [context.skip(said("software.torch_arch.empty"))]
    findings = []
    # Only `major.minor` capabilities are judged (the parsers let nothing else through).
    for capability in sorted({gpu.compute_capability for gpu in context.gpus
                              if gpu.compute_capability and len(version_tuple(gpu.compute_capability)) == 2}):
        supported, via, ptx = _arch_supported(capability, torch.arch_list)
        gpus = [gpu for gpu in context.gpus if gpu.compute_capability == capability]
        names = ", ".join(sorted({gpu.name or "?" for gpu in gpus}))
        if not supported:
            findings.append(context.fail(
                said("software.torch_arch.no_kernels", torch=torch.version, capability=capability, names=names,
                     sm=f"sm_{capability.replace('.', '')}"),
                observed=torch.arch_list, expected=f"sm_{capability.replace('.', '')}",
                refs=["torch.cuda.get_arch_list(); torch/cuda/__init__.py _check_capability"]))
        else:
            findings.append(context.passed(said(f"software.torch_arch.runs{'_ptx' if ptx else ''}",
                                                capability=capability, names=names, arch=via),
                                           observed=torch.arch_list))
    return findings or [context.skip(said("software.torch_arch.unknown"))]


@check("software.torch_sees_gpus", needs=("torch",))
def software_torch_sees_gpus(context: CheckContext) -> list[Finding]:
    """torch sees every GPU."""
    torch = context.facts.torch
    if problem := _torch_problem(context):
        return [problem]
    if torch.device_count is None:
        if torch.error:
            return [context.fail(said("software.torch_sees_gpus.query_failed", error=torch.error), observed=torch.error)]
        return [context.skip(said("software.torch_sees_gpus.not_read"))]
    visible = len(context.gpus)
    hidden = (context.facts.env or {}).get("CUDA_VISIBLE_DEVICES")
    if torch.device_count == 0:
        return [context.fail(said("software.torch_sees_gpus.none", visible=visible), observed=0, expected=visible)]
    if torch.device_count < visible and hidden is None:
        return [context.warn(said("software.torch_sees_gpus.some", count=torch.device_count, visible=visible),
                             observed=torch.device_count, expected=visible)]
    return [context.passed(said(f"software.torch_sees_gpus.pass{'' if hidden is None else '_visible_devices'}",
                                torch=torch.version, count=torch.device_count, visible_devices=hidden),
                           observed=torch.device_count, expected=visible)]


@check("software.nccl", needs=("torch",))
def software_nccl(context: CheckContext) -> list[Finding]:
    """The NCCL torch uses."""
    torch = context.facts.torch
    if problem := _torch_problem(context):
        return [problem]
    system = sorted({match.group(1) for path in context.facts.system_libraries or []
                     if (match := re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", path))})
    env = context.facts.env or {}
    preload = " ".join(env.get(name, "") for name in ("LD_PRELOAD", "NCCL_LIBRARY", "TORCH_NCCL_LIBRARY"))
    if torch.nccl_version is None:
        if not torch.cuda:
            return [context.skip(said("software.nccl.cpu_build"))]
        return [context.skip(said("software.nccl.not_read"))]
    if "nccl" in preload.lower():
        return [context.warn(said("software.nccl.preloaded", nccl=torch.nccl_version, preload=preload.strip()),
                             observed=preload.strip(), expected=torch.nccl_version)]
    # `_system`: a system libnccl of another version is installed too
    other = system and any(version != torch.nccl_version for version in system)
    return [context.passed(said(f"software.nccl.pass{'_system' if other else ''}", nccl=torch.nccl_version,
                                system=", ".join(system)), observed=torch.nccl_version)]


@check("software.container", needs_gpus=False)
def software_container(context: CheckContext) -> list[Finding]:
    """Container runtime and scheduler variables."""
    host, env = context.facts.host, context.facts.env or {}
    runtime = host.container
    refused = [event for event in context.facts.kernel_log or [] if event.kind == "docker_no_gpu_runtime"]
    if refused:
        return [context.fail(
            said("software.container.no_docker_runtime"), observed=refused[-1].line[:200],
            expected="the NVIDIA Container Toolkit configured for Docker",
            refs=["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"],
            evidence=kernel_evidence(refused))]
    if runtime is None and context.facts.env is None:
        return [context.skip(said("software.container.not_read"))]
    schedulers = [name for name, prefix in (("Slurm", "SLURM_JOB_ID"), ("Kubernetes", "KUBERNETES_SERVICE_HOST"))
                  if prefix in env]
    nvidia_runtime = "NVIDIA_VISIBLE_DEVICES" in env
    parts = [f"container: {runtime}" if runtime and runtime != "none" else "not in a container"
             if runtime == "none" else "container not determined"]
    if schedulers:
        parts.append("scheduler: " + ", ".join(schedulers))
    if runtime and runtime != "none":
        parts.append("NVIDIA runtime variables present" if nvidia_runtime else "no NVIDIA_VISIBLE_DEVICES")
    if runtime and runtime not in ("none", None) and not nvidia_runtime and not context.facts.gpus:
        return [context.warn(said("software.container.no_gpus_passed"), observed="; ".join(parts),
                             refs=["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/"])]
    # The catalogue variant of `parts`: where it runs, a scheduler, the NVIDIA runtime (inside a container).
    where = "in_container" if runtime and runtime != "none" else "not_in_container" if runtime == "none" else \
        "undetermined"
    variant = where + ("_scheduler" if schedulers else "") + (
        ("_nvidia_runtime" if nvidia_runtime else "_no_nvidia_runtime") if where == "in_container" else "")
    return [context.passed(said(f"software.container.{variant}", runtime=runtime, schedulers=", ".join(schedulers)),
                           observed={"container": runtime, "schedulers": schedulers})]


@check("software.env", needs=("env",), needs_gpus=False)
def software_env(context: CheckContext) -> list[Finding]:
    """No environment variables that hurt multi-GPU training."""
    env = context.facts.env
    known = catalogue("en")  # each variable of env_vars.toml has its ids; one added since says its `why` in English
    findings = []
    notes: dict[str, str] = {}
    for rule in env_var_rules():
        name, value = rule["name"], env.get(rule["name"])
        if value is None:
            continue
        if "*" in rule["bad_values"] or value in rule["bad_values"]:
            if rule["level"] == "warn":
                text = said(f"software.env.set_{name}", value=value) if f"software.env.set_{name}" in known else \
                    said("software.env.set", name=name, value=value, why=rule["why"])
                findings.append(context.warn(text, observed=f"{name}={value}", expected="unset", refs=[rule["source"]]))
            else:
                notes[name] = value
    if not findings:
        noted = f"software.env.pass_noted_{'_'.join(notes)}"  # the variables noted, in the table's order
        if not notes:
            findings.append(context.passed(said("software.env.pass")))
        elif noted in known:
            findings.append(context.passed(said(noted, **notes)))
        else:
            why = {rule["name"]: rule["why"] for rule in env_var_rules()}
            findings.append(context.passed(said("software.env.pass_noted", notes="; ".join(
                f"{name}={value}: {why[name]}" for name, value in notes.items()))))
    return findings
