"""The software stack: driver ↔ CUDA, torch's arch list, torch sees the GPUs, NCCL, container, env.

driver_cuda, torch_arch and nccl judge the machine's facts (nvml.json, torch.json, …) and, in `diagnose`, what a
job's logs say of the same things (facts.log_facts.TorchLogFacts `versions`: `driver too old`, the capability
warning, `undefined symbol: nccl…`, NCCL's `invalid device function`): one check each, one rule for both.
"""

from __future__ import annotations

import re

from gpuready.checks.log_evidence import NCCL_TROUBLESHOOTING, quote
from gpuready.checks.registry import CheckContext, check, kernel_evidence
from gpuready.facts.log_facts import Line, TorchLogFacts
from gpuready.i18n import Said, catalogue, finding_text, said
from gpuready.knowledge import driver_requirement, env_var_rules, load_table, version_tuple
from gpuready.model import Finding, Status, Subject

_TORCH_INSTALL = "https://pytorch.org/get-started/locally/"
TORCH_INDEX = "https://download.pytorch.org/whl/"

CHECK_OF_MISMATCH = {"driver_too_old": "software.driver_cuda", "forward_compat": "software.driver_cuda",
                     "arch": "software.torch_arch", "nccl_symbol": "software.nccl", "nccl_arch": "software.nccl"}
"""A software mismatch a log shows (facts/torch_errors.py `VersionMismatch.kind`) → the check that judges it."""


def first_of_each_kind(torch: TorchLogFacts, kinds: tuple[str, ...]) -> list[tuple]:
    """(the first mismatch, its line, every mismatch of its kind with its line) per kind among `kinds`, in the order
    the kinds first show in the logs."""
    done: set[str] = set()
    found = []
    for mismatch, line in torch.versions:
        if mismatch.kind in done or mismatch.kind not in kinds:
            continue
        done.add(mismatch.kind)
        found.append((mismatch, line, [item for item in torch.versions if item[0].kind == mismatch.kind]))
    return found


def _logged(context: CheckContext, kinds: tuple[str, ...], judge) -> list[Finding]:
    """`judge(context, torch, rank, mismatch, same)` per kind of mismatch among `kinds` the logs show."""
    torch = context.facts.logs.torch if context.facts.logs is not None else None
    if torch is None:
        return []
    return [judge(context, torch, torch.rank_of(line), mismatch, same)
            for mismatch, line, same in first_of_each_kind(torch, kinds)]


def _torch_problem(context: CheckContext) -> Finding | None:
    torch = context.facts.torch
    if torch is None:
        return context.skip(said("software.torch.not_read"))
    if torch.version is None:
        return context.warn(said("software.torch.unusable", error=torch.error) if torch.error else
                            said("software.torch.not_installed"),
                            observed=torch.error, expected="torch >= 2.4 with CUDA", refs=[_TORCH_INSTALL])
    return None


def _driver_cuda_in_logs(context: CheckContext) -> list[Finding]:
    """The driver is older than the CUDA the job's torch was built for (`found version 11040`, CUDA error 35), or
    CUDA's forward-compatibility libraries were loaded where they cannot work (error 804)."""
    return _logged(context, ("driver_too_old", "forward_compat"), _driver_in_logs) + _container_refused(context)


def _container_refused(context: CheckContext) -> list[Finding]:
    """The container toolkit refused an image whose NVIDIA_REQUIRE_CUDA (or driver) the host's driver does not meet
    (facts/host_log.py `ContainerRequirement`): the driver is too old for the image, the GPUs are fine."""
    host = context.facts.logs.host if context.facts.logs is not None else None
    found = []
    for key in ("cuda", "driver"):
        refused = [(required, line) for required, line in (host.requirements if host else []) if required.key == key]
        if not refused:
            continue
        need = max((required.need for required, _ in refused), key=_version_key)
        have = next((required.have for required, _ in refused if required.have), None) or (
            context.facts.cuda_driver_version if key == "cuda" else context.facts.driver_version)
        found.append(context.fail(
            said(f"software.driver_cuda.container_{key}" + ("" if have else ".unknown"), need=need, have=have,
                 driver=context.facts.driver_version or "?"),
            observed={"required": f"{key}>={need}", "host": have, "driver": context.facts.driver_version},
            expected=f"{key} >= {need}", refs=[_CONTAINER_REQUIRE_REF],
            evidence=quote([line for _, line in refused])))
    return found


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


