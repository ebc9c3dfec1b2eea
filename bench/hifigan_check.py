#!/usr/bin/python3
"""A HiFi-GAN V1 generator (Kong et al. 2020, the official repository's layout), as TTS users train
their vocoders, through tightfit.from_torch, checked against a T4's 15 GiB.

80 mel bins in; upsample rates 8, 8, 2, 2 (ConvTranspose1d kernels 16, 16, 4, 4) from 512 channels;
multi-receptive-field blocks (kernels 3, 7, 11, dilations 1, 3, 5); weight_norm on every
convolution; LeakyReLU 0.1; tanh. 13,936,130 parameters. The loss is L1 on the waveform (the
generator alone: HiFi-GAN's mel-spectrogram and adversarial losses need an STFT and the
discriminators, which tightfit does not import). Prints what the import made of it and, for each
global batch of 8192-sample segments (32 mel frames, the paper's), the planned device total on a T4
(AdamW, fp32; `tightfit check --gpu t4`). Compiles only (no device needed).

    PYTHONPATH=python /usr/bin/python3 bench/hifigan_check.py [--frames 32] [--batches 16,32,64,128]
        [--cpu-steps 2]   (also trains one segment on the CPU beside PyTorch)
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch.nn.utils import weight_norm

import tightfit


def padding(kernel, dilation):
    return (kernel * dilation - dilation) // 2


class ResBlock(torch.nn.Module):
    def __init__(self, channels, kernel, dilations):
        super().__init__()
        self.convs1 = torch.nn.ModuleList(
            [weight_norm(torch.nn.Conv1d(channels, channels, kernel, dilation=d, padding=padding(kernel, d)))
             for d in dilations])
        self.convs2 = torch.nn.ModuleList(
            [weight_norm(torch.nn.Conv1d(channels, channels, kernel, padding=padding(kernel, 1))) for _ in dilations])

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, 0.1)), 0.1))
        return x


class Generator(torch.nn.Module):
    def __init__(self, rates=(8, 8, 2, 2), kernels=(16, 16, 4, 4), channels=512, block_kernels=(3, 7, 11),
                 block_dilations=((1, 3, 5),) * 3):
        super().__init__()
        self.conv_pre = weight_norm(torch.nn.Conv1d(80, channels, 7, padding=3))
        self.ups, self.blocks = torch.nn.ModuleList(), torch.nn.ModuleList()
        for i, (rate, kernel) in enumerate(zip(rates, kernels)):
            c_in, c_out = channels // 2 ** i, channels // 2 ** (i + 1)
            self.ups.append(weight_norm(torch.nn.ConvTranspose1d(c_in, c_out, kernel, rate, padding=(kernel - rate) // 2)))
            for k, d in zip(block_kernels, block_dilations):
                self.blocks.append(ResBlock(c_out, k, d))
        self.conv_post = weight_norm(torch.nn.Conv1d(channels // 2 ** len(rates), 1, 7, padding=3))
        self.per_level = len(block_kernels)

    def forward(self, mel):
        x = self.conv_pre(mel)
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, 0.1))
            x = sum(self.blocks[i * self.per_level + j](x) for j in range(self.per_level)) / self.per_level
        return torch.tanh(self.conv_post(F.leaky_relu(x)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=32, help="mel frames per segment (256 samples each)")
    parser.add_argument("--batches", default="16,32,64,128", help="global batches to check")
    parser.add_argument("--cpu-steps", type=int, default=0,
                        help="also train this many AdamW steps of one segment on the CPU, beside PyTorch")
    args = parser.parse_args()
    torch.set_num_threads(1)
    generator = Generator().train()
    print(f"HiFi-GAN V1 generator: {sum(p.numel() for p in generator.parameters()):,} parameters")
    started = time.time()
    graph = tightfit.from_torch(generator, torch.randn(2, 80, args.frames), loss="l1")
    print(f"imported in {time.time() - started:.1f} s")
    print(f"segments of {args.frames * 256} samples; T4, AdamW, fp32")
    print("| global batch | fits | micro-batch x k | recompute | activations | device total |")
    print("| ---: | --- | --- | --- | ---: | ---: |")
    for batch in (int(b) for b in args.batches.split(",")):
        r = tightfit.check(graph, gpu="t4", global_batch=batch, optimizer="adamw")
        c = r["categories"]
        print(f"| {batch} | {'yes' if r['fits'] else 'no'} | {r.get('micro_batch')} x {r.get('accumulate')} | "
              f"{r.get('remat')} | "
              f"{c['activations'] / 2**30:.2f} GiB | {r['device_total_bytes']:,} B ({r['device_total_bytes'] / 2**30:.2f} GiB) |")


    if args.cpu_steps > 0:
        cpu_steps(generator, graph, args.frames, args.cpu_steps)


def cpu_steps(generator, graph, frames, steps):
    """Trains `steps` AdamW steps (lr 2e-4) of one segment in tightfit's CPU runtime and in PyTorch
    from the same weights; prints both losses and wall times (2 threads each)."""
    torch.set_num_threads(2)
    torch.manual_seed(0)
    mel, wave = torch.randn(1, 80, frames), 0.3 * torch.randn(1, 1, frames * 256)
    plan = tightfit.compile(graph, set={"N": 1}, optimizer="adamw", lr=2e-4, weight_decay=0, clip=0)
    session = tightfit.Session(plan, seed=0, threads=2)
    started = time.time()
    ours = [session.step({"x": mel.numpy(), "labels": wave.numpy()}) for _ in range(steps)]
    our_time = time.time() - started
    optimizer = torch.optim.AdamW(generator.parameters(), lr=2e-4, weight_decay=0)
    theirs = []
    started = time.time()
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.l1_loss(generator(mel), wave)
        loss.backward()
        optimizer.step()
        theirs.append(loss.item())
    their_time = time.time() - started
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, theirs))
    print(f"CPU, {steps} AdamW steps of one segment: tightfit {ours} in {our_time:.1f} s, PyTorch {theirs} in "
          f"{their_time:.1f} s; worst relative difference {worst:.1e}")


if __name__ == "__main__":
    main()
