"""Per-GPU memory of training (and inference) for one parallel strategy: model states, activations, the rest.

Model states follow the ZeRO accounting (Rajbhandari et al. 2020, arXiv:1910.02054, §3 and Fig. 1): mixed-precision
Adam keeps 2 bytes of 16-bit weights, 2 of 16-bit gradients and 12 of optimizer state (fp32 master weights, momentum,
variance) per parameter: 16 bytes under DDP. ZeRO-2 and ZeRO-3 equal DeepSpeed's own estimators
(microsoft/DeepSpeed `deepspeed/runtime/zero/stage_1_and_2.py::estimate_zero2_model_states_mem_needs`,
`deepspeed/runtime/zero/stage3.py::estimate_zero3_model_states_mem_needs`), which also count the fp32 copy of the
gradient partition DeepSpeed makes before the step. Activations follow Korthikanti et al. 2022 (arXiv:2205.05198,
"Reducing Activation Recomputation in Large Transformer Models") and Megatron-LM's
`megatron/training/theoretical_memory_usage.py`. Every term of a breakdown names its source in `sources`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuready.shapes import ModelShape

PRECISIONS = ("amp-bf16", "bf16", "fp32")
OPTIMIZERS = ("adamw", "sgd", "adafactor")
RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("flash", "eager")
OFFLOADS = ("none", "optimizer", "optimizer+params")

MIB = 2**20
GIB = 2**30
"""Memory in plan's outputs is in GiB (2**30 bytes); bandwidth in decimal GB/s (DESIGN.md §2)."""

# --- constants, each with its source -------------------------------------------------------------------------
CUDA_CONTEXT_BYTES = 700 * MIB
"""CUDA context plus PyTorch's loaded kernels on the first CUDA call: a measured order of magnitude, not a constant
of nature (723 MiB for `torch.randn(1).cuda()`, https://discuss.pytorch.org/t/what-is-the-reason-for-pytorchs-gpu-
memory-floor/73021; "~700+MB depending on the CUDA version, used device", https://discuss.pytorch.org/t/high-gpu-
memory-overhead/81330). CUDA's lazy module loading (11.7+) lowers it."""
FRAGMENTATION_FRACTION = 0.10
"""Margin for the PyTorch caching allocator's fragmentation (reserved minus allocated), as a share of everything
else. An assumption of gpuready, not a published figure: compare max_memory_reserved() with max_memory_allocated()
on a real run to replace it."""
ZERO3_GATHER_BYTES_PER_PARAM = 4
"""DeepSpeed's `largest_layer_memory = 4 * largest_layer_params`: "2 bytes fp16 params are gathered and 2 bytes fp16
grads are computed" (stage3.py, docs/code-docs/source/memory.rst)."""
ACTIVATION_BYTES = {"amp-bf16": 2, "bf16": 2, "fp32": 4}
"""Korthikanti's coefficients count 16-bit activations; fp32 doubles them."""
DROPOUT_MASK_COEFFICIENT = 2.0
"""The two dropout masks per layer (after attention and after the MLP, 1 byte per element: 2·sbh) in Korthikanti's
34·sbh; left out when training runs without dropout."""
LOGITS = ("fp32", "bf16")
"""The loss's convention (`--logits`, plan and bench alike): fp32 upcasts the logits before the loss
(`F.cross_entropy(logits.float(), ...)`, as Hugging Face's causal-LM heads do); bf16 keeps them in the model's 16-bit
dtype (a plain nanoGPT-style loop, autocast off for the loss). Under --precision fp32 both are fp32."""
CROSS_ENTROPY_PEAK_TENSORS = 3
"""Tensors of one element per logit live when backward starts, every layer's activations still held: nll_loss's
gradient (dense over the vocabulary), log_softmax's saved output and log_softmax's input gradient, each in the loss's
dtype: PyTorch derivatives.yaml, `_log_softmax_backward_data(grad, result, ...)`: 12 bytes per logit in fp32, 6 in
bf16. Under the fp32 convention in 16-bit training the 16-bit logits and their fp32 copy (6 bytes) are freed by then,
and the forward's own peak (16-bit logits + fp32 copy + log_softmax output: 10 bytes) is lower; under bf16 the forward
holds 4. Measured so (fp32) on an H200 against a plain loop (benchmarks/plan_memory_vs_plain.py, tests/fixtures/plan)."""
NORM_EXTRA_COEFFICIENT = {("gpt2", "amp-bf16"): 4.0, ("llama", "bf16"): 8.0, ("llama", "amp-bf16"): 12.0,
                          ("llama", "fp32"): 8.0}
