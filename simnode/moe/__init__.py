"""MoE communication: routing (``simnode.moe.routing``) and DeepEP-style dispatch/combine."""
