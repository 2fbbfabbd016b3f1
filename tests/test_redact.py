import ipaddress
import json
import re
import socket
import xml.etree.ElementTree as ET

import psutil
import pytest

from conftest import FIXTURES, SHARED_H200
from gpuready.evidence import redact
from gpuready.evidence.redact import (LOOPBACK_NAMES, Redactor, expand_hostlist, redact_bundle, redact_text,
                                    redaction_key)
from gpuready.evidence.build import build_facts
from gpuready.facts.nvidia_smi_q import parse_nvidia_smi_q_xml
from gpuready.facts.nvml_json import NvmlDocument
from helpers import report_for

KEY = b"test-key"
HOST = r"host-[0-9a-f]{8}"



def _still_parses(files, redacted):
    """The redacted bundle's JSON and XML parse, its GPUs still match up across files, and every file is read as the
    original was; returns its facts."""
    for name in ("manifest.json", "nvml.json", "torch.json"):
        json.loads(redacted[name])
    ET.fromstring(redacted["nvidia-smi-q.xml"])
    assert parse_nvidia_smi_q_xml(redacted["nvidia-smi-q.xml"]).gpus[0].uuid == NvmlDocument(
        redacted["nvml.json"]).gpus[0].uuid
    facts = build_facts(redacted)
    assert facts.input_errors == [] and build_facts(files).sources == facts.sources
    return facts

def test_uuid_and_serial_are_replaced_by_stable_hashes():
    text = (SHARED_H200 / "nvidia-smi-q.xml").read_text()
    once, twice = redact_text(text, {"myhost"}), redact_text(text, {"myhost"})
    assert once == twice
    assert "e1506c79-11fa-26b7-2c92-dff09c477788" not in once and "1653724061105" not in once
    gpu = parse_nvidia_smi_q_xml(once).gpus[0]
    assert gpu.uuid.startswith("GPU-") and len(gpu.uuid) == len("GPU-e1506c79-11fa-26b7-2c92-dff09c477788")
    assert re.fullmatch(r"redacted-[0-9a-f]{10}", gpu.serial or "redacted-0000000000")


def test_hosts_and_addresses():
    text = "inet 10.1.2.3/24 brd 10.1.2.255 scope global eth0 host gpu-node-17 link/ether aa:bb:cc:dd:ee:ff"
    redacted = redact_text(text, {"gpu-node-17"}, key=KEY)
    assert "10.1.2.3" not in redacted and "gpu-node-17" not in redacted and "aa:bb:cc" not in redacted
    assert re.fullmatch(rf"inet 240\.\d+\.\d+\.\d+/24 brd 240\.\d+\.\d+\.\d+ scope global eth0 host {HOST} "
                        r"link/ether 02(:[0-9a-f]{2}){5}", redacted), redacted


def test_compressed_ipv6_hyphenated_macs_and_what_stays():
    redactor = Redactor(KEY)
    text = ("a fd00::2/64 b 2001:db8::17. c fe80::fc:ff:fe00:1%eth0 d ::ffff:10.9.8.7 e 00-1A-2B-3C-4D-5E "
            "f 2001:0db8:0000:0000:0000:0000:0000:0017")
    out = redactor.text(text)
    for gone in ("fd00::2", "2001:db8::17", "fe80::fc:ff:fe00:1", "10.9.8.7", "00-1A-2B-3C-4D-5E", "0db8"):
        assert gone.lower() not in out.lower()
    words = out.split()
    assert ipaddress.ip_address(words[1].split("/")[0]) in ipaddress.ip_network("100::/64")
    assert words[3].endswith(".") and words[5].endswith("%eth0")
    assert words[3][:-1] == words[11]  # the same address compressed or written out: one placeholder
    assert re.fullmatch(r"02(-[0-9a-f]{2}){5}", words[9])
    kept = ("::1 127.0.0.1 0.0.0.0:2024 255.255.255.0 ff02::1 00:00:00:00:00:00 ff:ff:ff:ff:ff:ff "
            "NV_CUDNN_VERSION=9.13.0.50-1 libnccl2=2.28.3-1+cuda13.0 torch==2.11.0.1 vbios 96.00.74.00.0D "
            "bus 00000000:3B:00.0 0000:3b:00.0 at 11:45:26 std::string")
    assert redactor.text(kept) == kept


