"""The variational-Bayes sweep: the problem and its state, the coordinate updates, the
lower bound, the numpy reference sweep and the compiled, fused one."""
