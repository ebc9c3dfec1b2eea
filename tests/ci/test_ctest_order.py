#!/usr/bin/python3
"""The suite's longest tests carry a COST, so `ctest -j` starts them first on a clean clone (CI),
which has no timings of its own. Reads ctest's own listing (--show-only=json-v1) of the build's
tests: each test named here that the build has must have a COST of at least 20, and the two longest
must come first in COST order. (The first version of these costs was set from tests/CMakeLists.txt,
where set_tests_properties cannot reach a subdirectory's tests: none of them took effect.)
usage: test_ctest_order.py BUILD-DIR"""
import json
import subprocess
import sys

# The tests over 20 s under the sanitizers on a 2-core machine (CI28, 2026-11-29).
LONG = ["test_vulkan_ops", "test_remat", "test_vulkan_ops_no_subgroups", "test_vulkan_ops_half", "cli_precision",
        "ci_workflow", "test_vulkan_training", "test_direct_reads", "test_dense_gradcheck", "test_conformance_cpu",
        "onnx_node_tests", "onnx_node_tests_vulkan"]  # the last two: 2026-12-01
FIRST = ["test_vulkan_ops", "test_remat"]


def costs(build):
    """Each test's COST (0 where it has none), from ctest's json listing."""
    listing = json.loads(subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                                        capture_output=True, text=True).stdout)
    found = {}
    for test in listing["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        found[test["name"]] = float(props.get("COST", 0))
    return found


def main():
    found = costs(sys.argv[1])
    failures = [f"{name}: COST {found[name]:g} (under 20: it would start in number order)"
                for name in LONG if name in found and found[name] < 20]
    ranked = sorted(found, key=lambda name: -found[name])
    present = [name for name in FIRST if name in found]
    if set(ranked[:len(present)]) != set(present):
        failures.append(f"the first tests by COST are {ranked[:len(present)]}, not {present}")
    for failure in failures:
        print("FAIL", failure)
    print(f"{sum(1 for name in LONG if name in found)} long tests listed, "
          f"{len(failures)} without a COST that starts them first")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
