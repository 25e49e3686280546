"""TinyLlama: a Llama-architecture decoder in plain torch, Hugging Face's names and math.

``state_dict()`` keys are ``LlamaForCausalLM``'s, so
``LlamaForCausalLM(LlamaConfig(**model.config)).load_state_dict(model.state_dict())`` loads it
strictly, and back. Tied (``tie_word_embeddings=True``), ``lm_head.weight`` *is*
``model.embed_tokens.weight`` (one Parameter under both names, as in HF). The rotary tables
are computed from positions on the fly, so the state dict holds weights only.

``TinyLlama(config, seed)`` is the same model on every machine (normal init, std ``init_std``,
0.02 as HF's ``initializer_range``; norms at 1), in eval mode.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from pagedlab.ground.checks import check_int
from pagedlab.model.checks import (
    check_id_tensor,
    check_positions,
    check_store,
    check_weights,
)
from pagedlab.model.config import LlamaConfig, check_positive
from pagedlab.model.kv import DenseCausal, KVStore
from pagedlab.model.layers import DecoderLayer, RMSNorm, rotary


class _SkipRandomInit(TorchFunctionMode):
    """Inside: ``torch.nn.init``'s random fills return their tensor as it is (uninitialised).

    Only for modules whose every parameter is replaced next (``from_state_dict`` checks that).
    The seam is speed only: if a torch release routes init through other functions, they run
    as usual (seconds slower, same model). The meta device would avoid the fills too, but its
    first use imports torch's decompositions (about 2 s).
    """

    SKIPPED = frozenset({"kaiming_uniform_", "uniform_", "normal_"})

    def __torch_function__(
        self,
        func: Callable[..., Any],
        _types: object,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) in self.SKIPPED:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


class _Body(nn.Module):
    """HF's ``LlamaModel``: embeddings, decoder layers, final norm (the ``model.`` prefix)."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class TinyLlama(nn.Module):
    """A Llama decoder; ``forward(input_ids)`` gives logits, ``hidden`` runs through a store."""

    def __init__(self, config: Mapping[str, object], seed: int = 0, init_std: float = 0.02) -> None:
        checked, seed, std = _check_init(config, seed, init_std)
        super().__init__()
        self._build(checked)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.endswith("norm.weight"):
                    param.fill_(1.0)
                else:
                    param.copy_(torch.randn(param.shape, generator=generator) * std)
        self.eval()

    def _build(self, cfg: LlamaConfig) -> None:
        """The modules of ``cfg``, weights uninitialised; ties ``lm_head``."""
        self.cfg = cfg
        self.model = _Body(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    @classmethod
    def from_state_dict(
        cls, config: Mapping[str, object], weights: Mapping[str, torch.Tensor]
    ) -> TinyLlama:
        """A model whose parameters are ``weights`` (HF names; the tensors, not copies), as
        :func:`~pagedlab.model.checks.check_weights` takes them. No random init runs
        (:class:`_SkipRandomInit`): 0.01 s instead of seconds for SmolLM2's 135M parameters."""
        checked, given = check_weights(config, weights)
        model = cls.__new__(cls)
        nn.Module.__init__(model)
        with _SkipRandomInit():
            model._build(checked)
        model.load_state_dict(given, strict=False, assign=True)
        if checked.tie_word_embeddings:
            model.lm_head.weight = model.model.embed_tokens.weight
        return model.eval()

    @property
    def config(self) -> dict[str, int | float]:
        """The LlamaConfig fields (a fresh dict): ``transformers.LlamaConfig(**model.config)``;
        ``model.cfg`` is the frozen :class:`LlamaConfig` itself."""
        return self.cfg.to_hf()

    @property
    def num_layers(self) -> int:
        return self.cfg.num_hidden_layers

    @property
    def num_kv_heads(self) -> int:
        return self.cfg.num_key_value_heads

    @property
    def head_dim(self) -> int:
        return self.cfg.head_dim

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    @property
    def max_positions(self) -> int:
        return self.cfg.max_position_embeddings

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, store: KVStore) -> torch.Tensor:
        """Final-norm hidden states ``[tokens, hidden]`` of flat ``ids`` at ``positions``.

        ``store`` decides which tokens belong to which sequence and keeps (or not) their K/V.
        """
        self._check_hidden(ids, positions, store)
        x = self.model.embed_tokens(ids)
        cos_sin = rotary(positions, self.head_dim, self.cfg.rope_theta)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos_sin, store, i)
        return self.model.norm(x)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, length, vocab]`` for ``input_ids`` ``[batch, length]`` (causal)."""
        self._check_forward(input_ids)
        batch, length = input_ids.shape
        positions = torch.arange(length, device=input_ids.device).repeat(batch)
        h = self.hidden(input_ids.reshape(-1), positions, DenseCausal(batch, length))
        return self.lm_head(h).view(batch, length, -1)

    # --- guards ----------------------------------------------------------------------------
    def _device(self) -> torch.device:
        return self.model.embed_tokens.weight.device

    def _check_hidden(self, ids: object, positions: object, store: object) -> None:
        """``ids`` 1-D token ids on the model's device, one position each in
        ``[0, max_positions)``, and a KVStore."""
        checked = check_id_tensor(ids, "ids", 1, self.vocab_size, self._device())
        check_positions(positions, checked.shape[0], self.max_positions, checked.device)
        check_store(store)

    def _check_forward(self, input_ids: object) -> None:
        """``input_ids`` ``[batch >= 1, 1 <= length <= max_positions]`` token ids on the
        model's device."""
        ids = check_id_tensor(input_ids, "input_ids", 2, self.vocab_size, self._device())
        batch, length = ids.shape
        if batch < 1 or not 1 <= length <= self.max_positions:
            raise ValueError(
                f"input_ids must be [batch >= 1, 1 <= length <= {self.max_positions}], "
                f"got {tuple(ids.shape)}"
            )


def _check_init(
    config: Mapping[str, object], seed: object, init_std: object
) -> tuple[LlamaConfig, int, float]:
    """A validated config, ``seed >= 0`` and ``init_std`` a finite number > 0."""
    checked = LlamaConfig.from_hf(config)
    return checked, check_int(seed, "seed", minimum=0), check_positive(init_std, "init_std")
