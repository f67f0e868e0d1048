"""Calibration as an explicit, recorded step (``simnode calibrate``).

A value no source gives may be *fitted* to measured cases, and then it is recorded as a
fit, never passed off as a source: ``solver`` (bounded least squares on relative errors,
profile intervals), ``cases`` (the cases of a validation-format file and the runs that
evaluate a point, in parallel), ``overlay`` (the fitted values as a file with their
provenance, applied on top of a topology), ``provenance`` (whether a run uses a fitted
value), ``report`` (the printed fit: values, residuals, intervals).
"""
