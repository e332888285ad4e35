"""ModelSpec: the shapes of a model of a served family, and the named real shapes for dummy:SHAPE.

A family (server/families/) is chosen by `arch`: the dense llama layer (llama, mistral,
qwen2, qwen3; SmolLM is llama) or the mixture-of-experts layer (qwen3moe: softmax router;
glm4moe: sigmoid router with a selection bias, shared expert, leading dense layers, partial
RoPE). The MoE fields are 0 / defaults for a dense model.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

DENSE_ARCHS = ("llama", "mistral", "qwen2", "qwen3", "smollm")
MOE_ARCHS = ("qwen3moe", "glm4moe", "deepseek2", "gptoss", "qwen3next", "kimilinear",
             "glm5next")
MLA_ARCHS = ("deepseek2", "kimilinear", "glm5next")
RECURRENT_ARCHS = ("qwen3next", "kimilinear", "glm5next")
ARCH_ALIASES = {"smollm": "llama", "gpt-oss": "gptoss", "gpt_oss": "gptoss",   # file's -> ours
                "kimi-linear": "kimilinear", "kimi_linear": "kimilinear",
                "qwen35moe": "qwen3next",      # Qwen3.5/3.6 MoE: the same layers (gguf_qwen3next.py)
                "glm5-next": "glm5next", "glm5_next": "glm5next"}
SUPPORTED_ARCHS = DENSE_ARCHS + MOE_ARCHS + ("gpt-oss", "kimi-linear", "qwen35moe", "glm5-next")
ROUTERS = ("softmax", "sigmoid", "topk_softmax")


class UnsupportedModel(ValueError):
    pass


@dataclass(frozen=True)
class ModelSpec:
    arch: str                 # llama | mistral | qwen2 | qwen3 (SmolLM is llama) | qwen3moe | glm4moe
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    max_context: int = 4096
    tie_embeddings: bool = False
    qkv_bias: bool = False    # Qwen2/2.5
    qk_norm: bool = False     # Qwen3
    # Llama 3.1 style rope scaling: (factor, low_freq_factor, high_freq_factor, original_max) or None
    rope_scaling: tuple | None = None
    name: str = ""
    # mixture of experts (0 / defaults: a dense model)
    n_experts: int = 0          # routed experts a MoE layer holds
    n_experts_used: int = 0     # experts each token takes (top-k)
    expert_ff: int = 0          # one routed expert's intermediate size
    n_shared_experts: int = 0   # GLM: experts every token takes, as one MLP of shared_ff
    shared_ff: int = 0          # the shared MLP's intermediate size (expert_ff * n_shared)
    first_dense_layers: int = 0  # leading layers with a dense MLP of d_ff (GLM)
    router: str = ""            # softmax | sigmoid (with a selection-only bias)
    norm_topk_prob: bool = False  # renormalise the chosen experts' weights to sum 1
    routed_scaling_factor: float = 1.0
    n_group: int = 1            # group-limited top-k: experts in n_group groups,
    topk_group: int = 1         # tokens choose among the best topk_group groups
    rotary_dim: int = 0         # dims of a head RoPE rotates (0: all; GLM: half)
    nextn_layers: int = 0       # the file's MTP/NextN blocks after the trunk (counted)
    mtp_layers: int = 0         # of them, those run (`--draft mtp`: 1, server/families/nextn.py):
                                # their weights loaded, their KV rows after the trunk's
    # multi-head latent attention (deepseek2; 0: none). head_dim is then the q/k head's
    # nope + rope dims, n_kv_heads == n_heads, rotary_dim the rope dims
    q_lora_rank: int = 0        # q through q_a (d -> q_lora_rank), q_a_norm, q_b; 0: plain q
    kv_lora_rank: int = 0       # the latent a token stores (with its rope dims)
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    attn_scale_mul: float = 1.0  # YaRN's mscale**2 on the softmax scale (mscale_all_dim)
    # recurrent layers (qwen3next: Gated DeltaNet; 0: none). Layer i is full (gated)
    # attention where (i + 1) % full_attn_every == 0, a linear-attention layer otherwise,
    # whose state a stream keeps (the KV layout spec's fixed part, server/shapes/kv_layout.py)
    full_attn_every: int = 0
    lin_k_heads: int = 0        # q/k heads of a linear layer
    lin_v_heads: int = 0        # v heads (each k head serves lin_v_heads // lin_k_heads)
    lin_k_dim: int = 0
    lin_v_dim: int = 0
    conv_kernel: int = 0        # the short causal convolution's width (4)
    # the linear layers by index where they follow no every-n-th pattern (Kimi-Linear: full
    # attention at 3, 7, ..., 23 and 26); () keeps full_attn_every's pattern
    linear_layers: tuple = ()
    lin_lower_bound: float | None = None   # KDA's safe gate: g = lb * sigmoid(...) (GLM-5.3)
    zero_centred_norms: bool = False  # HF Qwen3-Next: RMSNorm weights stored as w - 1
    # GLM-5.3-Flash (glm5next; 0 / () elsewhere): the DSA indexer of the latent layers, with
    # keys pooled in groups of index_kpool (kernels/dsa.py), and mHC's residual streams
    index_kpool: int = 0        # tokens a pooled indexer key stands for (16)
    index_topk: int = 0         # keys a sparse query reads (2048), in whole pools, + the tail
    index_heads: int = 0        # the indexer's query heads (32)
    index_head_dim: int = 0     # their width, and a pooled key's (128)
    index_shared: tuple = ()    # latent layers whose indexer is "shared": they reuse the
                                # previous full layer's choice and keep no pooled keys
    hc_mult: int = 0            # mHC's residual streams (4; 0: a plain residual)
    swiglu_limit: float = 0.0   # gate and up clamped to +-limit before SwiGLU (0: none)
    # gpt-oss (0 / False / None elsewhere)
    sliding_window: int = 0     # rows a sliding layer's query reads (its last ones); layers
                                # 0, 2, 4, ... slide, the others attend to the whole context
    attn_sinks: bool = False    # a learned logit a head joins the softmax's denominator
    o_bias: bool = False        # o_proj has a bias (and every expert's gate/up/down; the router)
    # YaRN: (factor, original_max_context, beta_fast, beta_slow, truncate) or None
    rope_yarn: tuple | None = None

    @property
    def moe(self) -> bool:
        return self.n_experts > 0

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_nope_head_dim(self) -> int:
        return self.head_dim - self.qk_rope_head_dim

    @property
    def rot(self) -> int:
        """Dims of each head RoPE rotates (the first `rot`, half-rotation form)."""
        return self.rotary_dim or self.head_dim

    @property
    def recurrent(self) -> bool:
        return self.full_attn_every > 0 or bool(self.linear_layers)

    def is_linear_layer(self, i: int) -> bool:
        """A recurrent (linear-attention) layer: it keeps a state a stream, no KV rows."""
        if self.linear_layers:
            return i in self.linear_layers
        return self.recurrent and (i + 1) % self.full_attn_every != 0

    @property
    def n_kv_layers(self) -> int:
        """Layers that write KV rows (every layer but the linear ones)."""
        return sum(not self.is_linear_layer(i) for i in range(self.n_layers))

    def kv_index(self, i: int) -> int:
        """Layer i's index among the layers that write KV rows."""
        return sum(not self.is_linear_layer(j) for j in range(i))

    def is_moe_layer(self, i: int) -> bool:
        return self.moe and i >= self.first_dense_layers

    def window(self, i: int) -> int:
        """Rows layer i's query reads back (0: the whole context); gpt-oss: even layers slide."""
        return self.sliding_window if self.sliding_window and i % 2 == 0 else 0

    @property
    def group(self) -> int:
        return self.n_heads // self.n_kv_heads

    @property
    def n_params(self) -> int:
        """Weights held (every expert), from the family's tensor table (server/families)."""
        from server.families import family
        return family(self).n_params(self)

    @property
    def n_active_params(self) -> int:
        """Weights one token reads (the routed experts it takes only)."""
        from server.families import family
        return family(self).n_params(self, active=True)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def check_arch(arch: str) -> str:
    a = arch.lower()
    if a not in SUPPORTED_ARCHS:
        raise UnsupportedModel(
            f"architecture {arch!r} is not supported; foldserve runs the llama family ("
            + ", ".join(DENSE_ARCHS) + ") and the mixture-of-experts families ("
            + ", ".join(MOE_ARCHS) + ")")
    return ARCH_ALIASES.get(a, a)


