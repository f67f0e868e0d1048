"""The lightning indexer of DeepSeek-V4's CSA layers on the 950: FP8 MQA logits and top-k.

For each query token, ``heads`` FP8 query heads of ``head_dim`` score every visible entry of
the sequence's FP8 indexer cache (one shared key head, a scale per entry): logits[key] =
sum over heads of weight[h] x ReLU(q_h . k) x scales (DeepGEMM ``ref_paged_mqa_logits``, the
CANN op's formula), and the top-k entries go to sparse attention. Two published Ascend kernels,
one schedule generator each (pure, no SimPy):

- ``kernel: cann`` (``cann``): ops-transformer ``quant_lightning_indexer`` (arch35), the op CR's
  V4 code calls on the 950 (``npu_quant_lightning_indexer``): QK^T on the cube in FP8 (M = 4
  queries x 64 heads, 128 keys a block), FixPipe moves the FP32 [heads x keys] block to both
  AIVs' UBs (dual destination), the AIVs apply ReLU, weight x q-scale, sum over heads and
  k-scale (``vf.cann_reduce``), store 16-bit sortable scores to GM, and take the top-k at the
  end of each query's row (fused: ``vf.cann_topk``; rows cut across cores merged afterwards).
- ``kernel: deepgemm`` (``deepgemm``): DeepGEMM-Ascend ``paged_mqa_logits`` (facts 2.1:
  "FixPipe-bound"): MXFP8 MMADs of 64 rows (one query x 64 heads) x 512 keys, FixPipe applies
  ReLU and converts to BF16 on the path to one AIV's UB, the AIV sums over heads and stores
  BF16 logits; the top-k is a separate kernel (``simnode.kernels.topk``).

``params`` declares the fields and checks them, ``work`` cuts and deals the work as each
kernel does, ``vf`` costs the vector functions, ``schedule`` builds the schedule and the
roofline (cube FLOPs, FixPipe bytes, HBM bytes of the 132-B-per-entry cache).
"""

from simnode.kernels.indexer.params import IndexerParams, keys_visible
from simnode.kernels.indexer.schedule import indexer_roofline, indexer_schedule, tile_count, useful

__all__ = ["IndexerParams", "indexer_roofline", "indexer_schedule", "keys_visible", "tile_count", "useful"]
