"""Checks a step profile's "# products by shape" table against the plan it profiled, for test_profile.sh:

    check_profile_products.py PROFILE PLAN.json STEPS ACCUMULATE

PLAN.json is `tightfit dump` of the plan, trained STEPS optimizer steps of ACCUMULATE micro-batches:
a step of the optimizer phase ran STEPS times, any other STEPS x ACCUMULATE. Groups the plan's
matmul and matmul_accumulate steps by op and shape as the table names them ("[M,K]^T x [K,N] f32":
A and B as stored, ^T where read transposed, C's type: the output's, a matmul_accumulate's first
input's), and requires one row a group (the 16 slowest) with its number of steps and a rate equal
to the group's FLOPs x calls over the row's time (to the printed rounding); the rows' times add up
to the op table's matmul totals.
Prints what it compared; exits 1 on a mismatch.
"""
import collections
import sys


def shape_of(plan, step):
    parts = []
    for k, index in enumerate(step["inputs"][-2:]):
        buffer = plan["buffers"][index]
        transposed = step["attrs"]["transpose_b" if k else "transpose_a"]
        parts.append("[" + ",".join(str(d) for d in buffer["shape"]) + "]" + ("^T" if transposed else ""))
    c = step["outputs"][0] if step["outputs"] else step["inputs"][0]
    return " x ".join(parts) + " " + plan["buffers"][c]["dtype"]


def main():
    path, plan_path, steps_run, accumulate = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    import json
    plan = json.load(open(plan_path))
    lines = open(path).read().splitlines()
    want = collections.defaultdict(lambda: [0, 0.0])  # (op, shape) -> steps, flops a call
    for step in plan["steps"]:
        if step["op"] in ("matmul", "matmul_accumulate"):
            group = want[(step["op"], shape_of(plan, step))]
            group[0] += 1
            group[1] += step["flops"] * (steps_run if step["phase"] == "optimizer" else steps_run * accumulate)
    op_ms = {}
    for line in lines[2:]:
        if line.startswith("#"):
            break
        fields = line.split()
        op_ms[fields[0]] = float(fields[1])
    start = next((i for i, line in enumerate(lines) if line.startswith("# products by shape")), None)
    if start is None:
        sys.exit("no '# products by shape' table")
    rows = []
    for line in lines[start + 2:]:
        if line.startswith("#") or not line.strip():
            break
        op, rest = line.split(None, 1)
        fields = rest.rsplit(None, 3)
        rows.append((op, fields[0], int(fields[1]), float(fields[2]), float(fields[3])))
    errors = []
    if len(rows) != min(len(want), 16):
        errors.append(f"{len(rows)} rows for {len(want)} shapes")
    for op, shape, steps, ms, rate in rows:
        if (op, shape) not in want:
            errors.append(f"a row the plan has no product of: {op} {shape}")
            continue
        n, flops = want[(op, shape)]
        if ms < 0.0005:  # printed as 0.000: no rate to compare
            continue
        expected = flops / (ms * 1e6)  # GFLOP/s
        # the rate is printed to 0.1, from a time exact to 0.0005 ms
        if steps != n or abs(rate - expected) > 0.05 + expected * 0.0005 / max(ms, 1e-9) + 1e-6 * expected:
            errors.append(f"{op} {shape}: {steps} steps at {rate} GFLOP/s; the plan: {n} steps, "
                          f"{flops:.0f} FLOPs in all over {ms} ms = {expected:.4f}")
    if len(want) <= 16:
        table = sum(row[3] for row in rows)
        ops = op_ms.get("matmul", 0.0) + op_ms.get("matmul_accumulate", 0.0)
        if abs(table - ops) > 0.001 * len(rows) + 0.002:
            errors.append(f"the rows add up to {table:.3f} ms; the op table's products {ops:.3f} ms")
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"{len(rows)} product shapes, {sum(v[0] for v in want.values())} steps "
          f"({sum(1 for k in want if k[0] == 'matmul_accumulate')} of them matmul_accumulate), rates = FLOPs / time")


main()