"""Bytes·sbh per layer the norms keep beyond Korthikanti's 16-bit norm input (2·sbh per norm), by family and
precision. Under autocast the residual stream stays fp32 (embeddings are not autocast), so LayerNorm saves its fp32
input (+2 per norm). Hugging Face's LlamaRMSNorm computes in fp32 (`hidden_states.to(torch.float32)`, `pow(2)`,
`* rsqrt`, then `weight * hidden_states.to(input_dtype)`): it saves an fp32 copy of its input and the normalised
output in the input's dtype, 6 bytes·sbh per norm in bf16 (+4), 8 under autocast's fp32 residual (+6) and 8 in fp32
where 4 is the base (+4 in bytes). Measured on an H200: Llama-2 7B bf16 peaks at 62.1 GiB, as this count gives."""
SOURCES = {
    "zero": "Rajbhandari et al. 2020, ZeRO (arXiv:1910.02054) §3, Fig. 1: mixed-precision Adam = 2+2+12 bytes/param",
    "deepspeed": "microsoft/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs, "
                 "stage3.py estimate_zero3_model_states_mem_needs (docs/code-docs/source/memory.rst)",
    "korthikanti": "Korthikanti et al. 2022 (arXiv:2205.05198) §4: per-layer activations sbh(34 + 5as/h), with TP+SP "
                   "/t, selective recompute drops 5as/h, full recompute keeps 2sbh",
    "megatron": "NVIDIA/Megatron-LM megatron/training/theoretical_memory_usage.py: per-layer sbh(18 + 4·ffn/h), first "
                "pipeline stage holds PP micro-batches in flight, embeddings and output layer + cross-entropy",
    "flash": "Dao et al. 2022, FlashAttention (arXiv:2205.14135): the s×s scores are never stored, only O(s) statistics",
    "phases": "The peak is the larger of two moments (measured against a plain PyTorch loop on an H200, "
              "benchmarks/plan_memory_vs_plain.py): the start of backward (weights, optimizer states, every layer's "
              "activations, the loss's fp32 tensors; no gradients yet: zero_grad(set_to_none=True)) and the end of "
              "backward (weights, optimizer states, all gradients, the last layer's working set). In between, "
              "gradients grow as activations are freed.",
    "autocast": "torch.autocast caches a bf16 copy of each fp32 weight it casts (2 bytes per matmul parameter) for the "
                "forward and backward; a block run under full recompute (torch.utils.checkpoint) keeps no copy",
    "hf_norms": "Hugging Face LlamaRMSNorm / autocast's fp32 residual stream: what the norms save beyond 2·sbh each "
                "(NORM_EXTRA_COEFFICIENT)",
    "context": "CUDA context: ~700 MiB measured (discuss.pytorch.org/t/73021, /t/81330); an order of magnitude",
    "fragmentation": "allocator fragmentation margin: gpuready's assumption (10%), not a published figure",
    "ddp_buckets": "PyTorch DDP (torch.nn.parallel.DistributedDataParallel, gradient_as_bucket_view=False by default): "
                   "the buckets copy every gradient; 'the saved memory size will be equal to the total gradients size'",
    "fsdp_prefetch": "PyTorch FSDP prefetches the next unit's all-gather (BackwardPrefetch.BACKWARD_PRE, forward_prefetch): "
                     "one more layer unsharded in 16 bits",
    "adafactor": "Shazeer & Stern 2018, Adafactor (arXiv:1804.04235): factored second moment, rows + columns per matrix",
    "sgd": "torch.optim.SGD: one momentum buffer per parameter, in the parameter's dtype",
    "offload": "DeepSpeed ZeRO-Offload / ZeRO-Infinity (arXiv:2101.06840, arXiv:2104.07857): optimizer states "
               "(and with params, the 16-bit weights) live in CPU memory",
}


