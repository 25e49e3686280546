"""How the Triton kernels are launched: tile sizes, pages per step, warps, splits.

Pure arithmetic on shapes (no Triton import), kept apart from the launch in
:mod:`pagedlab.attention.kernels` so each heuristic can be read, tested and changed alone.
Every choice changes speed only, never the result (tests run the kernel across them).

Invariants: every tile size is a power of two (``tl.arange`` needs one); a launch plan's
largest tile stays within :data:`MAX_TILE` elements, the most a Triton tensor may hold
(``triton.language.TRITON_MAX_TENSOR_NUMEL``), so shapes beyond it are refused by
:func:`check_kernel_fits` before any launch, with the same message on every backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from pagedlab.ground.checks import ceil_div

MAX_TILE = 1 << 20  # Triton's TRITON_MAX_TENSOR_NUMEL (1,048,576), without importing triton
MAX_STEP_POSITIONS = 64  # positions one loop step folds in, at most
COMPILED_STEP_ELEMENTS = 16384  # fp32 [BLOCK_G, positions, BLOCK_D] product per step, compiled
PROGRAMS_PER_SM = 4  # flash-decoding: aim for this many programs per multiprocessor
MIN_STEPS_PER_SPLIT = 4  # ... while each slice keeps at least this many loop steps
INTERPRETER_LANE_ELEMENTS = 1 << 18  # interpreter: [lanes, BLOCK_G, positions, BLOCK_D] cap


def next_power_of_two(n: int) -> int:
    """Smallest power of two >= n (n >= 1)."""
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class AttentionPlan:
    """How one paged-attention launch is cut up (all sizes in elements or pages)."""

    block_t: int  # next power of two >= block_size
    block_d: int  # next power of two >= head_dim
    block_g: int  # next power of two >= group (query heads per kv head)
    pages_per_step: int  # pages folded in per loop step (a power of two)
    num_warps: int
    splits: int  # slices of each sequence's pages, one program each (1: no flash-decoding)
    pages_per_split: int  # pages each slice covers, whole steps only when splits > 1
    lanes: int = 1  # (sequence, kv head) pairs per program (> 1: the interpreter's lanes kernel)


def tile_sizes(block_size: int, head_dim: int, group: int) -> tuple[int, int, int]:
    """``(BLOCK_T, BLOCK_D, BLOCK_G)``: each size padded to a power of two."""
    return next_power_of_two(block_size), next_power_of_two(head_dim), next_power_of_two(group)


def check_kernel_fits(block_size: int, head_dim: int, group: int) -> None:
    """ValueError when even one page per step exceeds Triton's largest tensor."""
    block_t, block_d, block_g = tile_sizes(block_size, head_dim, group)
    if block_g * block_t * block_d > MAX_TILE:
        raise ValueError(
            f"block_size {block_size} x head_dim {head_dim} x {group} query heads per kv head "
            f"needs a {block_g} x {block_t} x {block_d} tile, more than the {MAX_TILE} "
            "elements a Triton tensor may hold: use reference_attention for this shape"
        )


