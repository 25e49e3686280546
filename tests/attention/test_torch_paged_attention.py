"""torch_paged_attention, the engine's CPU read of the pages: the same contract as the kernel.

Batched torch through the block tables (no loop over sequences). Checked against
reference_attention over a grid of shapes (block sizes 1-16, grouped-query heads, padding
entries that would be out of range if read, three dtypes), on the example (exactly 3), with a
custom scale, and refusing every contract violation with the kernel's own ValueErrors.
"""

from __future__ import annotations

import pytest
import torch

from pagedlab.attention.ops import reference_attention, torch_paged_attention
from tests.attention.test_attention import BAD_INPUTS, example_inputs, good, random_paged


@pytest.mark.parametrize("blocks", [[4, 1], [0, 1], [5, 3]])
def test_the_example_is_exactly_three(blocks: list[int]) -> None:
    assert torch_paged_attention(*example_inputs(5, blocks)).item() == 3.0


@pytest.mark.parametrize("block_size", range(1, 17))
@pytest.mark.parametrize(("heads", "kv_heads"), [(1, 1), (4, 2), (9, 3), (8, 1)])
def test_equals_the_reference_over_a_grid(block_size: int, heads: int, kv_heads: int) -> None:
    lens = [1, block_size, block_size + 1, 3 * block_size - 1, 37]
    inputs = random_paged(lens, heads, kv_heads, 16, block_size, pad=10_000, seed=block_size)
    torch.testing.assert_close(torch_paged_attention(*inputs), reference_attention(*inputs))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_follows_the_reference(dtype: torch.dtype) -> None:
    inputs = random_paged([5, 9, 1], dtype=dtype, seed=3)
    out = torch_paged_attention(*inputs)
    assert out.dtype == dtype
    torch.testing.assert_close(out, reference_attention(*inputs))


def test_a_custom_scale() -> None:
    inputs = random_paged([6, 2], seed=4)
    torch.testing.assert_close(
        torch_paged_attention(*inputs, scale=0.1), reference_attention(*inputs, scale=0.1)
    )


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_raises_the_kernels_value_error(case: str) -> None:
    change, message = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=message):
        torch_paged_attention(**change(good()))
