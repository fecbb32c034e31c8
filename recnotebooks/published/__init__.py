"""What others published, as data: nothing here is modeled, simulated or measured on this machine.

- :mod:`~recnotebooks.published.mlperf`: an MLPerf Training DLRM-DCNv2 result (:class:`MLPerfResult`)
  and how MLPerf scores a set of runs (:func:`olympic_mean`);
- :mod:`~recnotebooks.published.mlperf_results`: every closed-division result of v3.0-v5.1, the
  table that ``datasets/mlperf_dcnv2.py`` generates;
- :mod:`~recnotebooks.published.convergence`: MLPerf's reference convergence points and the
  curve its checker draws through them.
- :mod:`~recnotebooks.published.runs`: the training throughputs the TorchRec project, NVIDIA
  and the DLRM paper published, and TorchRec's UVM-caching benchmark;
- :mod:`~recnotebooks.published.sources`: the public documents cited, hardware's included.

The model is set up to match these runs in :mod:`recnotebooks.perf.mlperf_setup` and compared
with them in :mod:`recnotebooks.perf.compare`.
"""
