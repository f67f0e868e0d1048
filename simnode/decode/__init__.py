"""One decode step of a DeepSeek-V4 model on N chips: the model, the deployment, the step.

Data: ``model`` holds the model (``ModelSpec``: layers, per-layer attention type,
dimensions, experts, mHC, MTP) with the V4-Flash and V4-Pro presets; ``deployment`` the way
it runs (``Deployment``: chips, attention DP, MoE EP, streams, quantization per part, batch,
context, MTP); ``kernels`` the ordered kernels of each layer type at a deployment's shapes
and the streams they run on; ``memory`` the HBM footprint per chip and the largest batch
that fits.

The step: ``timing`` times each distinct kernel once (one table entry per operation:
pipe-level, proxy or roofline); ``moe`` gives each layer's MoE block from a MoE model;
``program`` lays a rank's step out as ops on its streams with the non-kernel gaps; ``step``
replays every rank's streams on one clock; ``breakdown`` says where the time went;
``trace`` writes it for Perfetto; ``simulate`` is the entry point. The package sits above
``moe`` in the layers and below ``report``: it builds plain records, the ``decode_step``
kind turns them into a result.
"""