# Named real shapes, for dummy:SHAPE (seeded random weights, nothing read from disk).
SHAPES: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec("llama", 30, 576, 9, 3, 64, 1536, 49152, rope_theta=100000.0,
                              rms_eps=1e-5, max_context=8192, tie_embeddings=True,
                              name="smollm2-135m"),
    "llama3-8b": ModelSpec("llama", 32, 4096, 32, 8, 128, 14336, 128256, rope_theta=500000.0,
                           rms_eps=1e-5, max_context=131072,
                           rope_scaling=(8.0, 1.0, 4.0, 8192), name="llama3-8b"),
    "qwen2.5-7b": ModelSpec("qwen2", 28, 3584, 28, 4, 128, 18944, 152064, rope_theta=1000000.0,
                            rms_eps=1e-6, max_context=32768, qkv_bias=True, name="qwen2.5-7b"),
    "qwen3-0.6b": ModelSpec("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, rope_theta=1000000.0,
                            rms_eps=1e-6, max_context=40960, tie_embeddings=True, qk_norm=True,
                            name="qwen3-0.6b"),
    # tiny: for fast tests of every code path (GQA 2:1, odd KV-head count at TP=2)
    "tiny": ModelSpec("llama", 2, 64, 4, 2, 16, 128, 512, rope_theta=10000.0, max_context=512,
                      tie_embeddings=True, name="tiny"),
    "tiny-qwen2": ModelSpec("qwen2", 2, 64, 6, 3, 16, 96, 512, max_context=512, qkv_bias=True,
                            name="tiny-qwen2"),
    "tiny-qwen3": ModelSpec("qwen3", 2, 64, 4, 2, 16, 128, 512, max_context=512, qk_norm=True,
                            name="tiny-qwen3"),
    # mixture of experts: real shapes for `plan`, tiny ones for fast tests
    "qwen3-30b-a3b": ModelSpec("qwen3moe", 48, 2048, 32, 4, 128, 6144, 151936,
                               rope_theta=1000000.0, rms_eps=1e-6, max_context=40960,
                               qk_norm=True, n_experts=128, n_experts_used=8, expert_ff=768,
                               router="softmax", norm_topk_prob=True, name="qwen3-30b-a3b"),
    "glm-4.5-air": ModelSpec("glm4moe", 46, 4096, 96, 8, 128, 10944, 151552,
                             rope_theta=1000000.0, rms_eps=1e-5, max_context=131072,
                             qkv_bias=True, n_experts=128, n_experts_used=8, expert_ff=1408,
                             n_shared_experts=1, shared_ff=1408, first_dense_layers=1,
                             router="sigmoid", norm_topk_prob=True, routed_scaling_factor=1.0,
                             rotary_dim=64, name="glm-4.5-air"),
    # multi-head latent attention (deepseek2): GLM-4.7-Flash's shape (a 512 + 64 latent row)
    "glm-4.7-flash": ModelSpec("deepseek2", 47, 2048, 20, 20, 256, 10240, 154880,
                               rope_theta=1000000.0, rms_eps=1e-5, max_context=202752,
                               n_experts=64, n_experts_used=4, expert_ff=1536,
                               n_shared_experts=1, shared_ff=1536, first_dense_layers=1,
                               router="sigmoid", norm_topk_prob=True, routed_scaling_factor=1.8,
                               rotary_dim=64, q_lora_rank=768, kv_lora_rank=512,
                               qk_rope_head_dim=64, v_head_dim=256, name="glm-4.7-flash"),
    "tiny-deepseek3": ModelSpec("deepseek2", 3, 64, 4, 4, 24, 128, 512, max_context=512,
                                rms_eps=1e-6, n_experts=8, n_experts_used=2, expert_ff=96,
                                n_shared_experts=1, shared_ff=96, first_dense_layers=1,
                                router="sigmoid", norm_topk_prob=True, routed_scaling_factor=2.5,
                                n_group=2, topk_group=1, rotary_dim=8, q_lora_rank=48,
                                kv_lora_rank=32, qk_rope_head_dim=8, v_head_dim=16,
                                name="tiny-deepseek3"),
    "tiny-deepseek3-mtp": ModelSpec("deepseek2", 3, 64, 4, 4, 24, 128, 512, max_context=512,
                                    rms_eps=1e-6, n_experts=8, n_experts_used=2, expert_ff=96,
                                    n_shared_experts=1, shared_ff=96, first_dense_layers=1,
                                    router="sigmoid", norm_topk_prob=True,
                                    routed_scaling_factor=2.5, n_group=2, topk_group=1,
                                    rotary_dim=8, q_lora_rank=48, kv_lora_rank=32,
                                    qk_rope_head_dim=8, v_head_dim=16, nextn_layers=1,
                                    name="tiny-deepseek3-mtp"),
    # Gated DeltaNet hybrids (qwen3next): Qwen3-Next-80B-A3B's shape, and a tiny one
    "qwen3-next-80b-a3b": ModelSpec("qwen3next", 48, 2048, 16, 2, 256, 0, 151936,
                                    rope_theta=10000000.0, rms_eps=1e-6, max_context=262144,
                                    qk_norm=True, n_experts=512, n_experts_used=10,
                                    expert_ff=512, n_shared_experts=1, shared_ff=512,
                                    router="softmax", norm_topk_prob=True, rotary_dim=64,
                                    full_attn_every=4, lin_k_heads=16, lin_v_heads=32,
                                    lin_k_dim=128, lin_v_dim=128, conv_kernel=4,
                                    name="qwen3-next-80b-a3b"),
    "tiny-qwen3next": ModelSpec("qwen3next", 4, 64, 4, 2, 16, 0, 512, max_context=512,
                                rms_eps=1e-6, qk_norm=True, n_experts=8, n_experts_used=2,
                                expert_ff=96, n_shared_experts=1, shared_ff=96,
                                router="softmax", norm_topk_prob=True, rotary_dim=4,
                                full_attn_every=4, lin_k_heads=2, lin_v_heads=4, lin_k_dim=16,
                                lin_v_dim=16, conv_kernel=4, name="tiny-qwen3next"),
    # 3 linear k heads (6 v heads), 6/3 attention heads: splits at TP=2 (unevenly) and TP=3
    "tiny-qwen3next-k3": ModelSpec("qwen3next", 4, 64, 6, 3, 16, 0, 512, max_context=512,
                                   rms_eps=1e-6, qk_norm=True, n_experts=8, n_experts_used=2,
                                   expert_ff=96, n_shared_experts=1, shared_ff=96,
                                   router="softmax", norm_topk_prob=True, rotary_dim=4,
                                   full_attn_every=4, lin_k_heads=3, lin_v_heads=6,
                                   lin_k_dim=16, lin_v_dim=16, conv_kernel=4,
                                   name="tiny-qwen3next-k3"),
    # Kimi Delta Attention hybrids (kimilinear): Kimi-Linear-48B-A3B's shape (full NoPE
    # latent attention at layers 3, 7, ..., 23 and 26), and a tiny one (3 KDA then 1 full)
    "kimi-linear-48b-a3b": ModelSpec("kimilinear", 27, 2304, 32, 32, 192, 9216, 163840,
                                     rms_eps=1e-5, max_context=1048576, n_experts=256,
                                     n_experts_used=8, expert_ff=1024, n_shared_experts=1,
                                     shared_ff=1024, first_dense_layers=1, router="sigmoid",
                                     norm_topk_prob=True, routed_scaling_factor=2.446,
                                     rotary_dim=64, kv_lora_rank=512, qk_rope_head_dim=64,
                                     v_head_dim=128, lin_k_heads=32, lin_v_heads=32,
                                     lin_k_dim=128, lin_v_dim=128, conv_kernel=4,
                                     linear_layers=tuple(i for i in range(27)
                                                         if i not in (3, 7, 11, 15, 19, 23, 26)),
                                     name="kimi-linear-48b-a3b"),
    "tiny-kimilinear": ModelSpec("kimilinear", 4, 64, 4, 4, 24, 128, 512, max_context=512,
                                 rms_eps=1e-5, n_experts=8, n_experts_used=2, expert_ff=96,
                                 n_shared_experts=1, shared_ff=96, first_dense_layers=1,
                                 router="sigmoid", norm_topk_prob=True,
                                 routed_scaling_factor=2.5, rotary_dim=8, kv_lora_rank=32,
                                 qk_rope_head_dim=8, v_head_dim=16, full_attn_every=4,
                                 lin_k_heads=2, lin_v_heads=2, lin_k_dim=16, lin_v_dim=16,
                                 conv_kernel=4, name="tiny-kimilinear"),
    # 3 KDA heads, 6 attention heads: splits at TP=2 (2 + 1 KDA heads) and TP=3
    "tiny-kimilinear-h3": ModelSpec("kimilinear", 4, 64, 6, 6, 24, 128, 512, max_context=512,
                                    rms_eps=1e-5, n_experts=8, n_experts_used=2, expert_ff=96,
                                    n_shared_experts=1, shared_ff=96, first_dense_layers=1,
                                    router="sigmoid", norm_topk_prob=True,
                                    routed_scaling_factor=2.5, rotary_dim=8, kv_lora_rank=32,
                                    qk_rope_head_dim=8, v_head_dim=16, full_attn_every=4,
                                    lin_k_heads=3, lin_v_heads=3, lin_k_dim=16, lin_v_dim=16,
                                    conv_kernel=4, name="tiny-kimilinear-h3"),
    # GLM-5.3-Flash (glm5next): 45 layers, KDA where i % 4 != 3, else sparse NoPE latent
    # attention with the pooled-key DSA indexer; 3 dense, then 288 experts top-8 + 1 shared;
    # mHC's 4 streams; one MTP layer (its latent rows and pooled keys on the pages)
    "glm-5.3-flash": ModelSpec("glm5next", 45, 4096, 64, 64, 256, 12288, 154880,
                               rms_eps=1e-5, max_context=1048576, n_experts=288,
                               n_experts_used=8, expert_ff=2048, n_shared_experts=1,
                               shared_ff=2048, first_dense_layers=3, router="sigmoid",
                               norm_topk_prob=True, routed_scaling_factor=2.5,
                               nextn_layers=1, q_lora_rank=1536, kv_lora_rank=512,
                               qk_rope_head_dim=0, v_head_dim=256, lin_k_heads=64,
                               lin_v_heads=64, lin_k_dim=128, lin_v_dim=128, conv_kernel=4,
                               linear_layers=tuple(i for i in range(45) if i % 4 != 3),
                               lin_lower_bound=-5.0, index_kpool=16, index_topk=2048,
                               index_heads=32, index_head_dim=128, hc_mult=4,
                               swiglu_limit=10.0, name="glm-5.3-flash"),
    "tiny-qwen3moe": ModelSpec("qwen3moe", 2, 64, 4, 2, 16, 96, 512, max_context=512,
                               rms_eps=1e-6, qk_norm=True, n_experts=8, n_experts_used=3,
                               expert_ff=96, router="softmax", norm_topk_prob=True,
                               name="tiny-qwen3moe"),
    "tiny-glm4moe": ModelSpec("glm4moe", 3, 64, 6, 3, 16, 128, 512, max_context=512,
                              qkv_bias=True, n_experts=8, n_experts_used=3, expert_ff=96,
                              n_shared_experts=1, shared_ff=96, first_dense_layers=1,
                              router="sigmoid", norm_topk_prob=True, routed_scaling_factor=2.5,
                              n_group=2, topk_group=1, rotary_dim=8, name="tiny-glm4moe"),
    # the same with a NextN (MTP) layer after the trunk: `--draft mtp` (server/families/nextn.py)
    "tiny-glm4moe-mtp": ModelSpec("glm4moe", 3, 64, 6, 3, 16, 128, 512, max_context=512,
                                  qkv_bias=True, n_experts=8, n_experts_used=3, expert_ff=96,
                                  n_shared_experts=1, shared_ff=96, first_dense_layers=1,
                                  router="sigmoid", norm_topk_prob=True,
                                  routed_scaling_factor=2.5, n_group=2, topk_group=1,
                                  rotary_dim=8, nextn_layers=1, name="tiny-glm4moe-mtp"),
    "gpt-oss-20b": ModelSpec("gptoss", 24, 2880, 64, 8, 64, 0, 201088, rope_theta=150000.0,
                             rms_eps=1e-5, max_context=131072, qkv_bias=True, n_experts=32,
                             n_experts_used=4, expert_ff=2880, router="topk_softmax",
                             sliding_window=128, attn_sinks=True, o_bias=True,
                             rope_yarn=(32.0, 4096, 32.0, 1.0, False), name="gpt-oss-20b"),
    # sliding window 8: a 20-token prompt crosses it
    "tiny-gptoss": ModelSpec("gptoss", 4, 64, 4, 2, 16, 0, 512, rope_theta=150000.0,
                             max_context=512, qkv_bias=True, n_experts=8, n_experts_used=4,
                             expert_ff=64, router="topk_softmax", sliding_window=8,
                             attn_sinks=True, o_bias=True, rope_yarn=(32.0, 4096, 32.0, 1.0, False),
                             name="tiny-gptoss"),
}


