"""Issue 32: `collect --redact` leaked two kinds of secret.

- A multi-line value: only the first line of `DEPLOY_SSH_PRIVATE_KEY=-----BEGIN OPENSSH PRIVATE KEY-----…` was
  replaced; the key's lines followed in the clear.
- An assignment inside another variable's value: `SLURM_EXPORT_ENV=WANDB_API_KEY=…` (what `sbatch --export` sets)
  kept the key, since the scan went on after the outer value.

Property tests: whatever a secret-named variable's value holds (one line or many, a PEM block, nested in another
variable or a `--flag=`), no piece of it survives in env.txt or in a log.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuready.evidence.redact import SECRET_PLACEHOLDER, Redactor, is_secret_name, redact_bundle

KEY = b"test-key"
PEM_BODY = ("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
            "QyNTUxOQAAACDnLm0vYYhT3fA0c9Xq8HkS6wq1nEG2l4YgWQbX7zKfAgAAAJg8cQ==")


def _redacted(files: dict[str, str]) -> dict[str, str]:
    return redact_bundle(files, key=KEY, local=False)


def test_a_pem_key_in_an_environment_variable_is_replaced_whole():
    env = ("CUDA_VISIBLE_DEVICES=0\nDEPLOY_SSH_PRIVATE_KEY=-----BEGIN OPENSSH PRIVATE KEY-----\n" + PEM_BODY +
           "\n-----END OPENSSH PRIVATE KEY-----\nNCCL_DEBUG=INFO\n")
    out = _redacted({"env.txt": env})["env.txt"]
    assert out == f"CUDA_VISIBLE_DEVICES=0\nDEPLOY_SSH_PRIVATE_KEY={SECRET_PLACEHOLDER}\nNCCL_DEBUG=INFO\n"


def test_a_pem_key_pasted_in_any_file_is_replaced_with_its_headers():
    log = ("before\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C\n\n"
           + PEM_BODY + "\n-----END RSA PRIVATE KEY-----\nafter the key: NCCL_DEBUG=INFO\n")
    out = _redacted({"job.log": log})["job.log"]
    assert out == f"before\n{SECRET_PLACEHOLDER}\nafter the key: NCCL_DEBUG=INFO\n"


def test_an_assignment_inside_another_value_is_replaced():
    env = "SLURM_EXPORT_ENV=WANDB_API_KEY=0123abcd4567,HF_TOKEN=plain-text-token,NCCL_DEBUG=INFO\nA=x,B_TOKEN=y\n"
    out = _redacted({"env.txt": env})["env.txt"]
    assert out == (f"SLURM_EXPORT_ENV=WANDB_API_KEY={SECRET_PLACEHOLDER},HF_TOKEN={SECRET_PLACEHOLDER},"
                   f"NCCL_DEBUG=INFO\nA=x,B_TOKEN={SECRET_PLACEHOLDER}\n")
    log = 'sbatch --export=ALL,WANDB_API_KEY=0123abcd4567 job.sh\nX="Y=MY_PASSWORD=hunter2hunter2" done\n'
    assert _redacted({"job.log": log})["job.log"] == (
        f"sbatch --export=ALL,WANDB_API_KEY={SECRET_PLACEHOLDER} job.sh\n"
        f'X="Y=MY_PASSWORD={SECRET_PLACEHOLDER}" done\n')


def test_a_quoted_value_over_several_lines_is_replaced_whole():
    log = 'MY_SECRET="first-line-of-it\nsecond-line-of-it" and after\n'
    assert _redacted({"job.log": log})["job.log"] == f"MY_SECRET={SECRET_PLACEHOLDER} and after\n"


def test_what_is_no_secret_stays():
    env = "SLURM_EXPORT_ENV=ALL,NCCL_DEBUG=INFO\nPATH=/usr/bin:/bin\nNCCL_IB_HCA==mlx5_0\n"
    assert _redacted({"env.txt": env})["env.txt"] == env


# --- properties ------------------------------------------------------------------------------------------------

SECRET_NAMES = st.builds(lambda prefix, word, suffix: prefix + word + suffix,
                         st.sampled_from(["", "WANDB_", "DEPLOY_SSH_", "HF_", "MY_APP_", "X_"]),
                         st.sampled_from(["API_KEY", "TOKEN", "PRIVATE_KEY", "SECRET", "PASSWORD", "CREDENTIALS"]),
                         st.sampled_from(["", "_1", "_FILE"]))
# Pieces long enough to be found again, and random enough to be no word the redactor keeps.
PIECES = st.text(alphabet="abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=12, max_size=40)
LINE_TAILS = st.sampled_from(["", "==", "+/", " more words", ":colon"])


@st.composite
def secret_values(draw) -> tuple[str, list[str]]:
    """(a value with one line or several, its pieces that must not survive)."""
    pieces = draw(st.lists(PIECES, min_size=1, max_size=5))
    lines = [piece + draw(LINE_TAILS) for piece in pieces]
    if draw(st.booleans()):
        value = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END OPENSSH PRIVATE KEY-----"
    else:
        value = "\n".join(lines)
    return value, pieces


@st.composite
def env_lines(draw) -> tuple[str, list[str]]:
    """An env.txt line (and the lines its value goes on over) that sets a secret, maybe inside another variable."""
    name = draw(SECRET_NAMES)
    value, pieces = draw(secret_values())
    outer = draw(st.sampled_from(["", "SLURM_EXPORT_ENV=", "SLURM_EXPORT_ENV=ALL,", "OTHER=x,", "A=B="]))
    return f"{outer}{name}={value}", pieces


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(env_lines(), min_size=1, max_size=4), st.booleans())
def test_no_secret_value_survives_in_env_txt(entries, with_neighbours):
    lines, secrets = [], []
    for line, pieces in entries:
        if with_neighbours:
            lines.append("NCCL_DEBUG=INFO")
        lines.append(line)
        secrets += pieces
    out = _redacted({"env.txt": "\n".join(lines) + "\n"})["env.txt"]
    for piece in secrets:
        assert piece not in out, (piece, out)
    if with_neighbours:
        assert "NCCL_DEBUG=INFO" in out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SECRET_NAMES, PIECES, st.sampled_from(["{a}", "SLURM_EXPORT_ENV={a}", "--export=ALL,{a}", "X='{a}'",
                                              'X="Y={a}"', "A=x,{a},B=y", "run {a} now", 'Z="{q}"']))
def test_no_secret_value_survives_in_a_log(name, piece, shape):
    assert is_secret_name(name)
    line = shape.format(a=f"{name}={piece}", q=f"{name}=\\\"{piece}\\\"")
    out = Redactor(KEY).text(f"[rank0] {line}\nanother line\n")
    assert piece not in out, (line, out)
    assert out.endswith("another line\n")


@settings(max_examples=100, deadline=None)
@given(SECRET_NAMES, secret_values())
def test_a_quoted_multi_line_secret_never_survives_in_a_log(name, value_pieces):
    value, pieces = value_pieces
    out = Redactor(KEY).text(f'export {name}="{value}"\nnext\n')
    for piece in pieces:
        assert piece not in out, (piece, out)
