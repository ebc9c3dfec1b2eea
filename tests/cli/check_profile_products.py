"""Checks a step profile's "# products by shape" table against the plan it profiled, for test_profile.sh:

    check_profile_products.py PROFILE PLAN.json CALLS

PLAN.json is `tightfit dump` of the plan; every step ran CALLS times (one micro-batch a step, no
accumulation). Groups the plan's matmul and matmul_accumulate steps by op and shape as the table
names them ("[M,K]^T x [K,N] f32": A and B as stored, ^T where read transposed, the output's type),
and requires one row a group with its number of steps and a rate equal to the group's FLOPs x CALLS
over the row's time (to the printed rounding); the rows' times add up to the op table's matmul totals.
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
    return " x ".join(parts) + " " + plan["buffers"][step["outputs"][0]]["dtype"]


def main():
    path, plan_path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    import json
    plan = json.load(open(plan_path))
    lines = open(path).read().splitlines()
    want = collections.defaultdict(lambda: [0, 0.0])  # (op, shape) -> steps, flops a call
    for step in plan["steps"]:
        if step["op"] in ("matmul", "matmul_accumulate"):
            group = want[(step["op"], shape_of(plan, step))]
            group[0] += 1
            group[1] += step["flops"]
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
        expected = flops * calls / (ms * 1e6) if ms > 0 else 0.0  # GFLOP/s
        # the rate is printed to 0.1, from a time exact to 0.0005 ms
        if steps != n or abs(rate - expected) > 0.05 + expected * 0.0005 / max(ms, 1e-9) + 1e-6 * expected:
            errors.append(f"{op} {shape}: {steps} steps at {rate} GFLOP/s; the plan: {n} steps, "
                          f"{flops:.0f} FLOPs a call x {calls} over {ms} ms = {expected:.4f}")
    if len(want) <= 16:
        table = sum(row[3] for row in rows)
        ops = op_ms.get("matmul", 0.0) + op_ms.get("matmul_accumulate", 0.0)
        if abs(table - ops) > 0.001 * len(rows) + 0.002:
            errors.append(f"the rows add up to {table:.3f} ms; the op table's products {ops:.3f} ms")
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"{len(rows)} product shapes, {sum(v[0] for v in want.values())} steps, rates = FLOPs x {calls} / time")


main()
