"""One NVLink domain across nodes: the cluster UUID and clique id each Grace Blackwell tray's GPUs registered in.

What a GPU reports (NVML `nvmlGpuFabricInfo_v3_t`, nvidia-smi -q's Fabric block): `clusterUuid`, the NVLink domain it
belongs to (one NVL72 rack, or two NVL36 racks cabled as one), and `cliqueId`, the fabric clique within it: the NVLink
partition the rack's switch trays put it in. GPUs reach each other over NVLink (and share memory through IMEX) only
where both agree; a job launched across two cliques or two clusters runs over the network between them.

The rule, over the nodes given to `fleet` (the nodes launched together):

- A node takes part where its GPUs are GB200/GB300 NVL trays (gpus.toml `nvlink_via = "nvlink_switch_system"`,
  checks/fabric_mnnvl.py) and report fabric values. HGX/DGX boards (H100, H200, B200) have their NVSwitches inside
  the node and report a zero UUID by design: they form no domain and get nothing.
- A node whose GPUs report more than one (cluster, clique) disagrees with itself: `mixed`.
- A node whose GPUs report clique 0 or a zero UUID (not registered: Azure/azhpc-images#506) while another node of
  the fleet is registered: `unregistered`. Where no node is registered there is no domain to compare with (each
  node's own `nvlink.fabric_clique` already fails).
- Several cluster UUIDs, each held by two nodes or more, are several racks: not an error. A UUID held by one node
  alone while another is held by two or more is that node's mistake (a tray whose fabric registered elsewhere):
  `cluster`.
- Within one cluster UUID held by two nodes or more, every node should be in one clique: the clique most of them
  hold is the domain's; a node in another is `clique`. Where the nodes split evenly between cliques, no side is the
  majority: each node is named (`clique_split`).

Sources: NVML nvmlGpuFabricInfo_v3_t (https://docs.nvidia.com/deploy/nvml-api/); NVIDIA GB200 NVL Partition User
Guide DU-12143-001 (a GPU belongs to one partition, all GPUs of a partition within one NVLink domain:
https://docs.nvidia.com/multi-node-nvlink-systems/partition-guide-v1-2.pdf); NVIDIA IMEX guide (an IMEX domain is the
nodes of one NVLink domain: https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Hashable

from gpuready.checks.fabric_mnnvl import in_a_clique, switch_system_tray
from gpuready.facts.types import GpuFacts

MAX_FABRIC_GPUS = 72
"""GPUs of one report whose fabric values the fleet keeps (an NVL72 rack's count; a tray has 4): a report inventing
GPUs cannot grow the fleet's memory."""
MAX_UUID_CHARS = 64
CLIQUE_LIMIT = 1 << 32
"""cliqueId is an unsigned int."""
DOMAIN_REFS = ["NVML nvmlGpuFabricInfo_v3_t (clusterUuid, cliqueId): https://docs.nvidia.com/deploy/nvml-api/",
               "NVIDIA GB200 NVL Partition User Guide DU-12143-001: "
               "https://docs.nvidia.com/multi-node-nvlink-systems/partition-guide-v1-2.pdf"]

Pair = tuple[str | None, int | None]
"""(cluster UUID, clique id) one GPU reports."""


@dataclass(frozen=True)
class NodeFabric:
    """What the fleet keeps of a node's NVLink registration (from a report's facts.gpus)."""
    mnnvl: bool
    """Its GPUs are Grace Blackwell NVL trays, which must register in a clique of a cluster."""
    gpus: tuple[tuple[int, str | None, int | None], ...]
    """(GPU index, cluster UUID, clique id) of each GPU that reported a fabric value."""

    def pairs(self) -> dict[Pair, list[int]]:
        """Each (cluster, clique) its GPUs report, with the GPUs that report it."""
        pairs: dict[Pair, list[int]] = {}
        for index, uuid, clique in self.gpus:
            pairs.setdefault((uuid, clique), []).append(index)
        return pairs


def fabric_of(facts: dict[str, Any]) -> NodeFabric | None:
    """The node's fabric values from a report's `facts`, or None where no GPU reported one."""
    gpus = facts.get("gpus") if isinstance(facts.get("gpus"), list) else []
    kept, mnnvl = [], False
    for position, gpu in enumerate(gpus[:MAX_FABRIC_GPUS]):
        if not isinstance(gpu, dict):
            continue
        uuid, clique = _uuid(gpu.get("fabric_cluster_uuid")), _clique(gpu.get("fabric_clique_id"))
        if uuid is None and clique is None:
            continue
        index = gpu.get("index")
        name = gpu.get("name")
        mnnvl = mnnvl or (isinstance(name, str) and switch_system_tray(GpuFacts(index=0, bus_id=None, name=name)))
        kept.append((index if isinstance(index, int) and not isinstance(index, bool) else position, uuid, clique))
    return NodeFabric(mnnvl=mnnvl, gpus=tuple(kept)) if kept else None


def _uuid(value: Any) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_UUID_CHARS or not value.isprintable():
        return None
    return value.strip().lower()


def _clique(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < CLIQUE_LIMIT else None


def judge_domains(nodes: list[tuple[Hashable, NodeFabric | None]]) -> tuple[list[dict], dict[Hashable, dict]]:
    """The NVLink domains the registered nodes form (largest first) and, per node key, its finding (see the rule
    above) as a JSON-ready dict: `kind`, its own values, and the majority's."""
    taking = {key: fabric.pairs() for key, fabric in nodes if fabric is not None and fabric.mnnvl}
    registered = {key: next(iter(pairs)) for key, pairs in taking.items()
                  if len(pairs) == 1 and _registered(next(iter(pairs)))}
    counts = Counter(registered.values())
    domains = [{"cluster_uuid": uuid, "clique_id": clique, "nodes": count}
               for (uuid, clique), count in sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))]
    if not registered:
        return domains, {key: _mixed(pairs, None) for key, pairs in taking.items() if len(pairs) > 1}
    majority = domains[0]
    found: dict[Hashable, dict] = {}
    for key, pairs in taking.items():
        if len(pairs) > 1:
            found[key] = _mixed(pairs, majority)
        elif key not in registered:
            uuid, clique = next(iter(pairs))
            found[key] = {"kind": "unregistered", "cluster_uuid": uuid, "clique_id": clique, "majority": majority}
    found.update(_outliers(registered, majority))
    return domains, found


