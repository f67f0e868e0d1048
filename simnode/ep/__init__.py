"""Expert-parallel (EP) communication kernels: dispatch and combine on a supernode."""
