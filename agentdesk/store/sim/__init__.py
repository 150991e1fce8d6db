"""The simulated agent runtime and the bulk data generator used by demos and benchmarks."""