def _registered(pair: Pair) -> bool:
    uuid, clique = pair
    return in_a_clique(clique, uuid)


def _mixed(pairs: dict[Pair, list[int]], majority: dict | None) -> dict:
    return {"kind": "mixed", "majority": majority,
            "gpus": [{"cluster_uuid": uuid, "clique_id": clique, "gpus": indices}
                     for (uuid, clique), indices in sorted(pairs.items(), key=lambda item: str(item[0]))]}


def _outliers(registered: dict[Hashable, Pair], majority: dict) -> dict[Hashable, dict]:
    """Nodes alone in their cluster while others share one; nodes outside their cluster's majority clique."""
    by_uuid: dict[str, dict[Hashable, int]] = {}
    for key, (uuid, clique) in registered.items():
        by_uuid.setdefault(uuid, {})[key] = clique
    shared = max(len(members) for members in by_uuid.values()) >= 2
    found: dict[Hashable, dict] = {}
    for uuid, members in by_uuid.items():
        if len(members) == 1:
            if shared:
                (key, clique), = members.items()
                found[key] = {"kind": "cluster", "cluster_uuid": uuid, "clique_id": clique, "majority": majority}
            continue
        cliques = Counter(members.values()).most_common()
        if len(cliques) == 1:
            continue
        top, top_count = cliques[0]
        if cliques[1][1] == top_count:
            split = [{"clique_id": clique, "nodes": count} for clique, count in sorted(cliques)]
            found.update({key: {"kind": "clique_split", "cluster_uuid": uuid, "clique_id": clique, "cliques": split}
                          for key, clique in members.items()})
            continue
        local = {"cluster_uuid": uuid, "clique_id": top, "nodes": top_count}
        found.update({key: {"kind": "clique", "cluster_uuid": uuid, "clique_id": clique, "majority": local}
                      for key, clique in members.items() if clique != top})
    return found
