"""tightfit.Session's safety (issue 49, fault 7): threads, close(), strict input dtypes.

- two threads stepping one session (a lock around every call into the library) give exactly the
  losses and weights of one thread doing the same steps in sequence; two threads training 20 steps
  each give the two runs one thread gives;
- close() is idempotent, every later call raises TightfitError saying the session is closed,
  `with Session(...) as s:` closes it, and collecting a session frees it;
- inputs and labels are never cast unsafely: a float, bool, string or object array for an integer
  input raises TypeError, a value outside the int32 range ValueError (no wrap), a wrong shape
  ValueError, each naming the input (and a TightfitError too); integer arrays in range are taken;
  values are checked as `tightfit train` checks its files: a NaN feature or a label outside the
  classes raises naming the sample (they trained silently: relu took NaN to 0, the loss skipped the
  label); train() takes 1 step or more.
usage: test_session.py   (run from the repository root, PYTHONPATH=python)"""
import gc
import os
import sys
import threading

import numpy as np

import tightfit
from tally import finish, ok



def raises(what, kind, needles, function, *args, **kwargs):
    """`function(*args)` raises `kind` (and TightfitError) with every one of `needles` in its message."""
    try:
        function(*args, **kwargs)
    except Exception as error:  # noqa: BLE001  (the wrong kind of error is a failure, shown)
        good = isinstance(error, kind) and isinstance(error, tightfit.TightfitError)
        missing = [n for n in needles if n not in str(error)]
        ok(good and not missing, f"{what} raises {type(error).__name__}: {error}",
           f"(expected {kind.__name__} and TightfitError; missing {missing} in the message)")
        return
    ok(False, what, "did not raise")