def test_same_input_same_placeholder_and_keyed():
    one, other = Redactor(b"one", ["trainer-7"]), Redactor(b"two", ["trainer-7"])
    text = "MASTER_ADDR=trainer-7 peer 10.0.0.5 TRAINER-7 said"
    first = one.text(text)
    assert first == one.text(text) and first != other.text(text)
    words = first.split()
    assert words[0] == "MASTER_ADDR=" + words[3] and re.fullmatch(HOST, words[3])  # case-insensitive, same name
    assert Redactor(b"one").text("10.0.0.5") == words[2] != Redactor(b"one").text("10.0.0.6")


def test_key_from_the_environment_is_shared_by_every_node(monkeypatch):
    monkeypatch.setenv(redact.KEY_ENV, "site-secret")
    redaction_key.cache_clear()
    try:
        first = redaction_key()
        redaction_key.cache_clear()
        assert redaction_key() == first and redact_text("10.0.0.5") == Redactor(first).text("10.0.0.5")
    finally:
        redaction_key.cache_clear()


def test_slurm_hostlists():
    assert expand_hostlist("node[001-004,010]") == ["node001", "node002", "node003", "node004", "node010"]
    assert expand_hostlist("rack[1-2]-n[08-09],login") == ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09",
                                                            "login"]
    assert expand_hostlist("n[0-99999999]") is None  # bounded: replaced whole, never expanded
    assert expand_hostlist("n[[1-2]]") is None and expand_hostlist("n[a-b]") is None
    redactor = Redactor(KEY)
    redactor.add_host_value("n[0-99999999]")
    assert re.fullmatch(r"SLURM_NODELIST=hostlist-[0-9a-f]{8}", redactor.env("SLURM_NODELIST=n[0-99999999]").strip())


def _recorded(fixture):
    """The files of a recorded bundle as collect hands them to redact_bundle (whole, not as check reads them)."""
    return {path.name: path.read_text() for path in (FIXTURES / fixture).iterdir() if path.name != "README.md"}


def _bundle_with_identities(fixture, host, fqdn, addresses, macs):
    """The recorded bundle, plus this machine's and other hosts' names and addresses where tools print them."""
    files = _recorded(fixture)
    manifest = json.loads(files["manifest.json"])
    manifest["host"] = host
    manifest["files"]["ip-addr.txt"] = {"command": "ip -o addr", "collected": True, "exit_code": 0,
                                        "duration_s": 0.0, "error": None}
    files["manifest.json"] = json.dumps(manifest, indent=1)
    files["env.txt"] += ("HOSTNAME=" + host + "\nMASTER_ADDR=trainer-7\nMASTER_PORT=29500\n"
                         "SLURM_NODELIST=node[001-004,010]\nSLURM_JOB_NODELIST=node[001-004,010]\n"
                         "SLURMD_NODENAME=" + host + "\nSLURM_JOB_NUM_NODES=5\nSLURM_JOB_ID=4242\n"
                         "KUBERNETES_NODE_NAME=k8s-worker-3\nKUBERNETES_SERVICE_HOST=10.96.0.1\n"
                         "NCCL_SOCKET_IFNAME=eth0\nNCCL_COMM_ID=gpu-node-17.cluster.example.com:23456\n")
    ip_lines = [f"{index + 2}: eth0    {'inet6' if ':' in address else 'inet'} {address}/64 scope global eth0"
                for index, address in enumerate(addresses + ["10.20.30.40", "fd00::2", "2001:db8::17"])]
    files["ip-addr.txt"] = "1: lo    inet 127.0.0.1/8 scope host lo\n" + "\n".join(ip_lines) + "\n"
    files["sysfs.txt"] += "".join(f"\n==> /sys/class/net/eth{index}/address <==\n{mac}\n"
                                  for index, mac in enumerate(macs + ["00:1a:2b:3c:4d:5e"]))
    files["dmesg.txt"] += (
        f"[   12.000001] {host} kernel: eth0: link up, peer trainer-7 at 10.20.30.40\n"
        f"[   12.000002] systemd[1]: Set hostname to <{fqdn}>.\n"
        + "".join(f"[   12.000003] mlx5_core: port mac {mac.upper().replace(':', '-')} (bare {mac.replace(':', '')})\n"
                  for mac in macs + ["00:1a:2b:3c:4d:5e"]) +
        "[   12.000004] nfs: server node003 not responding, peer gpu-node-17.cluster.example.com fd00::2\n"
        "[   12.000005] peers Node001,node002.,(node004)\n"
        f"Dec  2 11:45:26 {host.upper()} kernel: NVRM: node010 and 2001:db8::17 k8s-worker-3\n")
    return files


