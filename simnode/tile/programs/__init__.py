"""Tile programs shipped with simnode (loaded by path from workload files, not imported):
the DeepGEMM-style GEMM, TileKernels' kernels and FlashAttention forward."""
