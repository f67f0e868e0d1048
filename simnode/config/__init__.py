"""Configuration: YAML -> validated, frozen parameter records.

``fields.Reader`` walks a mapping and reads typed, range-checked values, raising
``ConfigError`` with file, key path, value and expectation. ``params`` declares each
parameter once (type, unit, range, default, doc, origin); ``chip`` and ``supernode`` are the
chip's and the supernode's schemas built from those declarations, ``topology`` a file of
both; ``comments`` reads what a file says about each key; ``overrides`` applies ``--set
KEY=VALUE`` to raw mappings.
"""