def _this_machine():
    host, fqdn = socket.gethostname(), socket.getfqdn()
    addresses, macs = [], []
    for entries in psutil.net_if_addrs().values():
        for entry in entries:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                address = ipaddress.ip_address(entry.address.split("%")[0])
                if not (address.is_loopback or address.is_unspecified):
                    addresses.append(entry.address.split("%")[0])
            elif re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", entry.address or "") and entry.address.strip("0:"):
                macs.append(entry.address)
    return host, fqdn, addresses, macs


@pytest.mark.parametrize("fixture", ["h200-collect", "h200-docker-collect"])
def test_redacted_bundle_holds_none_of_this_machines_names_or_addresses(fixture):
    host, fqdn, addresses, macs = _this_machine()
    files = _bundle_with_identities(fixture, host, fqdn, addresses, macs)
    redacted = redact_bundle(files)
    assert set(redacted) == set(files)

    names = {host, fqdn, host.split(".")[0], fqdn.split(".")[0], "trainer-7", "k8s-worker-3",
             "gpu-node-17.cluster.example.com", "gpu-node-17", "node[001-004,010]",
             "node001", "node002", "node003", "node004", "node010"} - LOOPBACK_NAMES - {""}
    secrets = names | set(addresses) | set(macs) | {mac.replace(":", sep) for mac in macs for sep in ("-", "")} | {
        "10.20.30.40", "fd00::2", "2001:db8::17", "00:1a:2b:3c:4d:5e", "00-1a-2b-3c-4d-5e", "10.96.0.1"}
    for secret in secrets:
        # A short name ("vm") is looked for as a whole token: "kvm-clock" does not name this host.
        pattern = re.escape(secret) if len(secret) >= 4 else rf"(?<![A-Za-z0-9_-]){re.escape(secret)}(?![A-Za-z0-9_-])"
        assert any(re.search(pattern, text, re.IGNORECASE) for text in files.values()), secret  # it was there
        for name, text in redacted.items():
            assert not re.search(pattern, text, re.IGNORECASE), f"{secret!r} left in {name}"

    env = dict(line.split("=", 1) for line in redacted["env.txt"].splitlines())
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["MASTER_PORT"] == "29500" and env["SLURM_JOB_NUM_NODES"] == "5"
    assert re.fullmatch(HOST, env["MASTER_ADDR"]) and env["SLURMD_NODENAME"] == env["HOSTNAME"]
    assert re.fullmatch(rf"{HOST}(,{HOST}){{4}}", env["SLURM_NODELIST"])
    assert env["SLURM_JOB_NODELIST"] == env["SLURM_NODELIST"]
    node003, node010 = env["SLURM_NODELIST"].split(",")[2], env["SLURM_NODELIST"].split(",")[4]
    assert f"server {node003} not responding" in redacted["dmesg.txt"]  # one name, one placeholder, every file
    assert f"NVRM: {node010} and" in redacted["dmesg.txt"]
    manifest = json.loads(redacted["manifest.json"])
    assert manifest["host"] == env["HOSTNAME"] and f"] {manifest['host']} kernel:" in redacted["dmesg.txt"]
    assert f"peer {env['MASTER_ADDR']} at 240." in redacted["dmesg.txt"]

    # Still parseable: valid JSON and XML, every file read without an input error.
    facts = _still_parses(files, redacted)
    assert {interface.name: len(interface.addresses) for interface in facts.net_interfaces or []} == {
        interface.name: len(interface.addresses) for interface in build_facts(files).net_interfaces or []}


