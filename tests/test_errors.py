"""User errors survive a trip through a worker process (sweeps, validate, regress)."""

import pickle

from simnode.errors import ConfigError


def test_config_error_pickles_with_its_fields():
    err = ConfigError("file.yaml", "a.b", 3, "a string", "Did you mean 'c'?")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err)
    assert (back.source, back.key_path, back.value, back.expected) == ("file.yaml", "a.b", 3, "a string")
