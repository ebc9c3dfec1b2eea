"""Running ONNX models through the CLI for the importer's tests: import, compile for inference, run
on one input `x` (on the CPU, or another `tightfit run --device`), and list the imported graph's ops.
Imported by the tests beside it (a script's own folder is on its path)."""
import json
import os
import subprocess

import numpy as np
import onnx


def device_env(device):
    """The environment of a `tightfit run` on `device`. Under LeakSanitizer a Vulkan run leaks lavapipe's
    small cache from a driver the loader has unloaded by then (an "unknown module" no suppression can
    name): leak checks are off for those runs, as in tests/onnx_node (the C Vulkan tests check leaks)."""
    if device == "cpu":
        return None
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = (env["ASAN_OPTIONS"] + ":" if env.get("ASAN_OPTIONS") else "") + "detect_leaks=0"
    return env


class ImportedRuns:
    """Models saved and run under `folder` with the `tightfit` program."""

    def __init__(self, tightfit, folder, device="cpu"):
        self.tightfit, self.folder, self.device = tightfit, folder, device

    def path(self, name):
        return os.path.join(self.folder, name)

    def import_model(self, name, model):
        """Saves `model` as NAME.onnx and imports it to NAME.tfg: the finished process."""
        onnx.save(model, self.path(name + ".onnx"))
        return subprocess.run([self.tightfit, "import", self.path(name + ".onnx"), "-o", self.path(name + ".tfg")],
                              capture_output=True, text=True)

    def run_model(self, name, model, x):
        """(output y, sorted ops of the imported graph), or (None, why) where a command failed."""
        done = self.import_model(name, model)
        if done.returncode != 0:
            return None, f"import: exit {done.returncode}: {done.stderr.strip()}"
        done = subprocess.run([self.tightfit, "compile", self.path(name + ".tfg"), "--inference", "-o",
                               self.path(name + ".tfplan")], capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"compile: exit {done.returncode}: {done.stderr.strip()}"
        os.makedirs(self.path(name + ".data"))
        np.save(self.path(name + ".data/x.npy"), x)
        done = subprocess.run([self.tightfit, "run", self.path(name + ".tfplan"), "--data", self.path(name + ".data"),
                               "--output", self.path(name + ".out"), "--device", self.device], capture_output=True,
                              text=True, env=device_env(self.device))
        if done.returncode != 0:
            return None, f"run: exit {done.returncode}: {done.stderr.strip()}"
        dump = json.loads(subprocess.run([self.tightfit, "dump", self.path(name + ".tfg")], capture_output=True,
                                         text=True).stdout)
        return np.load(self.path(name + ".out/y.npy")), sorted(n["op"] for n in dump["nodes"])
