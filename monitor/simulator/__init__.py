"""A vLLM-compatible engine simulator: continuous batching over a paged KV block pool sized by the planner,
serving the same ``/metrics`` as vLLM, so the monitor, ``make run`` and the tests live without GPUs.

Pure modules (no Django): ``block_pool``, ``request``, ``scheduler``, ``engine``, ``stats``, ``load``,
``simulation``, ``metrics``, ``faults``, ``server``, ``spec``, ``fleet``. ``scenarios`` reads and writes
planner scenarios; the ``simulate_vllm`` and ``simulate_fleet`` commands wire it all together.
"""
