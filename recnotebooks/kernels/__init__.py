"""CPU speed machinery: compiled kernels that make the readable DLRM fast on a laptop.

The readable path (:mod:`recnotebooks.nn`) says what a training step does in plain torch:
``w[rows] -= lr * g`` for SGD, row-wise and exact Adagrad in four lines each
(:mod:`recnotebooks.nn.optim`).
That is what a student should read first. This package is how the same step runs fast on a
CPU, one guarded early return at the top of ``SparseOptimizer.step`` (``if fused.can_run(...):``,
the predicate saying where the kernels apply), with the same results up to float rounding
(the tests check both paths against each other):

* :mod:`~recnotebooks.kernels.fused` — the sparse optimizer as one fused pass over the
  lookups (as FBGEMM's table-batched backward does on GPUs): SGD updates each row where it is
  looked up, with prefetches; row-wise and exact Adagrad (:mod:`~recnotebooks.kernels.fused_adagrad`)
  group the lookups by a counting sort into buckets of rows and sum, square and update
  each row once, without building a weight gradient.
* :mod:`~recnotebooks.kernels.omp` — runs those kernels on PyTorch's own OpenMP threads
  (``GOMP_parallel`` with a Numba ``cfunc``), so no second thread pool competes with
  PyTorch's spinning workers (on 2 cores the SGD kernel took 11.3 ms after a GEMM on Numba's
  pool, 7.4 ms after a pause).
* :mod:`~recnotebooks.kernels.rows` — one-pass id shifting and range checks.
* :mod:`~recnotebooks.kernels.jagged_attention` — HSTU's attention over histories of like
  length batched, one autograd node a layer.
* :mod:`~recnotebooks.kernels.allocator` — host memory: glibc's ``malloc`` told to keep the
  memory a step frees for the next (an HSTU step's scores are allocated anew each step; without
  it every step faulted them in again, page by page), and huge pages for big tables.

What they buy, measured here (BENCHMARKS.md, ``python benchmarks/train_throughput.py``): the
DLRM reference implementation in plain PyTorch takes 1.09x our step time at pooling 1 and
1.59x at pooling 20 (medians of six runs), and our step is within 1.15x of its lower bound
(the same work timed apart). ``RECNB_FUSED=0`` switches the fused kernels off, to compare.
"""