@dataclass(frozen=True, kw_only=True)
class TrainSetup:
    shape: ModelShape
    seq: int
    micro_batch: int
    precision: str = "amp-bf16"
    """amp-bf16: fp32 master weights + bf16 autocast; bf16: pure bf16 weights, gradients and optimizer states (as
    torch.optim keeps states in the parameter's dtype: `model.to(torch.bfloat16)`, measured so on the H200); fp32:
    everything in fp32."""
    optimizer: str = "adamw"
    recompute: str = "none"
    attention: str = "flash"
    dropout: bool = False
    """Dropout masks kept for backward (Korthikanti's count includes two per layer, 1 byte per element); LLM training
    today mostly runs without dropout, and gpuready's own model (workloads/gpt.py) has none."""
    logits: str = "fp32"
    """The loss's dtype (LOGITS): fp32 upcasts the logits (Hugging Face), bf16 keeps them 16-bit (nanoGPT)."""

    def __post_init__(self) -> None:
        for label, value, allowed in (("precision", self.precision, PRECISIONS),
                                      ("optimizer", self.optimizer, OPTIMIZERS),
                                      ("recompute", self.recompute, RECOMPUTE),
                                      ("attention", self.attention, ATTENTION),
                                      ("logits", self.logits, LOGITS)):
            if value not in allowed:
                raise ValueError(f"--{label} {value!r}: one of {', '.join(allowed)}")
        if self.seq < 1 or self.micro_batch < 1:
            raise ValueError("--seq and --micro-batch must be at least 1")


@dataclass(frozen=True, kw_only=True)
class Strategy:
    name: str
    dp: int
    tp: int = 1
    pp: int = 1
    zero: int = 0
    """0 DDP (replicated states), 1, 2, 3 (FSDP full shard): what the data-parallel group shards."""
    offload: str = "none"

    def __post_init__(self) -> None:
        if min(self.dp, self.tp, self.pp) < 1 or self.zero not in (0, 1, 2, 3) or self.offload not in OFFLOADS:
            raise ValueError(f"strategy {self.name!r}: dp, tp, pp >= 1, zero in 0..3, offload in {OFFLOADS}")

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp


@dataclass(frozen=True, kw_only=True)
class MemoryBreakdown:
    parameters: int
    gradients: int
    optimizer: int
    activations: int
    other: int
    terms: dict[str, int] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    backward_working: int = 0
    """What the end of backward holds beside the gradients: the layer being recomputed (full recompute), the first
    layer's activations, DDP's gradient buckets."""

    @property
    def model_states(self) -> int:
        return self.parameters + self.gradients + self.optimizer

    @property
    def peak_phase(self) -> str:
        """`backward_start` (activations and the loss held, no gradients yet) or `backward_end` (all gradients)."""
        return "backward_end" if self.gradients + self.backward_working > self.activations else "backward_start"

    @property
    def total(self) -> int:
        """The peak: weights, optimizer states and what lives throughout, plus the larger of the two moments
        (SOURCES["phases"])."""
        return (self.parameters + self.optimizer + self.other
                + max(self.activations, self.gradients + self.backward_working))

    @property
    def allocated(self) -> int:
        """What PyTorch's allocator counts (`torch.cuda.max_memory_allocated()`): the total without the CUDA context
        and the fragmentation margin, which live outside it. The calibration compares this figure."""
        return self.total - self.terms.get("cuda_context_bytes", 0) - self.terms.get("fragmentation_margin_bytes", 0)


# --- model states --------------------------------------------------------------------------------------------

def deepspeed_model_states(total_params: float, largest_layer_params: float, *, stage: int, gpus_per_node: int = 1,
                           nodes: int = 1, offload: str = "none") -> int:
    """Per-GPU bytes of DeepSpeed's estimator for ZeRO-2 or ZeRO-3 (model states only), as its code computes them:
    ZeRO-2: 2P + 18P/N (offload optimizer: 2P); ZeRO-3: 4·largest + 18P/N (offload optimizer: 4·largest + 2P/N;
    offload both: 4·largest). N = gpus_per_node × nodes."""
    gpus = gpus_per_node * nodes
    if stage == 2:
        if offload == "none":
            return int(2 * total_params + int(18 * total_params / gpus))
        return int(2 * total_params)
    if stage == 3:
        largest = ZERO3_GATHER_BYTES_PER_PARAM * largest_layer_params
        if offload == "none":
            return int(largest + int(18 * total_params / gpus))
        if offload == "optimizer":
            return int(largest + int(2 * total_params / gpus))
        return int(largest)
    raise ValueError("DeepSpeed's estimators cover ZeRO-2 and ZeRO-3")


