"""The fixed names of a bundle's files and the command each one records."""

from __future__ import annotations

# file name → the command (or source) that wrote it, as documented in the README.
BUNDLE_FILES: dict[str, str] = {
    "nvml.json": "NVML queries through nvidia-ml-py (format gpuready-nvml v2; v1 read too)",
    "nvidia-smi.txt": "nvidia-smi",
    "nvidia-smi-q.xml": "nvidia-smi -q -x",
    "nvidia-smi-q.txt": "nvidia-smi -q (plain text; read when no XML is present)",
    "nvidia-smi-topo.txt": "nvidia-smi topo -m",
    "nvidia-smi-topo-p2p.txt": "nvidia-smi topo -p2p r",
    "nvidia-smi-nvlink-s.txt": "nvidia-smi nvlink -s",
    "nvidia-smi-L.txt": "nvidia-smi -L (read when given; collect does not write it, nvml.json holds the same)",
    "cuda-p2p.txt": "CUDA samples p2pBandwidthLatencyTest or simpleP2P (read when given; collect does not write it)",
    "dmesg.txt": "dmesg (or journalctl -k -b)",
    "lspci-vv.txt": "lspci -vv",
    "meminfo.txt": "/proc/meminfo",
    "cpuinfo.txt": "/proc/cpuinfo",
    "uptime.txt": "/proc/uptime",
    "cmdline.txt": "/proc/cmdline",
    "cgroup.txt": "cgroup limits, /proc/1/cgroup and /.dockerenv (head-style sections)",
    "ulimit.txt": "ulimit -a (resource limits of the collecting process)",
    "env.txt": "environment, filtered to CUDA/NCCL/TORCH/NVIDIA/SLURM/KUBERNETES/OMP variables",
    "torch.json": "torch versions, arch list, device count, NCCL version",
    "pip-freeze.txt": "installed Python distributions (name==version)",
    "ldconfig.txt": "ldconfig -p, filtered to NCCL/CUDA/cuDNN/cuBLAS/verbs libraries",
    "ibv_devinfo.txt": "ibv_devinfo",
    "sysfs.txt": "/sys/class/infiniband and /sys/class/net facts (head-style sections)",
    "ip-addr.txt": "ip -o addr",
    "nvidia-imex-ctl.txt": "nvidia-imex-ctl -N -j (or -N; where the command exists and the daemon answers)",
    "imex-channels.txt": "/dev/nvidia-caps-imex-channels and its major in /proc/devices (head-style sections)",
    "imex-service.txt": "systemctl is-active nvidia-imex (where systemd runs)",
    "df.txt": "df -P -B1",
    "modules.txt": "/proc/modules",
    "manifest.json": "what was collected: host, time, tool version, each file's command, exit code, duration",
}

# Environment variables worth recording (prefixes), everything else stays private.
ENV_PREFIXES = ("CUDA", "NCCL", "TORCH", "NVIDIA", "SLURM", "KUBERNETES", "OMP_", "PYTORCH", "NV_",
                "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "GLOO", "UCX", "LD_LIBRARY_PATH",
                "FI_", "HF_", "OMPI_", "PMI")
