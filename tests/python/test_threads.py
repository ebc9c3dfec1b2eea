"""tightfit.check / compile / report called from several Python threads at once: each call's output
is its own (each is a library request, tightfit/cli.h, that prints its JSON into memory it owns, never
into the process's stdio) and equals the same call made alone. ctypes releases the GIL around each library call, so the
calls really overlap."""
import concurrent.futures
import os
import tempfile

import tightfit
from tally import expect, finish


def job(graph_path, n, budget):
    """One thread's work: a check against a budget and a compile + report at micro-batch n."""
    fits = tightfit.check(graph_path, set={"N": n}, budget=budget, target="cpu")
    plan = tightfit.compile(graph_path, set={"N": n}, optimizer="adamw", target="cpu")
    report = plan.report()
    return (fits["fits"], fits["device_total_bytes"], plan.total_bytes, report["regions"]["arena"], report["steps"])


def main():
    with tempfile.TemporaryDirectory(prefix="tightfit-threads-") as folder:
        run_cases(os.path.join(folder, "mlp.tfg"))


def run_cases(graph_path):
    tightfit.zoo("mlp").save(graph_path)
    cases = [(n, budget) for n in (1, 8, 32, 128, 512) for budget in ("64KiB", "1MiB")]
    alone = {case: job(graph_path, *case) for case in cases}
    expect(len(set(alone.values())) > 2, f"the cases should differ: {sorted(set(alone.values()))}")
    for round_ in range(3):
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            together = dict(zip(cases, pool.map(lambda case: job(graph_path, *case), cases)))
        for case in cases:
            expect(together[case] == alone[case], f"round {round_}, N={case[0]} budget {case[1]}: "
                   f"{together[case]} in threads, {alone[case]} alone")
    finish(f"{len(cases)} cases x 3 rounds on 4 threads")


main()
