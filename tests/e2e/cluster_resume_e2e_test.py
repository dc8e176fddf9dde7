#!/usr/bin/env python3
"""End-to-end tests of resuming, faults and visibility of a job on two nodes, each node a
real `tandem run` process on 127.0.0.1 joined through the head (node rank 0) over TCP:

  * `kill -9` of a node mid-run, then `resume = true` on both nodes, ends with drafter
    weights bitwise equal to the uninterrupted one-process run (each target replica resumes
    from its own data position, whichever node trained its batches);
  * a frozen node (SIGSTOP) stops the other within the job's node timeout, though it waits
    inside a Gloo collective whose own timeout is far longer, naming the frozen node;
  * nodes that see different checkpoint directories under one path are refused, naming the
    node and the path;
  * `tandem status` at the head shows both nodes (actors, store, channels, heartbeat age),
    `tandem logs --actor` shows an actor that runs on the other node, and each node's
    Prometheus metrics carry its `node` label (the head's also every node's heartbeat age).

Waits poll with deadlines (never fixed sleeps), so a loaded machine only makes them slower.

Usage: cluster_resume_e2e_test.py PATH/TO/tandem PATH/TO/examples/tiny.toml [unittest args]
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

import cluster_e2e_test as base  # the two-pipeline job and a free port, shared
from cluster_e2e_test import free_port

HASH_RE = base.HASH_RE


def two_pipeline_job(path, steps, checkpoint_dir=None, every=4, resume=False,
                     node_timeout_s=None):
    """cluster_e2e_test's two-pipeline job (target/0 feeds drafter/0 and target2/0 feeds
    drafter/1, so each of two nodes runs one whole pipeline and the drafters average
    gradients across them), with checkpoints in `checkpoint_dir` every `every` steps, the
    learning-rate schedule fixed to `steps` (a resumed run shares it) and `resume`."""
    base.two_pipeline_job(path, steps=steps, node_timeout_s=node_timeout_s)
    with open(path) as f:
        text = f.read()
    extra = f"total_steps = {steps}\n"
    if checkpoint_dir is not None:
        extra += f'checkpoint = {{ dir = "{checkpoint_dir}", every_steps = {every} }}\n'
    text = re.sub(r"(?m)^resume = .*$", f"resume = {'true' if resume else 'false'}", text)
    text = text.replace("[actors.drafter]\n", "[actors.drafter]\n" + extra, 1)
    with open(path, "w") as f:
        f.write(text)
    return path


class ClusterCase(base.ClusterCase):
    """cluster_e2e_test's case (temporary directory, environment, processes killed at the
    end), with each process's output in a file."""

    def path(self, *parts):
        return os.path.join(self.tmp.name, *parts)

    def start(self, job, args=(), cwd=None, home="home"):
        """Starts `tandem run`; its output goes to a file (a pipe nobody reads would fill)."""
        log = self.path(f"out{len(self.procs)}.log")
        with open(log, "w") as out:
            p = subprocess.Popen([base.TANDEM, "run", job, *args], env=self.env(
                TANDEM_HOME=self.path(home)), cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                text=True)
        p.log = log
        p.stdout = open(log)  # the base case's tearDown closes it
        self.procs.append(p)
        return p

    def start_nodes(self, job, cwds=(None, None), extra=((), ()), homes=("home", "home")):
        port = free_port()
        return [self.start(job, ["--nodes", "2", "--node-rank", str(r), "--head",
                                 f"127.0.0.1:{port}", *extra[r]], cwd=cwds[r], home=homes[r])
                for r in (0, 1)]

    def output(self, p):
        with open(p.log) as f:
            return f.read()

    def finish(self, p, deadline_s=900):
        p.wait(timeout=deadline_s)
        return p.returncode, self.output(p)

    def wait_until(self, what, check, procs=(), deadline_s=600):
        """Polls `check` (a condition, with a deadline) until it returns a true value."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            for p in procs:
                self.assertIsNone(p.poll(), f"a node ended before {what}:\n{self.output(p)}")
            time.sleep(0.1)
        self.fail(f"no {what} within {deadline_s} s")

    def wait_for_line(self, p, pattern):
        return self.wait_until(f"line matching {pattern!r}",
                               lambda: re.search(pattern, self.output(p)), [p])

    def wait_for_file(self, path, procs):
        self.wait_until(path, lambda: os.path.exists(path), procs)


class KillAndResumeTest(ClusterCase):
    def test_kill_9_then_resume_ends_with_the_uninterrupted_weights(self):
        steps = 40
        reference_job = two_pipeline_job(self.path("ref.toml"), steps, self.path("ref-ckpt"))
        rc, out = self.finish(self.start(reference_job))
        self.assertEqual(rc, 0, out)
        reference = HASH_RE.findall(out)
        self.assertEqual(len(reference), 2, out)
        self.assertEqual(reference[0], reference[1], out)

        ckpt = self.path("ckpt")
        job = two_pipeline_job(self.path("run.toml"), steps, ckpt, node_timeout_s=3)
        nodes = self.start_nodes(job)
        # Mid-run: once the first checkpoint is durable, kill node 1.
        self.wait_for_file(os.path.join(ckpt, "latest"), nodes)
        nodes[1].send_signal(signal.SIGKILL)
        nodes[1].wait()
        rc, out = self.finish(nodes[0], 300)
        self.assertNotEqual(rc, 0, "node 0 finished before node 1 was killed:\n" + out)
        self.assertRegex(out, r"node 1 ")
        with open(os.path.join(ckpt, "latest")) as f:
            saved = f.read().strip()
        self.assertNotEqual(saved, f"step_{steps:08d}", "the run ended before the kill")

        resumed_job = two_pipeline_job(self.path("resume.toml"), steps, ckpt, resume=True,
                                       node_timeout_s=3)
        nodes = self.start_nodes(resumed_job)
        results = [self.finish(p) for p in nodes]
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"node {rank}:\n{out}")
        got = [h for _, out in results for h in HASH_RE.findall(out)]
        self.assertEqual(got, reference, "\n".join(out for _, out in results))
        self.assertRegex(results[0][1], r"from [1-9]\d*\)")  # it did resume, not restart


class FrozenNodeTest(ClusterCase):
    def test_sigstop_of_a_node_stops_the_other_within_the_node_timeout(self):
        timeout_s = 3
        job = two_pipeline_job(self.path("long.toml"), 100000, node_timeout_s=timeout_s)
        nodes = self.start_nodes(job)
        self.wait_for_line(nodes[1], r"drafter/1.*step")
        nodes[1].send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        rc, out = self.finish(nodes[0], 300)
        waited = time.monotonic() - t0
        self.assertNotEqual(rc, 0, out)
        self.assertRegex(out, r"node 1 \(.*\) was not heard from")
        # The collectives' own timeout is 60 s here: ending well before it shows that the
        # heartbeats' verdict aborted the collective node 0 was waiting in.
        self.assertLess(waited, 45, out)


class SharedDirTest(ClusterCase):
    def test_different_checkpoint_dirs_are_refused_naming_the_node_and_path(self):
        # One relative path, two working directories: each node sees another directory.
        job = two_pipeline_job(self.path("rel.toml"), 8, "ckpt")
        cwds = [self.path("a"), self.path("b")]
        for d in cwds:
            os.makedirs(d)
        nodes = self.start_nodes(job, cwds=cwds)
        results = [self.finish(p, 300) for p in nodes]
        for rank, (rc, out) in enumerate(results):
            self.assertNotEqual(rc, 0, f"node {rank}:\n{out}")
            self.assertRegex(out, r"node 1 does not see the directory node 0 writes", out)
            self.assertIn("ckpt", out)
            self.assertNotIn("weights fnv1a", out)


class VisibilityTest(ClusterCase):
    def tandem(self, home, pid, *args):
        socket_path = os.path.join(self.path(home), f"run-{pid}.sock")
        return subprocess.run([base.TANDEM, "--socket", socket_path, *args], env=self.env(),
                              capture_output=True, text=True, timeout=120)

    def metrics(self, port):
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                          timeout=30).read().decode()
        except OSError:
            return ""

    def test_status_logs_and_metrics_at_the_head_show_both_nodes(self):
        job = two_pipeline_job(self.path("long.toml"), 100000)
        ports = [free_port(), free_port()]
        nodes = self.start_nodes(job, homes=("home0", "home1"),
                                 extra=(["--metrics-port", str(ports[0])],
                                        ["--metrics-port", str(ports[1])]))
        self.wait_for_line(nodes[1], r"drafter/1.*step")

        def both_nodes():
            r = self.tandem("home0", nodes[0].pid, "--json", "status", "tiny")
            if r.returncode != 0:
                return None
            status = json.loads(r.stdout)
            ranks = [n["rank"] for n in status["nodes"]]
            remote = [n for n in status["nodes"] if n["rank"] == 1]
            if ranks != [0, 1] or not remote or remote[0]["report_age_s"] < 0:
                return None
            return status
        status = self.wait_until("status with both nodes", both_nodes, nodes)
        self.assertEqual(status["node"], 0)
        by_rank = {n["rank"]: n for n in status["nodes"]}
        for rank, actors in ((0, {"target/0", "drafter/0"}), (1, {"target2/0", "drafter/1"})):
            n = by_rank[rank]
            self.assertEqual(n["state"], "running", n)
            self.assertLess(n["heartbeat_age_s"], 30, n)
            self.assertEqual({a["name"] for a in n["actors"]}, actors, n)
            self.assertEqual([c["name"] for c in n["channels"]], ["hidden"], n)
            self.assertGreater(n["store"]["capacity"], 0, n)
        text = self.tandem("home0", nodes[0].pid, "status", "tiny")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"node 1 \(.*\): running, heartbeat [0-9.]+s ago")

        def remote_lines():
            r = self.tandem("home0", nodes[0].pid, "logs", "tiny", "--actor", "drafter/1")
            return r.stdout if r.returncode == 0 and "step" in r.stdout else None
        lines = self.wait_until("logs of drafter/1 at the head", remote_lines, nodes)
        self.assertNotRegex(lines, r"drafter/0")

        def labelled(port, pattern):
            return lambda: re.search(pattern, self.metrics(port), re.M)
        self.wait_until("the head's node label", labelled(
            ports[0], r'^tandem_job_running\{job="[^"]*",job_name="tiny",node="0"\} 1'), nodes)
        self.wait_until("node 1's heartbeat age at the head", labelled(
            ports[0], r'^tandem_node_heartbeat_age_seconds\{.*node="1".*state="running"'), nodes)
        self.wait_until("node 1's node label", labelled(
            ports[1], r'^tandem_job_running\{job="[^"]*",job_name="tiny",node="1"\} 1'), nodes)


if __name__ == "__main__":
    base.TANDEM, base.TINY = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
