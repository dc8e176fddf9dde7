#!/usr/bin/env python3
"""What a person sees, end to end on the tiny CPU job:

* `tandem run` under a pseudo-terminal (`script`, from bsdutils) draws one live line with
  step/total, loss and ETA, redrawn in place and never wider than the terminal;
* `tandem report CHECKPOINT_DIR` turns the run's metrics file into one HTML page whose
  loss chart has a point per training record of the file; a directory without metrics is
  a clear error;
* every metric the Grafana dashboard (examples/grafana/tandem.json) queries is served on
  /metrics by a running training job: the DFlash2 selector's gauges with samples by a job
  training a DFlash2 drafter, declared (no sample) by one training a DFlash drafter.

Waits poll with generous deadlines (never fixed sleeps), so a loaded machine only makes
them slower.

Usage: progress_e2e_test.py PATH/TO/tandem PATH/TO/examples/tiny.toml PATH/TO/tandem.json
"""
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

TANDEM = TINY = DASHBOARD = None
DEADLINE_S = 300
COLUMNS = 100


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tiny_job(dirname, max_steps, log_every, drafter_extra=""):
    """examples/tiny.toml, shortened, checkpointing (and so writing metrics) into dirname;
    drafter_extra: lines added to its drafter's table."""
    with open(TINY) as f:
        text = f.read()
    ckpt = os.path.join(dirname, "ckpt")
    for old, new in [(r"max_steps = \d+", f"max_steps = {max_steps}"),
                     (r"log_every = \d+", f"log_every = {log_every}\n{drafter_extra}"),
                     (r'dir = "[^"]*"', f'dir = "{ckpt}"'),
                     (r"interval_s = \d+", "interval_s = 1")]:
        text, n = re.subn(old, new, text)
        assert n == 1, f"examples/tiny.toml no longer has {old!r}"
    path = os.path.join(dirname, "job.toml")
    with open(path, "w") as f:
        f.write(text)
    return path, ckpt


def dashboard_metrics():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dash["templating"]["list"]]
    return sorted({m for e in exprs for m in re.findall(r"\btandem_[a-z0-9_]+", e)})


class ProgressCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tandem-progress-")
        self.env = dict(os.environ, TANDEM_HOME=os.path.join(self.tmp.name, "home"))

    def tearDown(self):
        self.tmp.cleanup()

    def test_terminal_line_then_report(self):
        job, ckpt = tiny_job(self.tmp.name, max_steps=60, log_every=10)
        inner = f"stty cols {COLUMNS} rows 30; exec {shlex.join([TANDEM, 'run', job])}"
        out = subprocess.run(["script", "-qfec", inner, "/dev/null"], env=self.env,
                             capture_output=True, timeout=DEADLINE_S)
        text = out.stdout.decode("utf-8", "replace")
        self.assertEqual(out.returncode, 0, text[-3000:] + out.stderr.decode()[-2000:])
        # Redraws: "\r\x1b[K" + line. Every drawn line fits the terminal.
        drawn = [seg.replace("\x1b[K", "") for seg in re.split(r"[\r\n]+", text)]
        lines = [d for d in drawn if d.startswith("[tiny]")]
        self.assertTrue(lines, text[-3000:])
        for line in lines:
            self.assertLessEqual(len(line), COLUMNS, line)
        full = [l for l in lines if re.search(r"step \d+/60", l) and re.search(r"loss \d", l)
                and re.search(r"ETA \d", l)]
        self.assertTrue(full, "no line with step/total, loss and ETA among:\n" +
                        "\n".join(lines[-10:]))
        # The run's metrics file, and the report made from it.
        metrics = os.path.join(ckpt, "metrics.jsonl")
        with open(metrics) as f:
            records = [json.loads(l) for l in f]
        kinds = [r["kind"] for r in records]
        self.assertEqual(kinds[0], "header")
        self.assertEqual(kinds[-1], "end")
        trains = [r for r in records if r["kind"] == "train"]
        self.assertEqual([r["step"] for r in trains], list(range(10, 61, 10)))
        self.assertIn("sample", kinds)
        rep = subprocess.run([TANDEM, "report", ckpt], env=self.env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(rep.returncode, 0, rep.stderr)
        html_path = rep.stdout.strip()
        self.assertEqual(html_path, os.path.join(ckpt, "report.html"))
        with open(html_path) as f:
            html = f.read()
        m = re.search(r'data-chart="loss".*?data-points="(\d+)"', html, re.S)
        self.assertIsNotNone(m)
        self.assertEqual(int(m.group(1)), len(trains))
        self.assertIn('data-chart="profile"', html)
        self.assertIn(f'data-key="final_loss">{trains[-1]["loss"]:.4f}<', html)

    def test_report_of_a_run_without_metrics_is_a_clear_error(self):
        rep = subprocess.run([TANDEM, "report", self.tmp.name], env=self.env,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(rep.returncode, 2)
        self.assertIn("no metrics file", rep.stderr)

    def served(self, name, drafter_extra=""):
        """The metric families (# TYPE) and sampled metrics a running tiny job serves once its
        drafter has logged a real loss."""
        d = os.path.join(self.tmp.name, name)
        os.makedirs(d)
        job, _ = tiny_job(d, max_steps=300, log_every=5, drafter_extra=drafter_extra)
        port = free_port()
        proc = subprocess.Popen([TANDEM, "run", job, "--metrics-port", str(port)],
                                env=self.env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            body, end = "", time.monotonic() + DEADLINE_S
            # Until the drafter has logged once: loss and tau are then real numbers.
            while time.monotonic() < end and proc.poll() is None:
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                                  timeout=30).read().decode()
                except OSError:
                    body = ""
                if re.search(r"^tandem_train_loss\{[^}]*\} [1-9]", body, re.M):
                    break
                time.sleep(0.2)
            types = set(re.findall(r"^# TYPE (\S+) ", body, re.M))
            samples = set(re.findall(r"^(tandem_[a-z0-9_]+)\{", body, re.M))
            return types, samples, body
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=DEADLINE_S)

    def test_dashboard_queries_only_metrics_a_running_job_serves(self):
        wanted = dashboard_metrics()
        self.assertIn("tandem_train_loss", wanted)
        self.assertIn("tandem_train_tau", wanted)
        selector = [m for m in wanted if "selector" in m or "candidate" in m]
        self.assertEqual(len(selector), 3, wanted)
        types, samples, body = self.served("dflash")
        missing = [m for m in wanted
                   if m not in types or (m not in samples and m not in selector)]
        self.assertEqual(missing, [], body[-3000:])
        self.assertEqual([m for m in selector if m in samples], [], "a DFlash drafter has no "
                         "selector, yet its job serves samples of the selector's gauges")
        types, samples, body = self.served("dflash2", 'drafter_type = "dflash2"')
        self.assertEqual([m for m in selector if m not in samples], [], body[-3000:])


if __name__ == "__main__":
    TANDEM, TINY, DASHBOARD = sys.argv[1:4]
    unittest.main(argv=[sys.argv[0]] + sys.argv[4:])
