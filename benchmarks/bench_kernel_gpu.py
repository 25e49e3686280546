"""paged_attention on a GPU: time, achieved bandwidth, and how it compares (prints figures).

Shape: 64 sequences x 4096 positions of context, 32 query heads over 8 kv heads
(grouped-query), head_dim 128, block size 16, bfloat16, every sequence's pages at randomly
permuted physical blocks. Decode attention reads each K/V byte once, so it is bound by
memory bandwidth: the figure that matters is K/V bytes read / time, next to what a plain
device-to-device copy achieves on the same GPU, and the time next to torch's
scaled_dot_product_attention on the same data laid out contiguously (no paging).

Runs only where CUDA is available; elsewhere it says so and exits 0.
Run: ``python benchmarks/bench_kernel_gpu.py``.
"""

from __future__ import annotations

import sys

import torch

from pagedlab.attention import backend

BATCH, CONTEXT, HEADS, KV_HEADS, HEAD_DIM, BLOCK_SIZE = 64, 4096, 32, 8, 128, 16
DTYPE = torch.bfloat16


def bench_ms(fn, warmup: int = 10, repeats: int = 50) -> float:
    """Median milliseconds per call, timed with CUDA events around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy: bytes read + bytes written per second, in GB/s."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = bench_ms(lambda: dst.copy_(src), warmup=3, repeats=20)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def main() -> int:
    if not torch.cuda.is_available():
        print("No GPU was available: nothing to measure (the CPU interpreter checks correctness,")
        print("not speed; see benchmarks/bench_kernel_cpu.py).")
        return 0
    if backend.BACKEND != "compiled":
        print(f"A GPU is present but pagedlab's backend is {backend.BACKEND!r} ({backend.REASON});")
        print("unset TRITON_INTERPRET to compile the kernel.")
        return 0

    from pagedlab.attention import launch as kernels
    from pagedlab.attention.ops import paged_attention, reference_attention, validate_paged_inputs

    print(backend.describe())
    torch.manual_seed(0)
    dev = torch.device("cuda")
    pages = CONTEXT // BLOCK_SIZE
    num_blocks = BATCH * pages
    shape = (num_blocks, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    key_cache = torch.randn(shape, dtype=DTYPE, device=dev)
    value_cache = torch.randn(shape, dtype=DTYPE, device=dev)
    query = torch.randn(BATCH, HEADS, HEAD_DIM, dtype=DTYPE, device=dev)
    tables = torch.randperm(num_blocks, device=dev).view(BATCH, pages).to(torch.int32)
    lens = torch.full((BATCH,), CONTEXT, dtype=torch.int32, device=dev)
    args = (query, key_cache, value_cache, tables, lens)

    shapes = validate_paged_inputs(*args)
    out = paged_attention(*args)  # compile once, validated path
    kernel_ms = bench_ms(
        lambda: kernels.launch_paged_attention(*args, shapes.scale, shapes.max_pages)
    )
    unsplit_ms = bench_ms(
        lambda: kernels.launch_paged_attention(*args, shapes.scale, shapes.max_pages, splits=1)
    )
    call_ms = bench_ms(lambda: paged_attention(*args), repeats=20)

    kv_bytes = 2 * BATCH * CONTEXT * KV_HEADS * HEAD_DIM * key_cache.element_size()
    achieved = kv_bytes / (kernel_ms * 1e-3) / 1e9
    copy_gbs = copy_bandwidth_gbs()

    # torch's attention on the same K/V, gathered into a contiguous [B, kv_heads, T, D].
    k_dense = key_cache[tables.long()].flatten(1, 2).transpose(1, 2).contiguous()
    v_dense = value_cache[tables.long()].flatten(1, 2).transpose(1, 2).contiguous()
    q_dense = query[:, :, None, :]
    sdpa = torch.nn.functional.scaled_dot_product_attention
    try:
        sdpa_out = sdpa(q_dense, k_dense, v_dense, enable_gqa=True)[:, :, 0]
        sdpa_fn = lambda: sdpa(q_dense, k_dense, v_dense, enable_gqa=True)  # noqa: E731
    except TypeError:  # torch < 2.5: no enable_gqa; repeat the kv heads instead
        group = HEADS // KV_HEADS
        k_rep = k_dense.repeat_interleave(group, dim=1)
        v_rep = v_dense.repeat_interleave(group, dim=1)
        sdpa_out = sdpa(q_dense, k_rep, v_rep)[:, :, 0]
        sdpa_fn = lambda: sdpa(q_dense, k_rep, v_rep)  # noqa: E731
    sdpa_ms = bench_ms(sdpa_fn)

    ref = reference_attention(*args)
    err = (out.float() - ref.float()).abs().max().item()
    err_sdpa = (out.float() - sdpa_out.float()).abs().max().item()

    print(
        f"shape: {BATCH} seqs x {CONTEXT} positions, {HEADS}/{KV_HEADS} heads, "
        f"head_dim {HEAD_DIM}, block {BLOCK_SIZE}, {DTYPE}"
    )
    print(f"paged_attention kernel   {kernel_ms * 1e3:9.1f} us")
    print(f"  same, pages not split  {unsplit_ms * 1e3:9.1f} us  (flash-decoding off)")
    print(f"paged_attention + checks {call_ms * 1e3:9.1f} us  (validation syncs once per call)")
    print(f"K/V read                 {kv_bytes / 1e9:9.3f} GB")
    print(f"achieved bandwidth       {achieved:9.0f} GB/s")
    print(f"device copy bandwidth    {copy_gbs:9.0f} GB/s  (read + write)")
    print(f"fraction of copy         {achieved / copy_gbs:9.2f}")
    print(
        f"torch SDPA, contiguous   {sdpa_ms * 1e3:9.1f} us  (paged / SDPA time = "
        f"{kernel_ms / sdpa_ms:.2f})"
    )
    print(f"max |err| vs reference   {err:9.2e}   vs SDPA {err_sdpa:.2e}")
    ok = err < 2e-2
    print("correct:", ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
