#!/usr/bin/env python3
"""One bad input never takes the daemon down: a real `tandem start` daemon runs a long job
while hostile files are submitted beside it (job files nested tens of thousands deep, a
target config.json and training data nested as deep, a tampered binary set). Each must end
as a refused submission or a failed job that names the file, while the daemon keeps serving
and the first job keeps making progress to a clean stop.

The parses are bounded at the readers (TOML and JSON nesting limits), so the daemon
validates and runs submitted input in its own process; this test is what shows that holds.

Usage: daemon_bad_input_e2e_test.py PATH/TO/tandem PATH/TO/examples/pingpong.toml
                                    PATH/TO/examples/tiny.toml [unittest args]
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

TANDEM = None
PINGPONG = None
TINY = None
DEADLINE_S = 120  # per wait; loaded 2-core machines are slow, never flaky
DEPTH = 50_000    # far past every reader's limit; crashed the readers before they had one


def poll(fn, what, deadline_s=DEADLINE_S):
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def deep_json(depth):
    return "[" * depth + "1" + "]" * depth


class DaemonBadInputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tandem-e2e-bad-")
        self.dir = self.tmp.name
        self.home = os.path.join(self.dir, "home")
        self.env = dict(os.environ, TANDEM_HOME=self.home, TANDEM_LOG_LEVEL="info")
        self.env.pop("TANDEM_TOKEN", None)
        self.daemon = None

    def tearDown(self):
        if self.daemon is not None:
            self.cli("shutdown", check=False)
            sock = os.path.join(self.home, "tandem.sock")
            poll(lambda: not os.path.exists(sock), "daemon socket removal")
        self.tmp.cleanup()

    def cli(self, *args, check=True, timeout=DEADLINE_S):
        p = subprocess.run([TANDEM, *args], capture_output=True, text=True, env=self.env,
                           timeout=timeout)
        if check and p.returncode != 0:
            self.fail(f"tandem {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    def status(self, job=None):
        return json.loads(self.cli("--json", "status", *([job] if job else [])).stdout)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start_long_job(self):
        with open(PINGPONG) as f:
            text = f.read()
        self.assertIn("objects = 2000 ", text, "examples/pingpong.toml changed")
        path = self.write("long.toml", text.replace("objects = 2000 ", "objects = 100000000 "))
        job = self.cli("submit", path).stdout.strip()
        poll(lambda: self.status(job)["items_done"] > 0, "the long job to make progress")
        return job

    def assert_alive(self, job, after):
        """The daemon still serves the long job (a crashed daemon takes its jobs with it and
        nothing restarts it), and the job still advances."""
        before = self.status(job)
        self.assertEqual(before["state"], "running", f"after {after}: {before['error']}")
        poll(lambda: self.status(job)["items_done"] > before["items_done"],
             f"the long job to advance after {after}")

    def tiny(self, name, **replace):
        """examples/tiny.toml with the target's keys replaced (key -> TOML value text, or None
        to remove the key)."""
        with open(TINY) as f:
            text = f.read()
        text = text.replace('dir = "/tmp/tandem-tiny-ckpt"',
                            f'dir = "{os.path.join(self.dir, name + "-ckpt")}"')
        for key, value in replace.items():
            lines = [ln for ln in text.splitlines() if ln.startswith(f"{key} = ")]
            self.assertEqual(len(lines), 1, f"examples/tiny.toml: {key} changed")
            text = text.replace(lines[0], "" if value is None else f"{key} = {value}")
        return self.write(name + ".toml", text)

    def refused_or_failed(self, path, names):
        """Submits `path`: either refused (rc 2) or a job that fails; the error names `names`."""
        p = self.cli("submit", path, check=False)
        if p.returncode != 0:
            self.assertEqual(p.returncode, 2, p.stderr)
            err = p.stderr
        else:
            job = p.stdout.strip()
            st = poll(lambda: (s := self.status(job))["state"] not in ("pending", "running",
                                                                       "stopping") and s,
                      f"job {job} from {os.path.basename(path)} to end")
            self.assertEqual(st["state"], "failed", st)
            err = st["error"]
        self.assertIn(names, err)
        return err

    def test_hostile_files_beside_a_running_job(self):
        self.cli("start")
        self.daemon = True
        job = self.start_long_job()

        # Job files: a dotted key of 10,000 parts (23 KB), and arrays nested 50,000 deep.
        dotted = self.write("dotted.toml", "[job]\nname = \"x\"\n" +
                            ".".join(f"k{i}" for i in range(10_000)) + " = 1\n")
        err = self.refused_or_failed(dotted, "dotted.toml")
        self.assertIn("nested", err)
        self.assert_alive(job, "a 10,000-part dotted key")
        arrays = self.write("arrays.toml", "[job]\nname = \"x\"\nv = " + deep_json(DEPTH) + "\n")
        self.refused_or_failed(arrays, "arrays.toml")
        self.assert_alive(job, "arrays nested 50,000 deep")

        # A target checkpoint whose config.json is nested 50,000 deep.
        model = os.path.join(self.dir, "model")
        os.mkdir(model)
        self.write("model/config.json", '{"model_type": "qwen3", "x": ' + deep_json(DEPTH) + "}")
        err = self.refused_or_failed(self.tiny("deepconfig", model=f'"{model}"', target_config=None),
                                     os.path.join(model, "config.json"))
        self.assertIn("nested", err)
        self.assert_alive(job, "a config.json nested 50,000 deep")

        # Training data read inside the daemon while the job runs: a line nested 50,000 deep
        # fails the job naming file:line, and with skip_bad it is skipped and counted.
        good = json.dumps({"input_ids": list(range(1, 65))})
        data = self.write("deep.jsonl", "\n".join([good] * 4 + [deep_json(DEPTH)] + [good] * 4))
        err = self.refused_or_failed(self.tiny("deepdata", data=f'"{data}"'), "deep.jsonl:5")
        self.assertIn("nested", err)
        self.assert_alive(job, "a data line nested 50,000 deep")
        skip = self.tiny("skipdata", data=f'"{data}"', max_steps="2")
        with open(skip) as f:
            text = f.read()
        with open(skip, "w") as f:
            f.write(text.replace('data = "', 'skip_bad = true\ndata = "', 1))
        done = self.cli("--json", "submit", skip, "--wait", check=False)
        st = json.loads(done.stdout)
        self.assertEqual(st["state"], "succeeded", st.get("error"))
        self.assert_alive(job, "a skipped data line nested 50,000 deep")

        # A binary set whose token file was cut short: a DataLoss naming the file.
        tset = os.path.join(self.dir, "set.tdata")
        self.cli("data", data, "-o", tset, "--skip-bad")
        tokens = os.path.join(tset, "tokens.u32")
        os.truncate(tokens, os.path.getsize(tokens) - 8)
        self.refused_or_failed(self.tiny("truncated", data=f'"{tset}"'), "tokens.u32")
        self.assert_alive(job, "a truncated binary set")

        self.cli("stop", job)
        st = poll(lambda: (s := self.status(job))["state"] not in ("running", "stopping") and s,
                  "the long job to stop")
        self.assertEqual(st["state"], "stopped", st["error"])
        self.assertEqual(st["store"]["objects"], 0)


if __name__ == "__main__":
    TANDEM, PINGPONG, TINY = sys.argv[1], sys.argv[2], sys.argv[3]
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:])