@pytest.mark.parametrize("fixture", ["h200-collect", "h200-docker-collect"])
def test_redacted_bundle_gives_the_same_verdict(fixture, make_bundle):
    host, fqdn, addresses, macs = _this_machine()
    files = _bundle_with_identities(fixture, host, fqdn, addresses, macs)
    plain, hidden = make_bundle(files), make_bundle(redact_bundle(files))
    before, after = report_for(plain), report_for(hidden)
    assert after.to_dict()["verdict"] == before.to_dict()["verdict"] == "ready_with_warnings"
    assert [(f.check_id, f.status) for f in after.findings] == [(f.check_id, f.status) for f in before.findings]
    assert after.exit_code() == before.exit_code() == 0


def test_short_and_generic_host_names():
    files = {"manifest.json": json.dumps({"format": "gpuready-bundle", "host": "vm"}),
             "env.txt": "HOSTNAME=gpu\nMASTER_ADDR=localhost\n",
             "dmesg.txt": "[    1.0] kvm-clock: VM vm. on gpu\n[    2.0] gpu kernel: NVRM: GPU at vm\n"}
    out = redact_bundle(files, key=KEY, local=False)
    vm = json.loads(out["manifest.json"])["host"]
    assert re.fullmatch(HOST, vm)  # short names are replaced in the manifest too
    assert out["env.txt"].splitlines()[1] == "MASTER_ADDR=localhost"  # identifies nothing: kept
    hostname = out["env.txt"].splitlines()[0].split("=")[1]
    assert re.fullmatch(HOST, hostname)  # "gpu" is a host name here...
    # ...but also a word the tools print: replaced only where it stands as a host name.
    assert out["dmesg.txt"] == (f"[    1.0] kvm-clock: {vm} {vm}. on gpu\n"
                                f"[    2.0] {hostname} kernel: NVRM: GPU at {vm}\n")


def test_a_host_named_like_the_gpu_keeps_the_product_name():
    files = _recorded("h200-collect")
    manifest = json.loads(files["manifest.json"])
    manifest["host"] = "h200"
    files["manifest.json"] = json.dumps(manifest)
    out = redact_bundle(files, key=KEY, local=False)
    assert re.fullmatch(HOST, json.loads(out["manifest.json"])["host"])
    assert NvmlDocument(out["nvml.json"]).gpus[0].name == "NVIDIA H200"


def test_json_keys_and_xml_tags_never_change():
    redactor = Redactor(KEY, ["serial", "uuid", "product_name"])
    xml = "<?xml version=\"1.0\"?>\n<nvidia_smi_log><gpu id=\"00000000:3B:00.0\">" \
          "<product_name>NVIDIA H100</product_name>" \
          "<serial>1653724061105</serial><uuid>GPU-e1506c79-11fa-26b7-2c92-dff09c477788</uuid></gpu></nvidia_smi_log>"
    out = redact._redact_file(redactor, "nvidia-smi-q.xml", xml)
    assert [element.tag for element in ET.fromstring(out).iter()] == [
        element.tag for element in ET.fromstring(xml).iter()]
    assert "1653724061105" not in out and "e1506c79" not in out
    document = {"host": "uuid", "serial": "1653724061105", "uuid": "serial at 10.0.0.5"}
    redacted = json.loads(redact._redact_file(redactor, "x.json", json.dumps(document)))
    assert list(redacted) == ["host", "serial", "uuid"] and "10.0.0.5" not in redacted["uuid"]
    assert re.fullmatch(HOST, redacted["host"]) and redacted["serial"].startswith("redacted-")


