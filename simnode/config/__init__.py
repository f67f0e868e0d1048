"""Configuration: YAML -> validated, frozen parameter records.

``fields.Reader`` walks a mapping and reads typed, range-checked values, raising
``ConfigError`` with file, key path, value and expectation. ``chip`` holds the chip
spec and its loader; ``overrides`` applies ``--set KEY=VALUE`` to raw mappings.
"""
