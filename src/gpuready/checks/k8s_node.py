"""Kubernetes nodes whose GPUs the scheduler cannot see (`k8s.gpu_not_advertised`, from facts.log_facts.K8sNodeFacts):
`kubectl describe node` (or `-o yaml`) showing `nvidia.com/gpu: 0`, or no `nvidia.com/gpu` at all on a node labelled
as an NVIDIA GPU node, and the NVIDIA device plugin's own log saying why (no NVML in its container, no devices found).

A MIG node with the mixed strategy advertises `nvidia.com/gpu: 0` next to `nvidia.com/mig-…` resources: that is not
a fault.
"""

from __future__ import annotations

from gpuready.checks.log_evidence import quote
from gpuready.checks.registry import CheckContext, log_check
from gpuready.facts.log_facts import K8sNode, K8sNodeFacts
from gpuready.i18n import Said, finding_text, said
from gpuready.model import Finding, Status, Subject

GPU = "nvidia.com/gpu"
REFS = ["https://github.com/NVIDIA/k8s-device-plugin#prerequisites",
        "https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html",
        "NVIDIA/k8s-device-plugin#58 (maintainer: Capacity is every GPU, Allocatable the healthy ones)"]


@log_check("k8s.gpu_not_advertised")
def k8s_gpu_not_advertised(context: CheckContext) -> list[Finding]:
    """Each node advertises its GPUs as nvidia.com/gpu, and the device plugin found them."""
    k8s: K8sNodeFacts | None = context.facts.logs.k8s
    if k8s is None:
        return []
    found = [finding for node in k8s.nodes if (finding := _node_finding(context, node)) is not None]
    if k8s.plugin:
        kinds = sorted({error.kind for error, _ in k8s.plugin})
        details = list(dict.fromkeys(error.detail for error, _ in k8s.plugin))[:4]
        found.append(context.fail(said("k8s.gpu_not_advertised.plugin_no_gpu", details="; ".join(details)),
                                  observed={"kinds": kinds, "details": details},
                                  expected="the device plugin registers nvidia.com/gpu", refs=REFS,
                                  evidence=quote([line for _, line in k8s.plugin])))
    return found


def _gpu_label(node: K8sNode) -> str | Said | None:
    """The label that says the node has NVIDIA GPUs, as `key=value`; the PCI one with what it means."""
    labels = node.labels
    if labels.get("nvidia.com/gpu.present") == "true":
        product = labels.get("nvidia.com/gpu.product")
        return "nvidia.com/gpu.present=true" + (f", {product}" if product else "")
    for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.count"):
        if labels.get(key) not in (None, "", "0"):
            return f"{key}={labels[key]}"
    if labels.get("feature.node.kubernetes.io/pci-10de.present") == "true":
        return said("k8s.gpu_not_advertised.label.pci_10de")
    return None


def _node_finding(context: CheckContext, node: K8sNode) -> Finding | None:
    capacity, allocatable = node.sections.get("capacity"), node.sections.get("allocatable")
    read = [section for section in (capacity, allocatable) if section is not None]
    if not read:
        return None
    mig = {key: value for section in read for key, value in section.resources.items()
           if key.startswith("nvidia.com/mig-") and value > 0}
    has_capacity = capacity is not None and GPU in capacity.resources
    has_allocatable = allocatable is not None and GPU in allocatable.resources
    cap = capacity.resources.get(GPU) if capacity is not None else None
    alloc = allocatable.resources.get(GPU) if allocatable is not None else None
    label = _gpu_label(node)
    lines = sorted([line for section in read for line in section.lines] + node.label_lines,
                   key=lambda line: (line.source, line.number))
    observed = {"node": node.name, "capacity": cap, "allocatable": alloc,
                "label": label.english() if isinstance(label, Said) else label, "mig": mig or None}

    def finding(status: Status, text: Said, expected: str | None = None, evidence: list | None = None) -> Finding:
        return Finding(check_id=context.check_id, status=status, subject=Subject(host=node.name or context.host),
                       **finding_text(text), observed=observed, expected=expected, refs=REFS,
                       evidence=quote(evidence if evidence is not None else lines))
    if mig and not cap and not alloc:
        return finding(Status.PASS, _said("mig", node, mig=", ".join(f"{k}: {v}" for k, v in mig.items())))
    if (has_capacity and cap == 0) or (has_allocatable and alloc == 0):
        text = (_said("all_unhealthy", node, capacity=cap) if cap else
                _said("zero_labelled", node, label=label) if label else _said("zero", node))
        return finding(Status.FAIL, text, "nvidia.com/gpu equal to the node's GPUs")
    if label and not has_capacity and not has_allocatable and not mig \
            and all(section.closed and section.others >= 2 for section in read):
        return finding(Status.FAIL, _said("not_registered", node, label=label),
                       "nvidia.com/gpu in Capacity and Allocatable",
                       lines + [line for section in read for line in section.lines[:1]])
    if cap and alloc is not None and 0 < alloc < cap:
        return finding(Status.FAIL, _said("some_unhealthy", node, capacity=cap, allocatable=alloc,
                                          unhealthy=cap - alloc), f"nvidia.com/gpu: {cap} allocatable")
    if cap or alloc:
        return finding(Status.PASS, _said("advertised", node, gpus=alloc if alloc is not None else cap))
    return None


def _said(variant: str, node: K8sNode, **values: object) -> Said:
    """`k8s.gpu_not_advertised.<variant>` of a node by its name, or `.unnamed` ("The node …") when it has none."""
    return said(f"k8s.gpu_not_advertised.{variant}" + ("" if node.name else ".unnamed"), node=node.name, **values)
