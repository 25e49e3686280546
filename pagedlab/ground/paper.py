"""Every number pagedlab quotes from the paper, each with its figure or section.

Kwon et al., "Efficient Memory Management for Large Language Model Serving with
PagedAttention", SOSP 2023. Code, tests and notebooks import these names instead of typing
the numbers again, so a number is written once, here, next to where the paper gives it.

This module imports nothing from pagedlab (every layer may import it). Shares are fractions
(0.204 for 20.4 %); lengths are tokens; sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, cast

# --- Models, hardware, lengths (§3, §6.1, Fig. 1) ------------------------------------------

MAX_SEQ_LEN: Final = 2048
"""§3 / §6.1: OPT generates sequences of up to 2048 tokens; Orca (Max) reserves this much."""

KV_BYTES_PER_TOKEN_OPT13B: Final = 2 * 5120 * 40 * 2
"""§3: "2 (key and value vectors) x 5120 (hidden state size) x 40 (number of layers) x 2
(bytes per FP16)" = 819,200 B, which the paper calls 800 KB."""

OPT13B_PARAMETER_BYTES: Final = 26 * 2**30
"""Fig. 1: OPT-13B's parameters take 26 GB (65 %) of an NVIDIA A100's 40 GB. The paper's
units are binary, as its 800 KB = 819,200 B shows, so GB is read as 2**30 bytes."""

A100_BYTES: Final = 40 * 2**30
"""Fig. 1 and §6.1: the GPU is an NVIDIA A100 with 40 GB of memory."""

KV_PERCENT_OF_A100: Final = 30
"""Fig. 1: the KV cache takes "> 30 %" of the A100's memory when serving OPT-13B (we take
the bound: 30 % of 40 GB = 12 GB of KV cache)."""

# name -> (mean input length, mean output length), §6.1 / Fig. 11
MEAN_LENGTHS: Final = MappingProxyType({"sharegpt": (161.31, 337.99), "alpaca": (19.31, 58.45)})
"""§6.1, Fig. 11: mean input / output lengths of the ShareGPT and Alpaca traces."""

# --- Baselines (§6.1) -----------------------------------------------------------------------

POW2_EXAMPLE: Final = (25, 32)
"""§6.1, Orca (Pow2): "if the true output length is 25, it reserves 32 positions for
outputs" (the output reservation is the next power of two, at most 2x the truth)."""

CHATBOT_PROMPT_LEN: Final = 1024
"""§6.5: chatbot prompts are truncated to their last 1024 tokens; "due to the buddy
allocation algorithm, the Orca baselines reserve the space for 1024 tokens for the request
outputs, regardless of how they predict the output lengths"."""

CHATBOT_MAX_OUTPUT_LEN: Final = 1024
"""§6.5: the model generates at most 1024 tokens per chatbot request."""

# --- Fig. 2: where the KV memory goes (measured during the experiment of §6.2) ---------------

FIG2_BREAKDOWN: Final = MappingProxyType(
    {
        "Orca (Max)": MappingProxyType(
            {"tokens": 0.204, "reserved": 0.133, "internal": 0.573, "external": 0.089}
        ),
        "Orca (Pow2)": MappingProxyType(
            {"tokens": 0.268, "reserved": 0.179, "internal": 0.136, "external": 0.416}
        ),
        "Orca (Oracle)": MappingProxyType(
            {"tokens": 0.382, "reserved": 0.252, "internal": None, "external": 0.366}
        ),
        "vLLM": MappingProxyType(
            {"tokens": 0.963, "reserved": None, "internal": None, "external": None}
        ),
    }
)
"""Fig. 2: token states, reservation, internal fragmentation, "external fragmentation and
others" per system. ``None`` where the bar has no such segment (Oracle: no internal
fragmentation; vLLM: only its token states, 96.3 %, are labelled)."""

FIG2_TOKEN_SHARE: Final[Mapping[str, float]] = MappingProxyType(
    {k: cast(float, v["tokens"]) for k, v in FIG2_BREAKDOWN.items()}
)
"""Fig. 2: the share of KV memory that holds token states, per system."""

TOKEN_SHARE_RANGE_EXISTING: Final = (
    FIG2_TOKEN_SHARE["Orca (Max)"],
    FIG2_TOKEN_SHARE["Orca (Oracle)"],
)
"""§1 / §3: "only 20.4 % - 38.2 % of the KV cache memory is used to store the actual token
states in the existing systems" (the Orca bars of Fig. 2)."""

# --- Fig. 13: mean batched requests (OPT-13B, ShareGPT at 2 requests/s) ----------------------

FIG13_RATE: Final = 2.0
"""Fig. 13: the ShareGPT trace is served at 2 requests/s."""

FIG13_MEAN_BATCH: Final = MappingProxyType(
    {"Orca (Max)": 7.00, "Orca (Pow2)": 9.81, "Orca (Oracle)": 13.62, "vLLM": 30.42}
)
"""Fig. 13(a): average number of batched requests, OPT-13B, ShareGPT, 2 requests/s."""

# --- Fig. 15 and §6.3: memory saved by sharing (OPT-13B, Alpaca) -----------------------------

FIG15_SAVED: Final = MappingProxyType(
    {
        "parallel": MappingProxyType({2: 0.0609, 4: 0.0853, 6: 0.0979}),
        "beam": MappingProxyType({2: 0.3756, 4: 0.5313, 6: 0.5516}),
    }
)
"""Fig. 15: memory saved by sharing KV blocks on the Alpaca trace, by parallel sampling
n = 2 / 4 / 6 and by beam width k = 2 / 4 / 6."""

SECTION_6_3_SAVED_RANGE: Final = MappingProxyType(
    {"parallel": (0.061, 0.098), "beam": (0.376, 0.552)}
)
"""§6.3's text: sharing saves "6.1 % - 9.8 %" (parallel sampling) and "37.6 % - 55.2 %"
(beam search) of memory on Alpaca: the ranges of Fig. 15, rounded."""
