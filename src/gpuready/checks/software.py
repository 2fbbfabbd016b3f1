"""The software stack: driver ↔ CUDA, torch's arch list, torch sees the GPUs, NCCL, container, env."""

from __future__ import annotations

import re

from gpuready.checks.registry import CheckContext, check, kernel_evidence
from gpuready.knowledge import driver_requirement, env_var_rules, version_tuple
from gpuready.model import Finding

_TORCH_INSTALL = "https://pytorch.org/get-started/locally/"


def _torch_problem(context: CheckContext) -> Finding | None:
    torch = context.facts.torch
    if torch is None:
        return context.skip("No torch facts in this run (torch.json).")
    if torch.version is None:
        return context.warn(f"PyTorch is not usable here: {torch.error or 'not installed'}.",
                            observed=torch.error, expected="torch >= 2.4 with CUDA",
                            fix=f"pip install torch (pick the CUDA build for this driver at {_TORCH_INSTALL})",
                            refs=[_TORCH_INSTALL])
    return None


@check("software.driver_cuda", "The driver supports torch's CUDA", needs=("torch", "driver_version"))
def software_driver_cuda(context: CheckContext) -> list[Finding]:
    torch, driver = context.facts.torch, context.facts.driver_version
    if problem := _torch_problem(context):
        return [problem]
    if not torch.cuda:
        return [context.fail(f"torch {torch.version} is a CPU-only build: it cannot use the GPUs.",
                             observed=torch.version, expected="a CUDA build",
                             fix=f"pip install torch --index-url https://download.pytorch.org/whl/cu128 (see {_TORCH_INSTALL})",
                             refs=[_TORCH_INSTALL])]
    if not version_tuple(driver):
        return [context.warn(f"The driver version {driver[:40]!r} is not a version number; torch's CUDA {torch.cuda} "
                             "not judged against it.", observed=driver, fix="Run `nvidia-smi` and collect again.")]
    requirement = driver_requirement(torch.cuda)
    if requirement is None:
        return [context.warn(f"torch is built with CUDA {torch.cuda}, which gpuready's table does not know; driver "
                             f"{driver} not judged.", observed=torch.cuda, fix="Compare with NVIDIA's CUDA release "
                             "notes table of minimum drivers.")]
    observed = f"driver {driver}, torch {torch.version} (CUDA {torch.cuda})"
    below_minimum = _older(driver, requirement.minimum)
    if below_minimum is None:
        return [context.warn(f"The driver version {driver} stops short of the {requirement.minimum} that torch's CUDA "
                             f"{torch.cuda} needs at least: whether it is new enough cannot be told.",
                             observed=observed, expected=f">= {requirement.minimum}",
                             fix="Run `nvidia-smi` (it prints the full driver version) and collect again.",
                             refs=[requirement.minimum_source])]
    if below_minimum:
        return [context.fail(f"Driver {driver} is too old for torch's CUDA {torch.cuda} (needs >= "
                             f"{requirement.minimum}): CUDA initialisation fails with 'driver version is insufficient'.",
                             observed=observed, expected=f">= {requirement.minimum}",
                             fix=f"Upgrade the driver to >= {requirement.full_feature or requirement.minimum}, or install "
                                 f"a torch built for an older CUDA ({_TORCH_INSTALL}).",
                             refs=[requirement.minimum_source])]
    if requirement.full_feature and _older(driver, requirement.full_feature) is not False:
        return [context.passed(f"Driver {driver} runs torch's CUDA {torch.cuda} through minor-version compatibility "
                               f"(>= {requirement.minimum}); features that need the {requirement.full_feature} driver "
                               "(e.g. JIT of newer PTX) are unavailable.", observed=observed,
                               expected=f">= {requirement.full_feature} for every feature",
                               refs=[requirement.minimum_source, requirement.full_feature_source or ""])]
    return [context.passed(f"Driver {driver} supports torch's CUDA {torch.cuda}.", observed=observed,
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


def _arch_supported(capability: str, arch_list: list[str]) -> tuple[bool, str]:
    """PyTorch's own rule: SASS for the same major (sm_XY with X = major, Y <= minor), or PTX at or below it."""
    major, minor = version_tuple(capability)
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", arch)
        if not match:
            continue
        kind, arch_major, arch_minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if kind == "sm" and arch_major == major and arch_minor <= minor and (not suffix or arch_minor == minor):
            return True, arch
        if kind == "compute" and (arch_major, arch_minor) <= (major, minor) and not suffix:
            return True, f"{arch} (PTX, JIT-compiled at first use)"
    return False, ""


@check("software.torch_arch", "torch has kernels for every GPU", needs=("torch",))
def software_torch_arch(context: CheckContext) -> list[Finding]:
    torch = context.facts.torch
    if problem := _torch_problem(context):
        return [problem]
    if torch.arch_list is None:
        return [context.skip("torch's arch list was not read (run without --fast to import torch).")]
    if not torch.arch_list:
        return [context.skip("torch reports no CUDA arch list (CPU build or CUDA unavailable).")]
    findings = []
    # Only `major.minor` capabilities are judged (the parsers let nothing else through).
    for capability in sorted({gpu.compute_capability for gpu in context.gpus
                              if gpu.compute_capability and len(version_tuple(gpu.compute_capability)) == 2}):
        supported, via = _arch_supported(capability, torch.arch_list)
        gpus = [gpu for gpu in context.gpus if gpu.compute_capability == capability]
        names = ", ".join(sorted({gpu.name or "?" for gpu in gpus}))
        if not supported:
            findings.append(context.fail(
                f"torch {torch.version} has no kernels for compute capability {capability} ({names}): 'no kernel image "
                "is available for execution on the device'.", observed=torch.arch_list, expected=f"sm_{capability.replace('.', '')}",
                fix=f"Install a torch build that lists sm_{capability.replace('.', '')} (newer CUDA wheels, e.g. cu128 for "
                    f"Blackwell): {_TORCH_INSTALL}", refs=["torch.cuda.get_arch_list(); torch/cuda/__init__.py _check_capability"]))
        else:
            findings.append(context.passed(f"Compute capability {capability} ({names}) runs on {via}.",
                                           observed=torch.arch_list))
    return findings or [context.skip("GPU compute capabilities are not known (nvml.json holds them).")]


@check("software.torch_sees_gpus", "torch sees every GPU", needs=("torch",))
def software_torch_sees_gpus(context: CheckContext) -> list[Finding]:
    torch = context.facts.torch
    if problem := _torch_problem(context):
        return [problem]
    if torch.device_count is None:
        if torch.error:
            return [context.fail(f"torch could not query CUDA: {torch.error}", observed=torch.error,
                                 fix="Run `python -c 'import torch; torch.cuda.init()'` to see the full error.")]
        return [context.skip("torch's device count was not read (run without --fast).")]
    visible = len(context.gpus)
    hidden = (context.facts.env or {}).get("CUDA_VISIBLE_DEVICES")
    if torch.device_count == 0:
        return [context.fail(f"torch sees no GPU while the driver shows {visible}.", observed=0, expected=visible,
                             fix="Check CUDA_VISIBLE_DEVICES, the driver/CUDA fit (software.driver_cuda) and "
                                 "`python -c 'import torch; torch.cuda.init()'`.")]
    if torch.device_count < visible and hidden is None:
        return [context.warn(f"torch sees {torch.device_count} of {visible} GPUs.", observed=torch.device_count,
                             expected=visible, fix="Check CUDA_VISIBLE_DEVICES and that no GPU is in MIG mode.")]
    return [context.passed(f"torch {torch.version} sees {torch.device_count} GPU(s)"
                           + (f" (CUDA_VISIBLE_DEVICES={hidden})." if hidden is not None else "."),
                           observed=torch.device_count, expected=visible)]


@check("software.nccl", "The NCCL torch uses", needs=("torch",))
def software_nccl(context: CheckContext) -> list[Finding]:
    torch = context.facts.torch
    if problem := _torch_problem(context):
        return [problem]
    system = sorted({match.group(1) for path in context.facts.system_libraries or []
                     if (match := re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)$", path))})
    env = context.facts.env or {}
    preload = " ".join(env.get(name, "") for name in ("LD_PRELOAD", "NCCL_LIBRARY", "TORCH_NCCL_LIBRARY"))
    if torch.nccl_version is None:
        if not torch.cuda:
            return [context.skip("torch is a CPU build: no NCCL.")]
        return [context.skip("torch's NCCL version was not read (run without --fast, or torch lacks NCCL).")]
    note = ""
    if system and any(version != torch.nccl_version for version in system):
        note = (f" A system libnccl {', '.join(system)} is also installed; torch uses its own, so this only "
                "matters for tools linked against the system one (e.g. nccl-tests).")
    if "nccl" in preload.lower():
        return [context.warn(f"torch's NCCL is {torch.nccl_version} but the environment preloads another NCCL "
                             f"({preload.strip()}).", observed=preload.strip(), expected=torch.nccl_version,
                             fix="Unset LD_PRELOAD unless the override is intended; mismatched NCCL builds hang.")]
    return [context.passed(f"torch uses NCCL {torch.nccl_version}.{note}", observed=torch.nccl_version)]


@check("software.container", "Container runtime and scheduler variables", needs_gpus=False)
def software_container(context: CheckContext) -> list[Finding]:
    host, env = context.facts.host, context.facts.env or {}
    runtime = host.container
    refused = [event for event in context.facts.kernel_log or [] if event.kind == "docker_no_gpu_runtime"]
    if refused:
        return [context.fail(
            "Docker has no NVIDIA runtime: `docker run --gpus …` fails (could not select device driver), so no "
            "container on this host gets a GPU, however healthy the GPUs are.", observed=refused[-1].line[:200],
            expected="the NVIDIA Container Toolkit configured for Docker",
            fix="Install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker && sudo "
                "systemctl restart docker`; check with `docker run --rm --gpus all ubuntu nvidia-smi`.",
            refs=["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html"],
            evidence=kernel_evidence(refused))]
    if runtime is None and context.facts.env is None:
        return [context.skip("No container facts in this run (cgroup.txt or env.txt holds them).")]
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
        return [context.warn("Inside a container without the NVIDIA runtime: GPUs are not passed in (a likely cause "
                             "of gpu.present).",
                             observed="; ".join(parts), fix="docker run --gpus all (NVIDIA Container Toolkit), or "
                             "request nvidia.com/gpu in the Kubernetes pod spec.",
                             refs=["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/"])]
    return [context.passed("; ".join(parts) + ".", observed={"container": runtime, "schedulers": schedulers})]


@check("software.env", "No environment variables that hurt multi-GPU training", needs=("env",), needs_gpus=False)
def software_env(context: CheckContext) -> list[Finding]:
    env = context.facts.env
    findings = []
    notes = []
    for rule in env_var_rules():
        value = env.get(rule["name"])
        if value is None:
            continue
        if "*" in rule["bad_values"] or value in rule["bad_values"]:
            text = f"{rule['name']}={value}: {rule['why']}"
            if rule["level"] == "warn":
                findings.append(context.warn(text + ".", observed=f"{rule['name']}={value}", expected="unset",
                                             fix=f"unset {rule['name']} (unless debugging)", refs=[rule["source"]]))
            else:
                notes.append(text)
    if not findings:
        message = "No environment variable slows or breaks NCCL/CUDA."
        if notes:
            message += " Noted: " + "; ".join(notes) + "."
        findings.append(context.passed(message))
    return findings
