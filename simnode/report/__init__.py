"""Results and their presentation: ``result.Result`` records, tables and JSON."""
