#!/usr/bin/python3
"""scripts/gpu-verify builds only the targets its build item names, then each item runs a test
program from the build folder: a program an item runs that the build item does not build is
"missing" on the GPU machine (test_cuda_limits was, found by a plumbing run on 2026-12-03), and a
lend's device time is then lost on it. This checks, without a GPU, that every test program an item
runs (`run_test NAME`, `$BUILD/tests/NAME`) is among the build item's targets and is a test the
CMake files define.

    test_gpu_verify_targets.py REPO
"""
import os
import re
import sys


def build_targets(script):
    body = re.search(r"^item_build\(\) \{(.*?)^\}", script, re.S | re.M)
    if not body:
        sys.exit("FAIL: scripts/gpu-verify has no item_build")
    targets = set()
    for group in re.findall(r"targets\+?=\(([^)]*)\)", body.group(1)):
        targets.update(group.split())
    return targets


def cmake_tests(repo):
    defined = set()
    for folder, _, files in os.walk(os.path.join(repo, "tests")):
        if "CMakeLists.txt" in files:
            with open(os.path.join(folder, "CMakeLists.txt")) as f:
                text = f.read()
            defined.update(re.findall(r"tf_add_c_test\((\w+)", text))
            for names in re.findall(r"foreach\(test ([^)]*)\)", text):  # tf_add_c_test(${test} ...) in a loop
                defined.update(names.split())
    return defined


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(os.path.join(repo, "scripts", "gpu-verify")) as f:
        script = f.read()
    targets = build_targets(script)
    ran = set(re.findall(r"run_test (test_\w+)", script)) | set(re.findall(r"\$BUILD/tests/(test_\w+)", script))
    defined = cmake_tests(repo)
    failures = 0
    for name in sorted(ran):
        if name not in targets:
            print(f"FAIL: an item runs {name}, which item_build does not build (add it to its targets)")
            failures += 1
        elif name not in defined:
            print(f"FAIL: an item runs {name}, which no tests/**/CMakeLists.txt defines (tf_add_c_test, foreach(test ...))")
            failures += 1
    print(f"test_gpu_verify_targets: {len(ran)} test programs the items run, {len(targets)} build targets, "
          f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