# Issue 20: every kind of secret and identity planted in a fake machine's files; none may survive redaction.
SECRETS_ENV = {  # name → value: every secret-named style (case-insensitive, export, quotes) and token shapes
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "NVIDIA_API_KEY": "nvapi-PlAnTeD0123456789abcdefghijklmnop",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7PLANTED",
    "AWS_SECRET_ACCESS_KEY": "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",
    "GITHUB_PAT": "planted-pat-value",
    "DB_PASSWORD": "hunter2-planted",
    "SMTP_PASSWD": "planted-passwd-1",
    "GOOGLE_APPLICATION_CREDENTIALS": "/opt/planted-creds.json",
    "HTTP_AUTH": "planted-auth-value",
    "MY_SECRET": "planted-secret-value",
    "hf_hub_token": "planted-lower-value",
}
TOKEN_SHAPES = [
    "ghp_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "ASIAPLANTED0TOKEN123",
    "sk-proj-PlantedOpenAIKey0123456789abcdef",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "xoxb-1234567890-planted-slack",
    "glpat-PlantedGitLabToken0123",
    "AIzaSyPlantedGoogleKey0123456789abcdefgh",
    "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9",
]
IDENTITIES = {
    "users": ["alice", "carol.smith", "bob"],
    "hosts": ["ip-10-1-2-3.ec2.internal", "ip-10-1-2-3", "trainer-9", "gpu-box-planted", "login-planted"],
    "addresses": ["10.1.2.3", "172.31.5.6", "10.0.7.7", "2600:1f18:abcd::42", "fe80::a8b:2cff:fe3d:4e5f",
                  "ip-10-11-12-13", "10.0.9.1", "10.0.9.2"],
    "macs": ["0a:1b:2c:3d:4e:5f", "0A-1B-2C-3D-4E-60"],
    "ids": ["i-0123456789abcdef0", "i-0fedcba9876543210", "i-1a2b3c4d", "4567890123456789012",
            "11112222-3333-4444-5555-666677778888", "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0",
            "7c9d1e2f-3a4b-4c5d-8e6f-708192a3b4c5",
            "9a8b7c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d", "ab" * 32],
    "serials": ["1650987654321", "CHS-PLANTED-1", "BSN-PLANTED-4242", "PSN-PLANTED-99", "USB-PLANTED-77"],
    "secrets": ["planted-url-pass", "planted-bearer-token-123", "planted-flag-secret"],
}


