"""y = 2 x on the vector cores, double-buffered by hand: the same kernel with the language's
flags (sync=auto) or with the author's (sync=manual), and with two classic mistakes in the
manual flags: a missing wait (a race), a wait on an event nobody sets and a missing initial
"slot free" set (both deadlocks)."""

import simnode.tile.lang as T


@T.program
def scale(n: int = 16384, block: int = 1024, blocks: int = 2,
          sync: str = T.param("auto", choices=("auto", "manual")),
          bug: str = T.param("none", choices=("none", "missing_wait", "wrong_event", "no_initial_set"))):
    x = T.tensor("x", (n,), "fp32")
    y = T.tensor("y", (n,), "fp32")
    manual = sync == "manual"
    tiles = n // block
    for core in T.Kernel(blocks, vector=True, sync=sync):
        xb = T.alloc_ub((2, block), "fp32")
        yb = T.alloc_ub((2, block), "fp32")
        if manual:
            for s in range(2):
                T.set_flag("v", "mte2", s)          # x slot s is free
                if bug != "no_initial_set":
                    T.set_flag("mte3", "v", s)      # y slot s is free
        for i in range(core, tiles, blocks):
            s = (i // blocks) % 2
            if manual:
                T.wait_flag("v", "mte2", s)
            T.copy(x[i * block], xb[s])
            if manual:
                T.set_flag("mte2", "v", s)
                if bug != "missing_wait":
                    T.wait_flag("mte2", "v", s + 2 if bug == "wrong_event" else s)
                T.wait_flag("mte3", "v", s)
            T.mul(yb[s], xb[s], 2.0)
            if manual:
                T.set_flag("v", "mte2", s)
                T.set_flag("v", "mte3", s)
                T.wait_flag("v", "mte3", s)
            T.copy(yb[s], y[i * block])
            if manual:
                T.set_flag("mte3", "v", s)
        if manual:
            for s in range(2):
                T.wait_flag("v", "mte2", s)
                T.wait_flag("mte3", "v", s)
