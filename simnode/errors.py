"""User-facing errors. The CLI prints their message and exits 2, without a traceback.

``ConfigError``: a YAML file, CLI override or routing file is wrong.
``ScheduleError``: a kernel schedule is impossible (buffer overflow, bad flag id).
``DeadlockError``: a schedule's waits can never be satisfied; names the stuck pipes.
"""


class SimnodeError(Exception):
    """Base of every error that is the user's to fix (exit code 2)."""


class ConfigError(SimnodeError):
    """Bad configuration: names the file, the key path, the value and what was expected."""

    def __init__(self, source: str, key_path: str, value, expected: str, hint: str = ""):
        self.source = source
        self.key_path = key_path
        self.value = value
        self.expected = expected
        self.hint = hint
        msg = f"{source}: {key_path or '(top level)'} = {value!r}: expected {expected}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)

    def __reduce__(self):
        # rebuilt with its fields, so a worker process can hand it back to the CLI (sweeps)
        return (type(self), (self.source, self.key_path, self.value, self.expected, self.hint))


class ScheduleError(SimnodeError):
    """An impossible kernel schedule, rejected before it runs (as the compiler would)."""


class DeadlockError(SimnodeError):
    """A schedule whose waits can never be satisfied."""
