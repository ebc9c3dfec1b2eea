#!/usr/bin/python3
"""Times PyTorch training steps one by one, for bench/run-vs-pytorch (the twin of tf_step_timer.c):

    torch_side.py CONFIG DATA_DIR N T STEPS THREADS      (T: sequence length, or - for none)

THREADS bounds both torch's own threads (torch.set_num_threads) and OpenBLAS's (OPENBLAS_NUM_THREADS,
set here before torch loads it). Runs unchanged under Debian's torch 1.13 and under PyTorch 2.x
(.venv-torch2, whose GEMMs run in MKL: run-vs-pytorch sets MKL_NUM_THREADS and OMP_NUM_THREADS too).

One JSON line per optimizer step, {"step": i, "seconds": s, "cpu_seconds": c, "loss": l}: the wall
time (monotonic clock), and the process's CPU time (every thread's, time.process_time), of making
the batch's tensors, zero_grad, forward, loss, backward and the AdamW step. Then
{"rss_before_kib", "hwm_kib", "peak_reset", "parameters"}: this process's resident set once torch
is imported, its threads set and the data loaded (before the model exists; VmHWM is reset through
/proc/self/clear_refs at that point), and the peak resident set from then to the end.
"""
import json
import os
import sys
import time

# Debian's torch runs its matrix products in OpenBLAS, whose thread pool torch.set_num_threads does
# not reach: by default it takes every core, so a "1 thread" step ran its GEMMs on 2 threads (about
# 1.8 cores busy). The pool is sized when the library loads, so before torch is imported.
if len(sys.argv) == 7:
    os.environ["OPENBLAS_NUM_THREADS"] = sys.argv[6]

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    config, directory, n, t, steps, threads = sys.argv[1:]
    torch.set_num_threads(int(threads))
    torch.manual_seed(0)
    family, _ = models.torch_reference.resolve(config)
    batches = models.Batches(directory, family, int(n), None if t == "-" else int(t))
    peak_reset = reset_peak()
    rss_before = status_kib("VmRSS")
    model, family = models.build(config)
    optimizer = models.optimizer(model)
    for step in range(int(steps)):
        start, cpu_start = time.monotonic(), time.process_time()
        batch = batches.next()
        optimizer.zero_grad(set_to_none=True)
        loss = models.loss(model, family, batch)
        loss.backward()
        optimizer.step()
        value = loss.item()
        print(json.dumps({"step": step, "seconds": time.monotonic() - start,
                          "cpu_seconds": time.process_time() - cpu_start, "loss": value}), flush=True)
    print(json.dumps({"rss_before_kib": rss_before, "hwm_kib": status_kib("VmHWM"), "peak_reset": peak_reset,
                      "parameters": sum(p.numel() for p in model.parameters())}), flush=True)


if __name__ == "__main__":
    main()