def largest_layer_parameters(shape: ModelShape) -> int:
    """The largest single module's own parameters, as DeepSpeed's `model_to_params` counts them: the token embedding
    (or untied head) for every model gpuready knows, else the widest linear layer."""
    h = shape.hidden
    kv = shape.key_value_heads * shape.head_dim
    candidates = [shape.vocab * h, h * shape.mlp_hidden + (shape.mlp_hidden if shape.biases else 0),
                  h * h + (h if shape.biases else 0)]
    if shape.family == "gpt2":  # Hugging Face's fused c_attn: one Conv1D of h × (h + 2kv) plus bias
        candidates += [h * (h + 2 * kv) + h + 2 * kv, shape.max_positions * h]
    return max(candidates)


def stage_parameters(shape: ModelShape, tp: int = 1, pp: int = 1) -> int:
    """Parameters held by the most loaded GPU of a TP × PP grid: ceil(L/PP) blocks plus the embeddings (the first
    stage holds the token and position tables; under PP=1 also the untied head), all divided by TP (Megatron-LM
    theoretical_memory_usage: `(transformer/PP + embedding)/TP`)."""
    blocks = math.ceil(shape.layers / pp) * shape.layer_parameters()
    if pp == 1:
        embeddings = shape.embedding_parameters()
    else:
        positions = shape.max_positions * shape.hidden if shape.family == "gpt2" else 0
        embeddings = shape.vocab * shape.hidden + positions
    return math.ceil((blocks + embeddings) / tp)


def _optimizer_state_elements(shape: ModelShape, optimizer: str, params: int, tp: int, pp: int) -> float:
    """fp32 optimizer-state elements per stage parameter set (excluding master weights)."""
    if optimizer == "adamw":
        return 2.0 * params
    if optimizer == "sgd":
        return 1.0 * params
    # Adafactor: each matrix keeps rows + columns, each vector its own size (no first moment: beta1=None)
    h, f, kv = shape.hidden, shape.mlp_hidden, shape.key_value_heads * shape.head_dim
    if shape.family == "gpt2":
        matrices = [(h, h), (h, kv), (h, kv), (h, h), (h, f), (f, h)]
    else:
        matrices = [(h, h), (h, kv), (h, kv), (h, h), (h, f), (h, f), (f, h)]
    factored = sum(r + c for r, c in matrices)
    matrix_elements = sum(r * c for r, c in matrices)
    vectors = shape.layer_parameters() - matrix_elements
    per_layer = factored + vectors
    blocks = math.ceil(shape.layers / pp) * per_layer
    embeddings = (shape.vocab + shape.hidden) * (1 if shape.tied or pp > 1 else 2)
    return (blocks + embeddings) / tp


def _model_states(setup: TrainSetup, strategy: Strategy, terms: dict[str, int], sources: list[str]) -> tuple[int, int, int]:
    shape = setup.shape
    p = stage_parameters(shape, strategy.tp, strategy.pp)
    n = strategy.dp
    z = strategy.zero
    if setup.precision == "amp-bf16" and strategy.zero == 0:
        # PyTorch's own AMP (torch.autocast): fp32 weights and gradients, AdamW's fp32 moments; the bf16 copies of
        # the weights are autocast's (activations). 16 bytes per parameter, as ZeRO's 2 + 2 + 12
        weight, grad, master = 4, 4, 0
    elif setup.precision == "amp-bf16":
        weight, grad, master = 2, 2, 4
    elif setup.precision == "bf16":
        weight, grad, master = 2, 2, 0
    else:
        weight, grad, master = 4, 4, 0
    state_elements = _optimizer_state_elements(shape, setup.optimizer, p, strategy.tp, strategy.pp)
    state_bytes_each = 4
    if setup.precision == "bf16":
        state_bytes_each = 2  # torch.optim keeps its states (Adam's moments, SGD's momentum) in the parameter's dtype
    optimizer_full = master * p + state_bytes_each * state_elements
    # DeepSpeed converts the gradient partition to fp32 before the step when the weights are 16-bit with a master
    fp32_grad_partition = 4 if master and z >= 1 else 0
    sources.append(SOURCES["zero"])
    if setup.optimizer != "adamw":
        sources.append(SOURCES[setup.optimizer])
    if z == 0:
        return weight * p, grad * p, int(optimizer_full)
    sources.append(SOURCES["deepspeed"])
    if z == 1:
        return weight * p, grad * p + math.ceil(fp32_grad_partition * p / n), math.ceil(optimizer_full / n)
    if z == 2:
        if strategy.offload != "none":
            sources.append(SOURCES["offload"])
            terms["optimizer_offloaded_to_cpu_bytes"] = int(optimizer_full + (grad + fp32_grad_partition) * p)
            return weight * p, 0, 0
        return (weight * p, math.ceil((grad + fp32_grad_partition) * p / n), math.ceil(optimizer_full / n))
    # ZeRO-3 / FSDP: everything sharded, plus the largest layer gathered (16-bit weights and gradients)
    largest = math.ceil(largest_layer_parameters(shape) / strategy.tp)
    terms["zero3_gathered_layer_bytes"] = ZERO3_GATHER_BYTES_PER_PARAM * largest
    gathered_weights, gathered_grads = weight * largest, grad * largest
    if strategy.offload == "optimizer":
        sources.append(SOURCES["offload"])
        terms["optimizer_offloaded_to_cpu_bytes"] = int(optimizer_full + (fp32_grad_partition or grad) * p)
        return gathered_weights + math.ceil(weight * p / n), gathered_grads, 0
    if strategy.offload == "optimizer+params":
        sources.append(SOURCES["offload"])
        terms["offloaded_to_cpu_bytes"] = int(optimizer_full + (weight + grad + fp32_grad_partition) * p)
        return gathered_weights, gathered_grads, 0
    # DeepSpeed's 18 = 2 (16-bit weights) + 4 (fp32 gradient partition) + 4 (master) + 8 (Adam): the 16-bit gradients
    # exist only for the gathered layer
    partition_grad = fp32_grad_partition or grad
    return (gathered_weights + math.ceil(weight * p / n), gathered_grads + math.ceil(partition_grad * p / n),
            math.ceil(optimizer_full / n))


