"""A mixed kernel with manual cross-core flags, after TileLang's example_gemm_mix_manual: the
cube computes C tiles into L0C, FixPipe splits each into both AIVs' UB, each AIV stores
its half to GM; AIC and AIVs hand the UB halves back and forth with cross-core flags."""

import simnode.tile.lang as T


@T.program
def mix(tiles: int = 4, tm: int = 128, tn: int = 128, k: int = 256,
        sync: str = T.param("manual", choices=("auto", "manual")),
        bug: str = T.param("none", choices=("none", "no_cross_wait"))):
    A = T.tensor("A", (tiles * tm, k), "bf16")
    B = T.tensor("B", (k, tn), "bf16")
    C = T.tensor("C", (tiles * tm, tn), "fp32")
    manual = sync == "manual"
    for bx in T.Kernel(1, sync=sync):
        a_l1 = T.alloc_l1((tm, k), "bf16")
        b_l1 = T.alloc_l1((k, tn), "bf16")
        acc = T.alloc_l0c((tm, tn), "fp32")
        half = T.alloc_ub((tm // 2, tn), "fp32")
        T.copy(B, b_l1)
        if manual:
            T.set_flag("fix", "m", 0)
            for sid in T.Vector():
                T.cross_set("mte3", "aic", 0)           # my UB half is free
        for t in range(tiles):
            if manual and t > 0:
                T.wait_flag("mte1", "mte2", 0)
            T.copy(A[t * tm:(t + 1) * tm], a_l1)
            if manual:
                T.set_flag("mte2", "mte1", 0)
                T.wait_flag("mte2", "mte1", 0)          # gemm from L1 stages through MTE1
                T.wait_flag("fix", "m", 0)
            T.gemm(a_l1, b_l1, acc, clear_accum=True)
            if manual:
                T.set_flag("mte1", "mte2", 0)
                T.set_flag("m", "fix", 0)
                T.wait_flag("m", "fix", 0)
                if bug != "no_cross_wait":
                    T.cross_wait("fix", "aiv0", 0)
                T.cross_wait("fix", "aiv1", 0)
            T.dual_copy(acc, half)
            if manual:
                T.set_flag("fix", "m", 0)
                T.cross_set("fix", "aiv0", 1)
                T.cross_set("fix", "aiv1", 1)
            for sid in T.Vector():
                if manual:
                    T.cross_wait("mte3", "aic", 1)
                T.copy(half, C[t * tm + sid * (tm // 2):t * tm + (sid + 1) * (tm // 2)])
                if manual:
                    T.cross_set("mte3", "aic", 0)
        if manual:
            T.wait_flag("fix", "m", 0)
            T.cross_wait("fix", "aiv0", 0)
            T.cross_wait("fix", "aiv1", 0)
