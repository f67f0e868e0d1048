"""SimPy's private names are reached from one module only (``simnode.engine.clock``), and
its ``Delayed`` event fires when told to."""

import re
from pathlib import Path

import simpy

from simnode.engine.clock import Delayed

PACKAGE = Path(__file__).resolve().parents[2] / "simnode"
SHIM = PACKAGE / "engine" / "clock.py"
#: SimPy internals: the environment's queue, id counter and clock, an event's state
PRIVATE = re.compile(r"\benv\._\w+|\._(queue|eid|now|ok|value|defused)\b|\bsimpy\.core\b")


def private_uses(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == SHIM:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if PRIVATE.search(code):
                found.append(f"{path.relative_to(root.parent)}:{n}: {line.strip()}")
    return found


def test_only_the_clock_shim_reaches_below_simpys_public_api():
    assert private_uses() == []


def test_the_grep_finds_a_planted_use(tmp_path):
    (tmp_path / "m.py").write_text("def f(env):\n    return env._now\n")
    (tmp_path / "n.py").write_text("import heapq\n\ndef g(env, e):\n    heapq.heappush(env._queue, e)\n")
    (tmp_path / "ok.py").write_text("def h(env):\n    return env.now  # not env._now\n")
    assert [u.split(":")[0] for u in private_uses(tmp_path)] == [f"{tmp_path.name}/m.py",
                                                                f"{tmp_path.name}/n.py"]


def test_a_delayed_event_fires_after_its_delay_with_its_value():
    env = simpy.Environment()
    ev = Delayed(env)
    got = []

    def waiter():
        got.append((yield ev))
        got.append(env.now)

    env.process(waiter())
    env.timeout(3.0).callbacks.append(lambda _e: ev.fire_in(4.5, "done"))
    env.run()
    assert got == ["done", 7.5]