# --- activations ---------------------------------------------------------------------------------------------

def layer_activation_coefficient(shape: ModelShape) -> float:
    """Korthikanti's per-layer coefficient c in c·sbh bytes (16-bit, no attention scores), with dropout: 34 for GPT-2
    (ffn = 4h): attention 11, MLP 19, norms 4. Generalised as Megatron-LM does, 18 + 4·ffn/h; a gated (SwiGLU) MLP
    keeps gate and up outputs, the activation and the product (8·ffn/h instead of 4·ffn/h: gpuready's count). The two
    dropout masks (2·sbh) are in both; `_activations` takes them out for training without dropout."""
    ratio = shape.mlp_hidden / shape.hidden
    if shape.family == "gpt2":
        return 18.0 + 4.0 * ratio
    return 18.0 + 8.0 * ratio


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int, *, tp: int = 1, recompute: str = "none",
                            scores: bool = True, coefficient: float = 34.0) -> float:
    """One layer's activation bytes, Korthikanti et al. 2022 with TP and sequence parallelism: sbh/t·(34 + 5as/h);
    selective recompute or flash attention (scores=False): 34·sbh/t; full recompute: 2·sbh/t (the layer input)."""
    if recompute == "full":
        return 2.0 * s * b * h / tp
    attention = 5.0 * a * s / h if scores and recompute != "selective" else 0.0
    return s * b * h * (coefficient + attention) / tp


