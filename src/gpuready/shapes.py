"""Model shapes plan, bench and the training workload share: the GPT-2 family (the default) and the LLaMA family,
from a preset, explicit dimensions, or a Hugging Face `config.json`. Top-level because workloads/ never imports verbs/.

GPT-2 family: pre-LN, biases, MLP 4h with GELU, learned positions, tied input/output embeddings (Radford et al. 2019;
Hugging Face `GPT2Config`). LLaMA family: RMSNorm, no biases, SwiGLU MLP of `ffn_hidden`, rotary positions, grouped
key/value heads, untied embeddings (Touvron et al. 2023; Hugging Face `LlamaConfig`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from gpuready.options import InputFileError, check_range, read_json_input

FAMILIES = ("gpt2", "llama")

SHAPE_LIMITS: dict[str, int] = {"layers": 10_000, "hidden": 1_048_576, "heads": 65_536, "kv_heads": 65_536,
                                "ffn_hidden": 4_194_304, "vocab": 16_777_216, "max_positions": 16_777_216}
"""The largest value of each dimension gpuready accepts (far beyond any published model; from 1)."""


class ShapeError(ValueError):
    """A shape that cannot exist (heads that do not divide the width, a config.json of another family)."""


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    family: str = "gpt2"
    layers: int
    hidden: int
    heads: int
    vocab: int
    kv_heads: int | None = None
    """Key/value heads (grouped-query attention); None: as many as `heads`."""
    ffn_hidden: int | None = None
    """The MLP's inner width; None: 4 × hidden (GPT-2)."""
    max_positions: int = 1024
    tied_embeddings: bool | None = None
    """None: the family's default (GPT-2 tied, LLaMA untied)."""
    name: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ShapeError(f"model family {self.family!r}: gpuready knows {', '.join(FAMILIES)}")
        for label, value in (("layers", self.layers), ("hidden", self.hidden), ("heads", self.heads),
                             ("vocab", self.vocab), ("kv_heads", self.kv_heads), ("ffn_hidden", self.ffn_hidden),
                             ("max_positions", self.max_positions)):
            if value is None and label in ("kv_heads", "ffn_hidden"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= SHAPE_LIMITS[label]:
                raise ShapeError(f"--{label.replace('_', '-')} must be a whole number from 1 to "
                                 f"{SHAPE_LIMITS[label]:,}, not {str(value)[:40]}")
        if self.tied_embeddings not in (None, True, False):
            raise ShapeError(f"tied embeddings must be true or false, not {str(self.tied_embeddings)[:40]}")
        if self.hidden % self.heads:
            raise ShapeError(f"--hidden {self.hidden} is not a multiple of --heads {self.heads}")
        if self.heads % self.key_value_heads:
            raise ShapeError(f"{self.heads} heads cannot be grouped over {self.key_value_heads} key/value heads")

    @property
    def key_value_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def mlp_hidden(self) -> int:
        return self.ffn_hidden or 4 * self.hidden

    @property
    def tied(self) -> bool:
        return self.family == "gpt2" if self.tied_embeddings is None else self.tied_embeddings

    @property
    def biases(self) -> bool:
        return self.family == "gpt2"

    def layer_parameters(self) -> int:
        """One transformer block's parameters."""
        h, kv = self.hidden, self.key_value_heads * self.head_dim
        attention = h * h + 2 * h * kv + h * h  # q, k, v, output projections
        if self.family == "gpt2":
            mlp = 2 * h * self.mlp_hidden
            biases = h + 2 * kv + h + self.mlp_hidden + h
            norms = 2 * 2 * h  # two LayerNorms, weight and bias
            return attention + mlp + biases + norms
        mlp = 3 * h * self.mlp_hidden  # gate, up, down (SwiGLU)
        return attention + mlp + 2 * h  # two RMSNorm weights

    def embedding_parameters(self) -> int:
        """Token (and, for GPT-2, position) embeddings, the untied output head, and the final norm."""
        tokens = self.vocab * self.hidden
        positions = self.max_positions * self.hidden if self.family == "gpt2" else 0
        head = 0 if self.tied else self.vocab * self.hidden
        final_norm = 2 * self.hidden if self.family == "gpt2" else self.hidden
        return tokens + positions + head + final_norm

    def parameters(self) -> int:
        return self.layers * self.layer_parameters() + self.embedding_parameters()

    def training_flops_per_token(self, seq: int) -> float:
        """Forward + backward FLOPs per token: 6 per weight of the matmuls (the embedding lookup is no matmul, the
        output projection is) plus attention's scores and weighted sum, 6 × 2 × layers × seq × hidden (Kaplan et
        al. 2020, Table 1; Korthikanti et al. 2022, eq. for the model FLOPs without recomputation)."""
        matmul_weights = self.layers * self.layer_parameters() + self.vocab * self.hidden
        return 6.0 * matmul_weights + 12.0 * self.layers * seq * self.hidden


PRESETS: dict[str, ModelShape] = {
    "tiny": ModelShape(name="tiny", layers=2, hidden=64, heads=4, vocab=256, max_positions=256),  # a CPU smoke test
    # GPT-2 sizes as published (Radford et al. 2019, Table 2; Hugging Face gpt2, gpt2-medium/-large/-xl)
    "gpt2-small": ModelShape(name="gpt2-small", layers=12, hidden=768, heads=12, vocab=50257),
    "gpt2-medium": ModelShape(name="gpt2-medium", layers=24, hidden=1024, heads=16, vocab=50257),
    "gpt2-large": ModelShape(name="gpt2-large", layers=36, hidden=1280, heads=20, vocab=50257),
    "gpt2-xl": ModelShape(name="gpt2-xl", layers=48, hidden=1600, heads=25, vocab=50257),
    # GPT-3 sizes (Brown et al. 2020, Table 2.1) in the GPT-2 family; 1.3B with 16 heads of 128 (the table's 24
    # heads of 128 do not make its width of 2048). Its 125M and 350M are gpt2-small and gpt2-medium.
    "gpt3-760m": ModelShape(name="gpt3-760m", layers=24, hidden=1536, heads=16, vocab=50257),
    "gpt3-1.3b": ModelShape(name="gpt3-1.3b", layers=24, hidden=2048, heads=16, vocab=50257),
    "gpt3-2.7b": ModelShape(name="gpt3-2.7b", layers=32, hidden=2560, heads=32, vocab=50257),
    # LLaMA-family configs as published on Hugging Face (meta-llama/Llama-2-7b-hf, -13b-hf, Llama-3.1-8B, -70B)
    "llama2-7b": ModelShape(name="llama2-7b", family="llama", layers=32, hidden=4096, heads=32, vocab=32000,
                            ffn_hidden=11008, max_positions=4096),
    "llama2-13b": ModelShape(name="llama2-13b", family="llama", layers=40, hidden=5120, heads=40, vocab=32000,
                             ffn_hidden=13824, max_positions=4096),
    "llama3-8b": ModelShape(name="llama3-8b", family="llama", layers=32, hidden=4096, heads=32, kv_heads=8,
                            vocab=128256, ffn_hidden=14336, max_positions=8192),
    "llama3-70b": ModelShape(name="llama3-70b", family="llama", layers=80, hidden=8192, heads=64, kv_heads=8,
                             vocab=128256, ffn_hidden=28672, max_positions=8192),
}


def shape_from_hf_config(path: str | Path, option: str = "--model-config") -> ModelShape:
    """A Hugging Face `config.json` of a GPT-2 (`n_layer`, `n_embd`, `n_head`) or LLaMA-style model
    (`num_hidden_layers`, `hidden_size`, `num_attention_heads`, `intermediate_size`). ShapeError otherwise: a file
    that is not a regular file of at most 1 MiB of strict JSON, or a field of the wrong type or out of range."""
    try:
        config = read_json_input(path, option)
    except InputFileError as error:
        raise ShapeError(str(error)) from None
    if not isinstance(config, dict):
        raise ShapeError(f"{option} {path}: a config.json holds one JSON object")
    name = Path(path).parent.name or Path(path).name
    if "n_layer" in config:
        family, fields = "gpt2", {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "vocab": "vocab_size",
                                  "ffn_hidden": "n_inner", "max_positions": "n_positions"}
        defaults = {"max_positions": 1024, "tied": True}
    elif "num_hidden_layers" in config:
        family, fields = "llama", {"layers": "num_hidden_layers", "hidden": "hidden_size",
                                   "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
                                   "vocab": "vocab_size", "ffn_hidden": "intermediate_size",
                                   "max_positions": "max_position_embeddings"}
        defaults = {"max_positions": 4096, "tied": False}
    else:
        raise ShapeError(f"{option} {path}: neither a GPT-2 (n_layer, n_embd, n_head) nor a LLaMA-style "
                         "(num_hidden_layers, hidden_size, num_attention_heads) config.json")
    values: dict[str, object] = {}
    try:
        for field, key in fields.items():
            optional = field in ("kv_heads", "ffn_hidden", "max_positions")
            if key not in config and not optional:
                raise ShapeError(f"{option} {path}: config.json lacks {key!r}")
            value = check_range(f"{option} {path}: {key}", config.get(key), 1, SHAPE_LIMITS[field],
                                optional=optional)
            if value is not None:
                values[field] = value
    except InputFileError as error:
        raise ShapeError(str(error)) from None
    tied = config.get("tie_word_embeddings", defaults["tied"])
    if not isinstance(tied, bool):
        raise ShapeError(f"{option} {path}: tie_word_embeddings must be true or false")
    values.setdefault("max_positions", defaults["max_positions"])
    return ModelShape(name=name, family=family, tied_embeddings=tied, **values)


def with_sequence(shape: ModelShape, seq: int) -> ModelShape:
    """GPT-2's learned positions must cover the sequence: a longer --seq widens the position table."""
    if shape.family == "gpt2" and seq > shape.max_positions:
        return replace(shape, max_positions=seq)
    return shape