def _planted_bundle():
    files = _recorded("h200-collect")
    manifest = json.loads(files["manifest.json"])
    manifest["host"] = "ip-10-1-2-3.ec2.internal"
    manifest["platform"] = "Linux-6.18 (built by alice in /home/alice/src)"
    manifest["files"]["ip-addr.txt"] = {"command": "ip -o addr", "collected": True, "exit_code": 0,
                                        "duration_s": 0.0, "error": None}
    manifest["files"]["ldconfig.txt"]["error"] = (
        f"HF_TOKEN={SECRETS_ENV['HF_TOKEN']} at /Users/carol.smith/x, i-0123456789abcdef0, {TOKEN_SHAPES[0]}")
    files["manifest.json"] = json.dumps(manifest, indent=1)
    env = "".join(f"{name}={value}\n" for name, value in SECRETS_ENV.items())
    files["env.txt"] += (env + f"export OPENAI_API_KEY=\"{TOKEN_SHAPES[3]}\"\nCUSTOM_JWT_HOLDER={TOKEN_SHAPES[4]}\n"
                         "USER=alice\nHF_HOME=/home/alice/.cache/huggingface\nMASTER_ADDR=trainer-9\n"
                         "SLURMD_NODENAME=gpu-box-planted\n"
                         "PIP_INDEX_URL=https://bob:planted-url-pass@pypi.example.org/simple\n"
                         "LD_LIBRARY_PATH=/home/bob/venv/lib:/usr/local/nvidia/lib64\n")
    files["cgroup.txt"] += (
        "==> /proc/self/cgroup <==\n0::/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice/cri-containerd-" + "ab" * 32 + ".scope\n"
        "1:memory:/kubepods/besteffort/pod7c9d1e2f-3a4b-4c5d-8e6f-708192a3b4c5/" + "ab" * 32 + "\n")
    nvml = json.loads(files["nvml.json"])
    nvml["gpus"][0]["serial"] = "1650987654321"
    files["nvml.json"] = json.dumps(nvml, indent=1)
    files["nvidia-smi-q.xml"] = re.sub(r"<serial>[^<]*</serial>", "<serial>1650987654321</serial>",
                                       files["nvidia-smi-q.xml"], count=1)
    files["nvidia-smi-q.xml"] = files["nvidia-smi-q.xml"].replace(
        "<chassis_serial_number>N/A</chassis_serial_number>", "<chassis_serial_number>CHS-PLANTED-1"
        "</chassis_serial_number>", 1)
    files["dmesg.txt"] += (
        "[   13.000001] ip-10-1-2-3 kernel: cloud-init: instance i-0fedcba9876543210 (short i-1a2b3c4d) up\n"
        "[   13.000002] systemd[1]: Set hostname to <gpu-box-planted>.\n"
        "[   13.000003] audit: user alice opened /home/alice/.netrc; carol.smith logged in from login-planted\n"
        "[   13.000004] hv_vmbus: vmId: 11112222-3333-4444-5555-666677778888 gce instance_id=4567890123456789012\n"
        "[   13.000005] kubelet: node uid 9a8b7c6d-5e4f-4a3b-9c2d-1e0f2a3b4c5d peer ip-10-11-12-13 at 10.0.7.7\n"
        "[   13.000006] usb 1-1: SerialNumber: USB-PLANTED-77\n"
        "[   13.000010] allow 10.0.9.1-10.0.9.2 via 10.0.9.3-1\n"
        "[   13.000007] mlx5_core: port mac 0A-1B-2C-3D-4E-60 addr fe80::a8b:2cff:fe3d:4e5f\n"
        "[   13.000008] app: " + " ".join(TOKEN_SHAPES) + "\n"
        "[   13.000009] app: curl -H 'Authorization: Bearer planted-bearer-token-123' --password planted-flag-secret\n")
    files["ip-addr.txt"] = ("1: lo    inet 127.0.0.1/8 scope host lo\n"
                            "2: eth0    inet 10.1.2.3/20 brd 10.1.15.255 scope global eth0\n"
                            "2: eth0    inet 172.31.5.6/20 scope global secondary eth0\n"
                            "2: eth0    inet6 2600:1f18:abcd::42/128 scope global\n"
                            "2: eth0    inet6 fe80::a8b:2cff:fe3d:4e5f/64 scope link\n")
    files["sysfs.txt"] += ("\n==> /sys/class/net/eth0/address <==\n0a:1b:2c:3d:4e:5f\n"
                           "==> /sys/class/dmi/id/board_serial <==\nBSN-PLANTED-4242\n"
                           "==> /sys/class/dmi/id/product_serial <==\nPSN-PLANTED-99\n"
                           "==> /sys/class/dmi/id/board_asset_tag <==\ni-0123456789abcdef0\n")
    return files