def pages_per_step(
    interpreter: bool, max_pages: int, block_t: int, block_d: int, block_g: int
) -> int:
    """Pages one loop step folds in, a power of two, never more than 64 positions.

    - compiled: as many pages as keep the step's ``[BLOCK_G, positions, BLOCK_D]`` fp32
      product at 16K elements (64 registers a thread at 8 warps): several independent page
      loads in flight per step. It depends only on the shapes, so the kernel compiles once
      per shape family.
    - interpreter: enough pages for the longest sequence. Each loop step costs the
      interpreter a fixed few ms (mostly re-entering ``tl.sum``/``tl.max``), so fewer,
      wider steps keep the example call far under the 50 ms a slider can afford.
    """
    cap = max(1, MAX_STEP_POSITIONS // block_t)
    if interpreter:
        return min(next_power_of_two(max(1, max_pages)), cap)
    fits = max(1, COMPILED_STEP_ELEMENTS // (block_g * block_t * block_d))
    return min(1 << (fits.bit_length() - 1), cap)  # the largest power of two <= fits


def num_warps(block_t: int, block_d: int, block_g: int, pages: int) -> int:
    """8 warps for steps over 8K elements, else 4."""
    return 8 if block_g * block_t * block_d * pages > 8192 else 4


def num_splits(
    interpreter: bool, sms: int, num_seqs: int, num_kv_heads: int, max_pages: int, pages: int
) -> int:
    """Flash-decoding slices: 1 in the interpreter; compiled, about 4 programs per
    multiprocessor (``sms`` of them) while each slice keeps at least 4 loop steps."""
    if interpreter or num_seqs == 0:
        return 1
    wanted = ceil_div(PROGRAMS_PER_SM * sms, num_seqs * num_kv_heads)
    return max(1, min(wanted, max_pages // (MIN_STEPS_PER_SPLIT * pages)))


def lanes_per_program(interpreter: bool, num_lanes: int, splits: int, step_elements: int) -> int:
    """(sequence, kv head) pairs one program walks, a power of two.

    - compiled, or split across programs: 1 (``paged_attention_kernel``, one lane each).
    - interpreter: every lane of the batch, as long as a step's ``[lanes, BLOCK_G,
      positions, BLOCK_D]`` product (``step_elements`` per lane) stays within 256K
      elements. The interpreter costs a few ms per program whatever its tiles hold, so
      one program for the whole batch (``paged_attention_lanes_kernel``) costs about what
      one lane alone does.
    """
    if not interpreter or splits > 1 or num_lanes <= 1:
        return 1
    fits = max(1, INTERPRETER_LANE_ELEMENTS // step_elements)
    return min(next_power_of_two(num_lanes), 1 << (fits.bit_length() - 1))


def pages_per_split(max_pages: int, splits: int, pages: int) -> int:
    """Pages each slice covers: all of them for one slice, else whole steps of ``pages``."""
    if splits == 1:
        return max(1, max_pages)
    return ceil_div(ceil_div(max(1, max_pages), splits), pages) * pages


def plan_attention(
    *,
    interpreter: bool,
    sms: int,
    num_seqs: int,
    num_kv_heads: int,
    block_size: int,
    head_dim: int,
    group: int,
    max_pages: int,
    pages: int | None = None,
    warps: int | None = None,
    splits: int | None = None,
    lanes: int | None = None,
) -> AttentionPlan:
    """The launch plan; ``pages``, ``warps``, ``splits`` and ``lanes`` override the
    heuristics (``lanes`` > 1 needs ``splits == 1``)."""
    block_t, block_d, block_g = tile_sizes(block_size, head_dim, group)
    if pages is None:
        pages = pages_per_step(interpreter, max_pages, block_t, block_d, block_g)
    if warps is None:
        warps = num_warps(block_t, block_d, block_g, pages)
    if splits is None:
        splits = num_splits(interpreter, sms, num_seqs, num_kv_heads, max_pages, pages)
    if lanes is None:
        step = block_g * block_t * pages * block_d
        lanes = lanes_per_program(interpreter, num_seqs * num_kv_heads, splits, step)
    if lanes > 1 and splits > 1:
        raise ValueError(f"lanes={lanes} > 1 needs splits == 1, got splits={splits}")
    per_split = pages_per_split(max_pages, splits, pages)
    return AttentionPlan(block_t, block_d, block_g, pages, warps, splits, per_split, lanes)


def reshape_and_cache_block_n(
    interpreter: bool, num_tokens: int, block_h: int, block_d: int
) -> int:
    """Tokens per reshape-and-cache program: the whole batch (up to 64K elements) in the
    interpreter, which pays per program; about 4K elements per program when compiled."""
    if interpreter:
        return min(next_power_of_two(num_tokens), max(1, 65536 // (block_h * block_d)))
    return max(1, min(next_power_of_two(num_tokens), 4096 // (block_h * block_d)))


def reshape_and_cache_fits(num_kv_heads: int, head_dim: int) -> bool:
    """Whether one token's ``[num_kv_heads, head_dim]`` tile fits a Triton tensor."""
    return next_power_of_two(num_kv_heads) * next_power_of_two(head_dim) <= MAX_TILE