def in_threads(functions, timeout=60):
    """Runs each function in its own thread, all released together; returns their results (or the
    exceptions they raised). A thread still running after `timeout` s is a failure: exit at once."""
    barrier = threading.Barrier(len(functions))
    results = [None] * len(functions)

    def run(i):
        barrier.wait()
        try:
            results[i] = functions[i]()
        except Exception as error:  # noqa: BLE001  (reported by the caller)
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(functions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            print(f"FAIL: a thread is still running after {timeout} s (deadlock?)")
            sys.stdout.flush()
            os._exit(1)
    return results


data = "models/data/digits/train"
xs, ys = np.load(f"{data}/x.npy"), np.load(f"{data}/labels.npy")
plan = tightfit.compile(tightfit.zoo("mlp"), set={"N": 32}, optimizer="adamw")
batch = {"x": xs[:32], "labels": ys[:32]}
weights = [("hidden.0.weight", (64, 128)), ("hidden.1.weight", (128, 128)), ("head.bias", (10,))]


def weights_of(session):
    return [session.read(name, shape=shape) for name, shape in weights]


# ---- two threads, one session: the losses and weights of the same steps in sequence ----
STEPS = 40
alone = tightfit.Session(plan, seed=0)
sequence = [alone.step(batch) for _ in range(2 * STEPS)]
shared = tightfit.Session(plan, seed=0)
results = in_threads([lambda: [shared.step(batch) for _ in range(STEPS)]] * 2)
errors = [r for r in results if isinstance(r, Exception)]
together = sorted(loss for r in results if not errors for loss in r)
ok(not errors and together == sorted(sequence) and shared.steps == 2 * STEPS,
   f"two threads x {STEPS} steps on one session: the {2 * STEPS} losses of one thread, bit for bit "
   f"({sequence[0]:.6f} -> {sequence[-1]:.6f}), {shared.steps} optimizer steps",
   f"errors {errors}; {len(together)} losses, first differing: "
   + str(next(((a, b) for a, b in zip(together, sorted(sequence)) if a != b), None)))
ok(all((a == b).all() for a, b in zip(weights_of(shared), weights_of(alone))),
   "two threads: every weight equals the one-thread session's, bit for bit",
   str([float(np.abs(a - b).max()) for a, b in zip(weights_of(shared), weights_of(alone))]))

# train() holds the session for its whole run: two 20-step runs, one after the other, whichever first
alone = tightfit.Session(plan, seed=0)
first, second = (alone.train({"x": xs, "labels": ys}, steps=20) for _ in range(2))
shared = tightfit.Session(plan, seed=0)
results = in_threads([lambda: shared.train({"x": xs, "labels": ys}, steps=20)] * 2)
ok(sorted(map(str, results)) == sorted(map(str, (first, second))) and first != second,
   f"two threads training 20 steps each: the two runs of one thread ({first[0]:.6f} -> {first[-1]:.6f}, "
   f"then {second[0]:.6f} -> {second[-1]:.6f})", f"got {results}")

# ---- close(), with, collection ----
session = tightfit.Session(plan, seed=0)
session.close()
session.close()
ok(session.closed, "close() twice: no error, closed is True")
for name, call in [("step", lambda: session.step(batch)), ("forward", lambda: session.forward(batch)),
                   ("train", lambda: session.train({"x": xs, "labels": ys}, steps=1)),
                   ("write", lambda: session.write("x", xs[:32])), ("read", lambda: session.read("x")),
                   ("state_dict", session.state_dict), ("memory", session.memory),
                   ("steps", lambda: session.steps), ("scaling", lambda: session.scaling),
                   ("save", lambda: session.save("unused.safetensors")),
                   ("load", lambda: session.load("unused.safetensors"))]:
    raises(f"{name} after close()", tightfit.TightfitError, [name, "closed"], call)
with tightfit.Session(plan, seed=0) as session:
    loss = session.forward(batch)
ok(session.closed and loss > 0, f"with Session(...) as s: forward {loss:.6f} inside, closed after")
raises("forward after the with block", tightfit.TightfitError, ["closed"], session.forward, batch)
session = tightfit.Session(plan, seed=0)
freed = session._finalizer
del session
gc.collect()
ok(not freed.alive, "a session dropped without close() is freed when collected (tf_session_destroy ran)")

# ---- strict inputs: nothing is cast unsafely ----
session = tightfit.Session(plan, seed=0)
reference = session.forward(batch)
labels = ys[:32]
for kind, value in [("float64", labels.astype(np.float64)), ("float32", labels.astype(np.float32) + 0.5),
                    ("bool", labels > 4)]:
    raises(f"{kind} labels", TypeError, ["'labels'", kind, "i32"], session.write, "labels", value)
raises("string labels", TypeError, ["'labels'", "<U"], session.write, "labels", labels.astype(str))
raises("object labels", TypeError, ["'labels'", "object"], session.write, "labels",
       np.array(list(labels[:31]) + [None], dtype=object))
raises("labels + 2**32 (would wrap to the same labels)", ValueError, ["'labels'", "4294967296", "int32"],
       session.write, "labels", labels.astype(np.int64) + 2 ** 32)
raises("labels below the int32 range", ValueError, ["'labels'", "-2147483649"], session.write, "labels",
       np.full(32, -2 ** 31 - 1, dtype=np.int64))
raises("uint64 labels past int64", ValueError, ["'labels'", "18446744073709551615"], session.write, "labels",
       np.full(32, 2 ** 64 - 1, dtype=np.uint64))
raises("labels of shape (16, 2) (the same bytes)", ValueError, ["'labels'", "(16, 2)", "(32,)"], session.write,
       "labels", labels.reshape(16, 2))
raises("x of shape (64, 32) (the same bytes)", ValueError, ["'x'", "(64, 32)", "(32, 64)"], session.write, "x",
       xs[:32].reshape(64, 32))
raises("string features", TypeError, ["'x'", "<U"], session.write, "x", xs[:32].astype(str))
raises("step with float labels", TypeError, ["'labels'", "float64"], session.step,
       {"x": xs[:32], "labels": labels.astype(np.float64)})
raises("forward with labels + 2**32", ValueError, ["'labels'"], session.forward,
       {"x": xs[:32], "labels": labels.astype(np.int64) + 2 ** 32})
raises("train with float labels", TypeError, ["'labels'", "float64"], session.train,
       {"x": xs, "labels": ys.astype(np.float64)}, 1)
raises("train with labels + 2**32", ValueError, ["'labels'", "int32"], session.train,
       {"x": xs, "labels": ys.astype(np.int64) + 2 ** 32}, 1)
# the values too, as `tightfit train` checks its files: finite features, labels inside the classes
nan_x = xs[:32].copy()
nan_x[3, 7] = np.nan
raises("step with a NaN feature", tightfit.TightfitError, ["'x'", "sample 3, element 7 is nan", "finite"],
       session.step, {"x": nan_x, "labels": labels})
raises("step with label 10 of 10 classes", tightfit.TightfitError, ["'labels'", "sample 5 is 10", "outside [0, 10)"],
       session.step, {"x": xs[:32], "labels": np.where(np.arange(32) == 5, 10, labels)})
raises("forward with a negative label", tightfit.TightfitError, ["'labels'", "is -3"], session.forward,
       {"x": xs[:32], "labels": np.where(np.arange(32) == 0, -3, labels)})
raises("train for 0 steps", tightfit.TightfitError, ["steps", "1 or more"], session.train,
       {"x": xs, "labels": ys}, 0)
ok(session.steps == 0, "no refused call stepped the session")
wide = session.forward({"x": xs[:32].astype(np.float64), "labels": labels.astype(np.int64)})
narrow = session.forward({"x": xs[:32], "labels": labels.astype(np.uint8)})
listed = session.forward({"x": xs[:32], "labels": [int(v) for v in labels]})
ok(wide == narrow == listed == reference,
   f"int64, uint8 and list labels in range (and float64 x) are taken: the same loss {reference:.6f}",
   f"{wide} {narrow} {listed} vs {reference}")
session.close()

finish("python session")
