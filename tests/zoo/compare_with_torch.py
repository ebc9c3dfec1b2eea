#!/usr/bin/python3
"""ctest zoo_vs_torch: the zoo's parameters (zoo_dump) equal PyTorch's (torch_reference.py).

For every configuration that torch_reference.py lists, compares the parameter count and the set of
(name, shape) pairs exactly and prints both counts. Exits 77 (skip) when torch is missing.

usage: compare_with_torch.py ZOO_DUMP_EXECUTABLE
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse(text):
    """config -> {"count": int, "params": {name: shape}, "error": str}"""
    configs, current = {}, None
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "config":
            current = configs.setdefault(rest, {"count": None, "params": {}, "error": None})
        elif kind == "count":
            current["count"] = int(rest)
        elif kind == "param":
            name, _, shape = rest.rpartition(" ")
            current["params"][name] = shape
        elif kind == "error":
            current["error"] = rest
    return configs


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    reference = subprocess.run([sys.executable, os.path.join(HERE, "torch_reference.py"), "--forward"],
                               capture_output=True, text=True)
    sys.stderr.write(reference.stderr)
    if reference.returncode == 77:
        print(reference.stdout.strip())
        return 77
    if reference.returncode != 0:
        print(f"torch_reference.py failed with exit code {reference.returncode}")
        return 1
    torch_configs = parse(reference.stdout)
    zoo = subprocess.run([sys.argv[1]] + list(torch_configs), capture_output=True, text=True)
    c_configs = parse(zoo.stdout)

    failures = 0
    print(f"{'configuration':62} {'C (zoo)':>12} {'PyTorch':>12}")
    for config, expected in torch_configs.items():
        got = c_configs.get(config)
        if got is None or got["error"]:
            print(f"{config:62} {'error':>12} {expected['count']:>12}  FAIL: "
                  f"{got['error'] if got else 'missing from zoo_dump output'}")
            failures += 1
            continue
        problems = []
        if got["count"] != expected["count"]:
            problems.append(f"counts differ by {got['count'] - expected['count']}")
        for name in sorted(set(expected["params"]) - set(got["params"])):
            problems.append(f"only in PyTorch: {name} {expected['params'][name]}")
        for name in sorted(set(got["params"]) - set(expected["params"])):
            problems.append(f"only in the zoo: {name} {got['params'][name]}")
        for name in sorted(set(got["params"]) & set(expected["params"])):
            if got["params"][name] != expected["params"][name]:
                problems.append(f"{name}: zoo {got['params'][name]}, PyTorch {expected['params'][name]}")
        status = "ok" if not problems else "FAIL"
        print(f"{config:62} {got['count']:>12} {expected['count']:>12}  {status} "
              f"({len(got['params'])} tensors)")
        for problem in problems[:20]:
            print(f"    {problem}")
        failures += bool(problems)
    if zoo.returncode != 0 and not failures:
        print(f"zoo_dump exited with {zoo.returncode}: {zoo.stderr.strip()}")
        failures += 1
    print(f"zoo_vs_torch: {len(torch_configs) - failures} configurations equal, {failures} differ")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