_CONTAINER_REQUIRE_REF = ("NVIDIA libnvidia-container / nvidia-container-toolkit requirement check "
                          "(NVIDIA_REQUIRE_CUDA: 'unsatisfied condition: cuda>=X'); CUDA compatibility: "
                          "https://docs.nvidia.com/deploy/cuda-compatibility/")


def _driver_in_logs(context: CheckContext, torch: TorchLogFacts, rank: int | None, mismatch, same: list) -> Finding:
    build = torch.torch_cuda[0] if torch.torch_cuda else None
    lines = [item[1] for item in same] + ([torch.torch_cuda[1]] if torch.torch_cuda else [])
    driver_cuda = next((m.driver_cuda for m, _ in same if m.driver_cuda), None)
    driver_api = next((m.driver_api for m, _ in same if m.driver_api is not None), None)
    observed: dict = {"kind": mismatch.kind, "driver_supports_cuda": driver_cuda, "driver_api": driver_api,
                      "cuda_error": mismatch.cuda_error, "torch_cuda": build}
    requirement = driver_requirement(build) if build else None
    if requirement:
        need = said("software.driver_cuda.log.need.full" if requirement.full_feature else
                    "software.driver_cuda.log.need.minimum", minimum=requirement.minimum,
                    full_feature=requirement.full_feature, build=build)
        refs = [requirement.minimum_source] + ([requirement.full_feature_source]
                                               if requirement.full_feature_source else [])
        observed["required_driver"] = requirement.minimum
    else:
        need = said("software.driver_cuda.log.need.floors", floors=_driver_floors())
        refs = ["src/gpuready/knowledge/cuda_driver.toml"]
    built = said("software.driver_cuda.log.built", build=build) if build else ""
    if mismatch.kind == "forward_compat":
        text = said("software.driver_cuda.log.forward_compat", built=built, need=need)
        refs = refs + ["https://docs.nvidia.com/deploy/cuda-compatibility/ (forward compatibility: data-centre "
                       "GPUs only)"]
    else:
        supports = said("software.driver_cuda.log.supports", driver_cuda=driver_cuda,
                        driver_api=driver_api) if driver_cuda else ""
        alt = said("software.driver_cuda.log.older_wheel", driver_cuda=driver_cuda,
                   index="cu" + driver_cuda.replace(".", "")) if driver_cuda else ""
        text = said("software.driver_cuda.log.too_old", supports=supports, built=built, need=need, alt=alt)
    return Finding(check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host, rank=rank),
                   **finding_text(text), observed=observed,
                   expected=f">= {requirement.minimum}" if requirement else None, refs=refs, evidence=quote(lines))


def _driver_floors() -> list[Said]:
    """`11.x needs >= 450.80.02`, `12.x needs >= 525.60.13`, … from knowledge/cuda_driver.toml."""
    rows = sorted(load_table("cuda_driver").get("minor_compat", []), key=lambda row: int(row["cuda_major"]))
    return [said("software.driver_cuda.log.floor", major=row["cuda_major"], driver=row["min_driver_linux"])
            for row in rows]


@check("software.driver_cuda", needs=("torch", "driver_version"), logs=_driver_cuda_in_logs)
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


_ARCH = re.compile(r"(sm|compute)_(\d+)(\d)([af]?)")


