"""One decode step of a DeepSeek-V4 model on N chips: the model and deployment as data.

``model`` holds the model (``ModelSpec``: layers, per-layer attention type, dimensions,
experts, mHC, MTP) with the V4-Flash and V4-Pro presets; ``deployment`` the way it runs
(``Deployment``: chips, attention DP, MoE EP, streams, quantization per part, batch,
context, MTP); ``kernels`` the ordered kernels of each layer type at a deployment's shapes,
with the simnode model that times each and the ones that have none; ``memory`` the HBM
footprint per chip and the largest batch that fits. The package sits above ``moe`` in the
layers: it reads ``config`` and nothing that runs a simulation.
"""
