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

FAMILIES = ("gpt2", "llama")


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
                             ("vocab", self.vocab)):
            if not isinstance(value, int) or value < 1:
                raise ShapeError(f"--{label} must be a positive whole number, not {value!r}")
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
    # GPT-2 sizes as published (Radford et al. 2019, Table 2; Hugging Face gpt2, gpt2-medium/-large/-xl)
    "gpt2-small": ModelShape(name="gpt2-small", layers=12, hidden=768, heads=12, vocab=50257),
    "gpt2-medium": ModelShape(name="gpt2-medium", layers=24, hidden=1024, heads=16, vocab=50257),
    "gpt2-large": ModelShape(name="gpt2-large", layers=36, hidden=1280, heads=20, vocab=50257),
    "gpt2-xl": ModelShape(name="gpt2-xl", layers=48, hidden=1600, heads=25, vocab=50257),
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


def shape_from_hf_config(path: str | Path) -> ModelShape:
    """A Hugging Face `config.json` of a GPT-2 (`n_layer`, `n_embd`, `n_head`) or LLaMA-style model
    (`num_hidden_layers`, `hidden_size`, `num_attention_heads`, `intermediate_size`). ShapeError otherwise."""
    try:
        config = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ShapeError(f"{path}: not a readable config.json ({error})") from None
    if not isinstance(config, dict):
        raise ShapeError(f"{path}: a config.json holds one JSON object")
    name = Path(path).parent.name or Path(path).name
    try:
        if "n_layer" in config:
            return ModelShape(name=name, family="gpt2", layers=config["n_layer"], hidden=config["n_embd"],
                              heads=config["n_head"], vocab=config["vocab_size"],
                              ffn_hidden=config.get("n_inner"), max_positions=config.get("n_positions", 1024),
                              tied_embeddings=config.get("tie_word_embeddings", True))
        if "num_hidden_layers" in config:
            return ModelShape(name=name, family="llama", layers=config["num_hidden_layers"],
                              hidden=config["hidden_size"], heads=config["num_attention_heads"],
                              kv_heads=config.get("num_key_value_heads"), vocab=config["vocab_size"],
                              ffn_hidden=config.get("intermediate_size"),
                              max_positions=config.get("max_position_embeddings", 4096),
                              tied_embeddings=config.get("tie_word_embeddings", False))
    except KeyError as error:
        raise ShapeError(f"{path}: config.json lacks {error.args[0]!r}") from None
    raise ShapeError(f"{path}: neither a GPT-2 (n_layer, n_embd, n_head) nor a LLaMA-style (num_hidden_layers, "
                     "hidden_size, num_attention_heads) config.json")


def with_sequence(shape: ModelShape, seq: int) -> ModelShape:
    """GPT-2's learned positions must cover the sequence: a longer --seq widens the position table."""
    if shape.family == "gpt2" and seq > shape.max_positions:
        return replace(shape, max_positions=seq)
    return shape
