"""PyTorch's op profile of the bench's training step (bench/pytorch/models.py), one thread:

    torch_prof.py CONFIG DATA_DIR N T STEPS      (T: sequence length, or - for none)

Two warm-up steps, then torch.profiler over STEPS steps; prints the ops by self CPU time. Run with
the interpreter and allocator settings of the configuration to compare (bench/run-vs-pytorch).
"""
import os
import sys

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "pytorch"))
import models  # noqa: E402


def main():
    config, directory, n, t, steps = sys.argv[1:6]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    family, _ = models.torch_reference.resolve(config)
    batches = models.Batches(directory, family, int(n), None if t == "-" else int(t))
    model, family = models.build(config)
    optimizer = models.optimizer(model)

    def step():
        batch = batches.next()
        optimizer.zero_grad(set_to_none=True)
        loss = models.loss(model, family, batch)
        loss.backward()
        optimizer.step()
        return loss.item()

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(int(steps)):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40))


if __name__ == "__main__":
    main()
