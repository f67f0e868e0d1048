"""Runs: what the commands run, below them and above the workloads.

- ``executor``: the one executor of runs (``execute(specs, jobs, ...)``: each distinct
  ``RunSpec`` once, here, in worker processes or on dask, results in order);
- ``signals``: SIGTERM unwound like Ctrl-C while a command runs;
- ``cases``: validation cases (validation/published.yaml): what each case runs, its
  metric, published value and tolerance, and ``run_cases``;
- ``provenance``: where a fitted value is recorded and whether a run uses it;
- ``scenarios`` and ``baselines``: the regression scenarios, their recorded figures, the
  comparison and ``regress``;
- ``entries``: what a cases file and a scenario file share (their ``set:`` entries,
  ``--only`` globs, errors told as errors of one entry).

``simnode.commands`` parses arguments and prints; ``simnode.calibrate`` fits values on
cases; both use this package, and nothing here imports either.
"""