def test_every_planted_secret_and_identity_is_redacted(make_bundle):
    files = _planted_bundle()
    redacted = redact_bundle(files, key=KEY, local=False)
    planted = list(SECRETS_ENV.values()) + TOKEN_SHAPES + [value for values in IDENTITIES.values() for value in values]
    for value in planted:
        pattern = re.escape(value) if len(value) > 3 else rf"(?<![A-Za-z0-9_-]){re.escape(value)}(?![A-Za-z0-9_-])"
        assert any(re.search(pattern, text, re.IGNORECASE) for text in files.values()), value  # it was there
        for name, text in redacted.items():
            assert not re.search(pattern, text, re.IGNORECASE), f"{value!r} left in {name}"
    assert not re.search(r"/home/(?!user-[0-9a-f]{8}\b)", "".join(redacted.values()))

    env = dict(line.split("=", 1) for line in redacted["env.txt"].splitlines() if "=" in line)
    for name in SECRETS_ENV:
        assert env[name] == redact.SECRET_PLACEHOLDER, name
    assert env["CUDA_HOME"] == "/usr/local/cuda" and env["NCCL_NVLS_ENABLE"] == "0"  # not secrets: kept
    alice = re.search(r"/home/(user-[0-9a-f]{8})/\.cache", env["HF_HOME"]).group(1)
    assert env["USER"] == alice and f"user {alice} opened /home/{alice}/.netrc" in redacted["dmesg.txt"]  # stable
    assert re.fullmatch(r"/home/user-[0-9a-f]{8}/venv/lib:/usr/local/nvidia/lib64", env["LD_LIBRARY_PATH"])
    host = json.loads(redacted["manifest.json"])["host"]
    short = Redactor(KEY).host_placeholder("ip-10-1-2-3")  # the manifest's FQDN, its short name in the log column
    assert host == Redactor(KEY).host_placeholder("ip-10-1-2-3.ec2.internal")
    assert f"] {short} kernel: cloud-init" in redacted["dmesg.txt"]
    assert re.search(r"peer ip-240-\d+-\d+-\d+ at 240\.", redacted["dmesg.txt"])
    assert "kubepods-burstable-pod" in redacted["cgroup.txt"] and re.search(
        r"pod[0-9a-f]{8}(_[0-9a-f]{4}){3}_[0-9a-f]{12}\.slice", redacted["cgroup.txt"])
    assert re.search(r"instance i-[0-9a-f]{17} \(short i-[0-9a-f]{8}\)", redacted["dmesg.txt"])

    # Still parseable, GPUs still matched up, the same verdict.
    facts = _still_parses(files, redacted)
    assert facts.host.container == build_facts(files).host.container
    before, after = report_for(make_bundle(files)), report_for(make_bundle(redacted))
    assert after.to_dict()["verdict"] == before.to_dict()["verdict"]
    assert [(f.check_id, f.status) for f in after.findings] == [(f.check_id, f.status) for f in before.findings]


def test_secret_names_by_rule():
    for name in ("HF_TOKEN", "nvidia_api_key", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_PAT", "PGPASSWORD",
                 "SMTP_PASSWD", "GOOGLE_APPLICATION_CREDENTIALS", "NPM_AUTH", "--api-key", "client_secret"):
        assert redact.is_secret_name(name), name
    for name in ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "NCCL_SOCKET_IFNAME", "PASSTHROUGH", "MASTER_ADDR"):
        assert not redact.is_secret_name(name), name


@pytest.mark.parametrize("hostile", [
    "hf_" + "a" * 200_000, "eyJ" + "a" * 100_000 + ".eyJ" + "a" * 100_000, "eyJaaaaaaaaa." * 20_000,
    "pod" + "0" * 200_000, "0-" * 100_000, "==> " * 50_000 + "\n", "A=" * 100_000, "--key " * 40_000,
    "/home/" * 40_000, "i-" + "0" * 200_000, "ip-1-" * 50_000, "serial: " * 30_000, "://a:" * 40_000,
    "Authorization: " * 20_000, "0f1e2d3c_" * 30_000])
def test_secret_patterns_are_linear_on_hostile_input(hostile):
    import time
    started = time.monotonic()
    Redactor(KEY, users=["alice"]).text(hostile)
    assert time.monotonic() - started < 5


def test_what_the_new_rules_keep():
    kept = ("[    0.2] Serial: 8250/16550 driver, 1 ports\n    GPU instance ID : 3\nCompute instance ID: 1\n"
            "LD_LIBRARY_PATH=/usr/local/nvidia/lib64 PASSTHROUGH=1 /root/.cache 9.13.0.50-1 per token throughput\n")
    assert Redactor(KEY).text(kept) == kept
    document = {"gpu_instance_id": "3", "compute_instance_id": "1", "tokens_per_s": 12.5, "instance_id": "4567890"}
    out = json.loads(redact._redact_file(Redactor(KEY), "x.json", json.dumps(document)))
    assert out["gpu_instance_id"] == "3" and out["compute_instance_id"] == "1" and out["tokens_per_s"] == 12.5
    assert out["instance_id"] != "4567890"
