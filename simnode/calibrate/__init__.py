"""Calibration as an explicit, recorded step (``simnode calibrate``, ``simnode sweep --band``).

A value no source gives may be *fitted* to measured cases, and then it is recorded as a
fit, never passed off as a source: ``solver`` (bounded least squares on relative errors,
profile intervals), ``cases`` (the cases of a validation-format file and the runs that
evaluate a point, in parallel, through ``simnode.runs``), ``report`` (the printed fit:
values, residuals, intervals, and the overlay's record of it), ``band`` (a sweep under
several overlays). The overlay file itself is ``simnode.config.overlay``; whether a run
uses a fitted value is ``simnode.runs.provenance``.
"""