def moe_on_gpu(spec: ModelSpec) -> str:
    """The one-line refusal of a mixture-of-experts family on --device cuda."""
    if spec.arch == "glm5next":
        return (f"{spec.name or spec.arch}: GLM-5.3-Flash (glm5next: KDA, sparse latent "
                "attention with the pooled-key DSA indexer, mHC streams, mixture of experts) "
                "runs on the CPU only until its GPU kernels exist; use --device cpu")
    if spec.recurrent and spec.mla:
        return (f"{spec.name or spec.arch}: the {spec.arch} family (Kimi Delta Attention "
                "recurrent layers, latent attention, mixture of experts) runs on the CPU only "
                "until its GPU kernels exist; use --device cpu")
    if spec.recurrent:
        return (f"{spec.name or spec.arch}: the {spec.arch} family (Gated DeltaNet recurrent "
                "layers, mixture of experts) runs on the CPU only until its GPU kernels exist; "
                "use --device cpu")
    if spec.mla:
        return (f"{spec.name or spec.arch}: the {spec.arch} family (multi-head latent attention, "
                "mixture of experts) runs on the CPU only until its GPU kernels exist; use "
                "--device cpu")
    return (f"{spec.name or spec.arch}: the {spec.arch} family (mixture of experts) runs on the "
            f"CPU only until its GPU kernels exist; use --device cpu")


def describe_experts(spec: ModelSpec) -> str:
    """'experts: 128 routed of FF 768, 8 a token; 30.53 B weights held, 3.35 B a token'."""
    shared = f" + {spec.n_shared_experts} shared of FF {spec.shared_ff}" if spec.n_shared_experts else ""
    dense = f", {spec.first_dense_layers} leading dense layer(s)" if spec.first_dense_layers else ""
    return (f"experts: {spec.n_experts} routed of FF {spec.expert_ff}, {spec.n_experts_used} a "
            f"token ({spec.router} router){shared}{dense}; {spec.n_params / 1e9:.2f} B weights held, "
            f"{spec.n_active_params / 1e9:.2f} B a token")


def shape(name: str) -> ModelSpec:
    try:
        return SHAPES[name]
    except KeyError:
        raise UnsupportedModel(f"unknown dummy shape {name!r}; known: {', '.join(SHAPES)}") from None


def with_context(spec: ModelSpec, max_context: int) -> ModelSpec:
    return replace(spec, max_context=max_context)