def _activations(setup: TrainSetup, strategy: Strategy, terms: dict[str, int], sources: list[str]) -> tuple[int, int]:
    """(what the start of backward holds beside weights and optimizer states, what the end of backward holds beside
    them and the gradients) on the most loaded pipeline stage."""
    shape = setup.shape
    s, b, h, a, v = setup.seq, setup.micro_batch, shape.hidden, shape.heads, shape.vocab
    t = strategy.tp
    scale = ACTIVATION_BYTES[setup.precision] / 2
    # autocast's fp32 residual stream is PyTorch AMP's (zero == 0); DeepSpeed and FSDP mixed precision hold bf16
    # weights, so their activations are bf16 ones
    autocast = setup.precision == "amp-bf16" and strategy.zero == 0
    activation_precision = "bf16" if setup.precision == "amp-bf16" and not autocast else setup.precision
    norms = NORM_EXTRA_COEFFICIENT.get((shape.family, activation_precision), 0.0)
    coefficient = layer_activation_coefficient(shape) - (0.0 if setup.dropout else DROPOUT_MASK_COEFFICIENT)
    scores = setup.attention == "eager"
    sources += [SOURCES["korthikanti"], SOURCES["megatron"], SOURCES["phases"]]
    if not scores:
        sources.append(SOURCES["flash"])
    if norms:
        sources.append(SOURCES["hf_norms"])
    full_layer = korthikanti_layer_bytes(s, b, h, a, tp=t, recompute="none", scores=scores,
                                         coefficient=coefficient) * scale + norms * s * b * h / t
    if setup.recompute == "full":  # each layer keeps its input: the residual stream, fp32 under autocast
        residual_bytes = 4 if setup.precision == "fp32" or autocast else 2
        per_layer = residual_bytes * s * b * h / t
    elif setup.recompute == "selective":
        per_layer = korthikanti_layer_bytes(s, b, h, a, tp=t, recompute="selective", scores=scores,
                                            coefficient=coefficient) * scale + norms * s * b * h / t
    else:
        per_layer = full_layer
    # Megatron: the first pipeline stage holds PP micro-batches of L/PP layers in flight (1F1B), i.e. L layers' worth
    layers_in_flight = math.ceil(shape.layers / strategy.pp) * strategy.pp
    layers = per_layer * layers_in_flight
    terms["layer_activations_bytes"] = int(layers)
    if scores and setup.recompute == "none":
        terms["attention_scores_bytes"] = int(5.0 * a * s * s * b / t * scale * layers_in_flight)
    # embeddings output (and GPT-2's dropout mask), on the first stage for each micro-batch in flight
    embedding = (2 * s * b * h + (s * b * h if shape.family == "gpt2" else 0)) * scale / t * strategy.pp
    terms["embedding_activations_bytes"] = int(embedding)
    # the loss in fp32 at the start of backward (vocabulary-parallel under TP), on the last stage only
    loss = s * b * v * CROSS_ENTROPY_PEAK_TENSORS * loss_bytes(setup) / t
    terms["cross_entropy_bytes"] = int(loss)
    copies = _autocast_copies(setup, strategy)
    if copies:
        terms["autocast_weight_copies_bytes"] = copies
        sources.append(SOURCES["autocast"])
    last_stage = per_layer * math.ceil(shape.layers / strategy.pp) + loss
    first_stage = layers + embedding + (loss if strategy.pp == 1 else 0)
    # the end of backward: the first layer's working set (recomputed, or still held), its input gradient
    working = full_layer
    terms["backward_layer_working_set_bytes"] = int(working)
    return int(max(first_stage, last_stage) + copies), int(working)


def loss_bytes(setup: TrainSetup) -> int:
    """Bytes of one element of the loss's tensors: 4 where the logits are upcast (or the run is fp32), else 2."""
    return 4 if setup.logits == "fp32" or setup.precision == "fp32" else 2


def _autocast_copies(setup: TrainSetup, strategy: Strategy) -> int:
    """autocast's bf16 copies of fp32 weights (PyTorch AMP, `zero == 0`): every matmul weight, or under full recompute
    only those outside the checkpointed blocks (the output head)."""
    if setup.precision != "amp-bf16" or strategy.zero != 0:
        return 0
    shape = setup.shape
    head = shape.vocab * shape.hidden
    if setup.recompute == "full":
        weights = head
    else:
        weights = stage_parameters(shape, strategy.tp, strategy.pp) - (0 if shape.tied else head)
    return int(2 * weights / (strategy.tp if setup.recompute == "full" else 1))


# --- the breakdown -------------------------------------------------------------------------------------------

def memory_per_gpu(setup: TrainSetup, strategy: Strategy) -> MemoryBreakdown:
    """Bytes one GPU holds at its peak for this strategy (the most loaded GPU where they differ)."""
    terms: dict[str, int] = {}
    sources: list[str] = []
    parameters, gradients, optimizer = _model_states(setup, strategy, terms, sources)
    activations, backward_working = _activations(setup, strategy, terms, sources)
    other = {"cuda_context_bytes": CUDA_CONTEXT_BYTES}
    sources.append(SOURCES["context"])
    if strategy.zero == 0 and strategy.dp > 1:  # full at the end of backward
        terms["ddp_gradient_buckets_bytes"] = gradients
        backward_working += gradients
        sources.append(SOURCES["ddp_buckets"])
    if strategy.zero == 3:
        other["fsdp_prefetch_bytes"] = (2 if setup.precision != "fp32" else 4) * math.ceil(
            setup.shape.layer_parameters() / strategy.tp)
        sources.append(SOURCES["fsdp_prefetch"])
    peak = MemoryBreakdown(parameters=parameters, gradients=gradients, optimizer=optimizer, activations=activations,
                           other=sum(other.values()), backward_working=backward_working).total
    other["fragmentation_margin_bytes"] = int(FRAGMENTATION_FRACTION * peak)
    sources.append(SOURCES["fragmentation"])
    terms.update(other)
    return MemoryBreakdown(parameters=parameters, gradients=gradients, optimizer=optimizer, activations=activations,
                           other=sum(other.values()), backward_working=backward_working, terms=terms,
                           sources=tuple(dict.fromkeys(sources)))