def runs_on(arch: str, major: int, minor: int) -> bool:
    """Whether code built for `arch` (an entry of torch.cuda.get_arch_list(), a wheel's list) runs on compute
    capability major.minor. SASS `sm_XY` runs on X.Z for Z >= Y (binary compatibility within a major); PTX
    `compute_XY` on any capability >= X.Y, JIT-compiled by the driver. Architecture-specific targets (`sm_90a`,
    `compute_90a`) run on X.Y alone: their PTX is not forward compatible (PTX ISA, target `a` suffix). Family-specific
    targets (`sm_100f`, `compute_100f`, CUDA 12.9) run on the later minors of the same major (CUDA Programming Guide,
    Feature Availability). A name that is not a CUDA architecture (`gfx90a`) runs nothing."""
    match = _ARCH.fullmatch(arch)
    if not match:
        return False
    kind, arch_major, arch_minor, suffix = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
    if suffix == "a":
        return (major, minor) == (arch_major, arch_minor)
    if kind == "sm" or suffix == "f":
        return major == arch_major and minor >= arch_minor
    return (major, minor) >= (arch_major, arch_minor)


def _arch_supported(capability: str, arch_list: list[str]) -> tuple[bool, str, bool]:
    """(supported, the first arch of the list that runs on `capability`, whether that is PTX, JIT-compiled at first
    use), by the rule of runs_on."""
    major, minor = version_tuple(capability)
    for arch in arch_list:
        if runs_on(arch, major, minor):
            return True, arch, arch.startswith("compute_")
    return False, "", False


def _capability_of(arch: str | None) -> tuple[int, int] | None:
    """`sm_120` → (12, 0), `sm_86` → (8, 6): the capability an architecture name is for."""
    match = _ARCH.fullmatch(arch or "")
    return (int(match.group(2)), int(match.group(3))) if match else None


def wheel_for(arch: str | None) -> dict | None:
    """The oldest PyTorch CUDA wheel index (knowledge/torch_wheels.toml) with kernels for the GPU `arch` names."""
    device = _capability_of(arch)
    if device is None:
        return None
    for row in load_table("torch_wheels")["wheel"]:
        if any(runs_on(built, *device) for built in row["archs"]):
            return row
    return None


def _torch_arch_in_logs(context: CheckContext) -> list[Finding]:
    """torch's capability warning (`sm_120 is not compatible with the current PyTorch installation`) or `no kernel
    image is available`: the wheel to install instead."""
    return _logged(context, ("arch",), _arch_in_logs)


def _arch_in_logs(context: CheckContext, torch: TorchLogFacts, rank: int | None, _mismatch, same: list) -> Finding:
    warning = next((m for m, _ in same if m.arch), same[0][0])
    lines = [line for _, line in same]
    arch, name, supported = warning.arch, warning.gpu_name, list(warning.supported)
    build = torch.torch_cuda[0] if torch.torch_cuda else None
    wheel = wheel_for(arch)
    observed = {"kind": "arch", "arch": arch, "gpu_name": name, "supported": supported, "torch_cuda": build,
                "wheel_index": wheel["index"] if wheel else None}
    refs = ["torch/cuda/__init__.py (_check_capability: the capability warning)"]
    values: dict[str, object] = {"arch": arch}
    if arch:
        values["gpu"] = said("software.torch_arch.log.gpu." + ("named" if name else "unnamed"), name=name, arch=arch)
        values["supports"] = said("software.torch_arch.log.supports", archs=" ".join(supported)) if supported else ""
    if wheel:
        requirement = driver_requirement(wheel["cuda"])
        msg_id = "software.torch_arch.log.wheel"
        values.update(index_url=f"{TORCH_INDEX}{wheel['index']}", cuda=wheel["cuda"], driver=said(
            "software.torch_arch.log.wheel_driver" + ("_full" if requirement.full_feature else ""),
            minimum=requirement.minimum, full_feature=requirement.full_feature, cuda=wheel["cuda"])
            if requirement else "")
        refs.append(wheel["source"])
        if requirement:
            refs.append(requirement.minimum_source)
    elif arch:
        msg_id = "software.torch_arch.log.no_wheel"
        refs.append("src/gpuready/knowledge/torch_wheels.toml")
    else:
        msg_id = "software.torch_arch.log.no_kernel_image"
        values["indexes"] = "; ".join(f"{row['index']}: {' '.join(row['archs'])}"
                                      for row in load_table("torch_wheels")["wheel"])
        refs.append("src/gpuready/knowledge/torch_wheels.toml")
    if torch.torch_cuda:
        lines = lines + [torch.torch_cuda[1]]
    return Finding(check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host, rank=rank),
                   **finding_text(said(msg_id, **values)), observed=observed,
                   expected=f"{arch} in torch.cuda.get_arch_list()" if arch else None,
                   refs=refs, evidence=quote(lines))


