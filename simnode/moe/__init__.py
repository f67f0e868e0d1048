"""The MoE layer on a supernode (``simnode.moe.layer``): the EP family's kernels
(``simnode.ep``) with each rank's expert kernels, replayed from pipe-level profiles
(``simnode.moe.profiles``), on one clock; its trace (``simnode.moe.layer_trace``)."""
