"""Engine: SimPy-side mechanisms shared by every hardware model.

``fluid.FluidShare``: transfers sharing bandwidth resources max-min fairly (exact,
event-driven). ``trace``: Chrome Trace Event JSON streamed to disk.
"""
