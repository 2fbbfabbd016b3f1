from conftest import SHARED_H200
from gpuready.bundle.redact import redact_text
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_xml


def test_uuid_and_serial_are_replaced_by_stable_hashes():
    text = (SHARED_H200 / "nvidia-smi-q.xml").read_text()
    once, twice = redact_text(text, {"myhost"}), redact_text(text, {"myhost"})
    assert once == twice
    assert "e1506c79-11fa-26b7-2c92-dff09c477788" not in once and "1653724061105" not in once
    gpu = parse_nvidia_smi_q_xml(once).gpus[0]
    assert gpu.uuid.startswith("GPU-") and len(gpu.uuid) == len("GPU-e1506c79-11fa-26b7-2c92-dff09c477788")


def test_hosts_and_addresses():
    text = "inet 10.1.2.3/24 brd 10.1.2.255 scope global eth0 host gpu-node-17 link/ether aa:bb:cc:dd:ee:ff"
    redacted = redact_text(text, {"gpu-node-17"})
    assert "10.1.2.3" not in redacted and "gpu-node-17" not in redacted and "aa:bb:cc" not in redacted