# --- strategies ----------------------------------------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


def strategies_for(gpus: int, nvlink_domain: int, nodes: int = 1) -> list[Strategy]:
    """Every layout gpuready weighs on `gpus` GPUs in all (`nodes` nodes): data parallel (DDP, ZeRO-1, ZeRO-2,
    FSDP), their offload variants, pure TP and PP of every divisor, and the TP × PP × DP grids (their DP replicas
    shard the optimizer, as Megatron's distributed optimizer does). Which of them make sense on a machine (TP inside
    the NVLink domain of `nvlink_domain`, TP not across nodes) strategy.py judges."""
    del nvlink_domain, nodes  # all layouts are listed; plan_training judges them against the machine
    if gpus < 1:
        raise ValueError("a plan needs at least one GPU")
    if gpus == 1:
        return [Strategy(name="single", dp=1),
                Strategy(name="zero2+offload", dp=1, zero=2, offload="optimizer"),
                Strategy(name="fsdp+offload", dp=1, zero=3, offload="optimizer+params")]
    out = [Strategy(name="ddp", dp=gpus), Strategy(name="zero1", dp=gpus, zero=1),
           Strategy(name="zero2", dp=gpus, zero=2), Strategy(name="fsdp", dp=gpus, zero=3),
           Strategy(name="zero2+offload", dp=gpus, zero=2, offload="optimizer"),
           Strategy(name="fsdp+offload-optimizer", dp=gpus, zero=3, offload="optimizer"),
           Strategy(name="fsdp+offload", dp=gpus, zero=3, offload="optimizer+params")]
    for tp in _divisors(gpus):
        for pp in _divisors(gpus // tp):
            if tp == 1 and pp == 1:
                continue
            dp = gpus // (tp * pp)
            parts = ([f"tp={tp}"] if tp > 1 else []) + ([f"pp={pp}"] if pp > 1 else []) + ([f"dp={dp}"] if dp > 1 else [])
            out.append(Strategy(name="×".join(parts), dp=dp, tp=tp, pp=pp, zero=1 if dp > 1 else 0))
    return out


# --- inference -----------------------------------------------------------------------------------------------

INFERENCE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}


def inference_memory(shape: ModelShape, batch: int, context: int, tp: int = 1, precision: str = "bf16") -> dict:
    """Per-GPU bytes to serve `shape` with TP `tp`: the weights split over TP, the KV cache
    2 × layers × kv_heads × head_dim × context × batch × bytes split over TP by key/value heads (replicated when
    there are fewer kv heads than TP ranks, as vLLM does), the CUDA context."""
    if precision not in INFERENCE_BYTES:
        raise ValueError(f"--precision {precision!r}: one of {', '.join(INFERENCE_BYTES)}")
    if tp < 1 or batch < 1 or context < 1:
        raise ValueError("tp, batch and context must be at least 1")
    size = INFERENCE_BYTES[precision]
    kv_bytes = 2.0 if size < 2 else size  # the cache stays 16-bit under weight-only quantisation
    if precision == "fp8":
        kv_bytes = 1.0
    weights = math.ceil(shape.parameters() * size / tp)
    kv_heads_per_gpu = max(1, shape.key_value_heads // tp) if shape.key_value_heads >= tp else 1
    kv = int(2 * shape.layers * kv_heads_per_gpu * shape.head_dim * context * batch * kv_bytes)
    total = weights + kv + CUDA_CONTEXT_BYTES
    return {"tp": tp, "precision": precision, "weights_bytes": weights, "kv_cache_bytes": kv,
            "cuda_context_bytes": CUDA_CONTEXT_BYTES, "total_bytes": total,
            "sources": ("weights: parameters × bytes per parameter / TP",
                        "KV cache: 2 (K and V) × layers × kv_heads × head_dim × context × batch × bytes "
                        "(vLLM/PagedAttention, Kwon et al. 2023, arXiv:2309.06180)",
                        SOURCES["context"])}