@check("software.torch_arch", needs=("torch",), logs=_torch_arch_in_logs)
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


def _nccl_in_logs(context: CheckContext) -> list[Finding]:
    """The libnccl loaded lacks a symbol torch needs (`undefined symbol: ncclCommRegister`), or NCCL has no kernels
    for the GPU (`Cuda failure 'invalid device function'`)."""
    return _logged(context, ("nccl_symbol", "nccl_arch"), _nccl_log_finding)


def _nccl_log_finding(context: CheckContext, torch: TorchLogFacts, rank: int | None, mismatch, same: list) -> Finding:
    lines: list[Line] = [item[1] for item in same]
    if mismatch.kind == "nccl_symbol":
        return Finding(
            check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host, rank=rank),
            **finding_text(said("software.nccl.log.undefined_symbol", symbol=mismatch.symbol)),
            observed={"kind": mismatch.kind, "symbol": mismatch.symbol, "library": mismatch.library},
            refs=[NCCL_TROUBLESHOOTING], evidence=quote(lines))
    banners = list(torch.nccl_versions.items())
    versions = [version for version, _line in banners]
    return Finding(
        check_id=context.check_id, status=Status.FAIL, subject=Subject(host=context.host, rank=rank),
        **finding_text(said("software.nccl.log.no_kernels", versions=said(
            "software.nccl.log.no_kernels.versions", versions=", ".join(versions)) if versions else "")),
        observed={"kind": mismatch.kind, "nccl_versions": versions,
                  "torch_cuda": torch.torch_cuda[0] if torch.torch_cuda else None},
        expected="an NCCL built for this GPU's architecture",
        refs=[NCCL_TROUBLESHOOTING,
              "https://docs.nvidia.com/deeplearning/nccl/release-notes/rel_2-7-3.html (2.7.3: 'Added "
              "support for A100 GPU': an NCCL release adds each GPU generation)"],
        evidence=quote(lines + [line for _version, line in banners[:2]]))


@check("software.nccl", needs=("torch",), logs=_nccl_in_logs)
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


_NVML_UNKNOWN = "failed to initialize nvml: unknown error"
_DEVICE_ACCESS_REF = ("NVIDIA/nvidia-container-toolkit#48 (NVIDIA notice: containers losing access to GPUs with "
                      "'Failed to initialize NVML: Unknown Error' after systemd re-applies cgroup device rules)")


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
    error = context.facts.gpu_probe_error or ""
    if _NVML_UNKNOWN in error.lower() and context.facts.gpus:
        # NVML cannot start ("Unknown Error") where another capture of the same evidence lists the GPUs: the view
        # that failed lost the device nodes, not the driver (NVIDIA/nvidia-container-toolkit#48, NVIDIA's notice)
        return [context.fail(said("software.container.device_access_lost", error=error[:200],
                                  count=len(context.facts.gpus)),
                             observed={"error": error[:200], "gpus_listed_elsewhere": len(context.facts.gpus)},
                             expected="NVML answers where the GPUs are listed", refs=[_DEVICE_ACCESS_REF])]
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
