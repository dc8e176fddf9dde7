#!/usr/bin/env python3
"""End-to-end tests of a job on several nodes, each node a real `tandem run` process on
127.0.0.1 joined through the head (node rank 0) over TCP with a token:

  * two nodes that each run a target and a drafter end with drafter weights bitwise equal
    to the same job run in one process (gradients averaged across the processes by Gloo);
  * the place comes from flags, from Slurm's variables or from torchrun-style ones;
  * a node with another job file, or with a wrong token, is refused, naming it;
  * `kill -9` of a node mid-run stops the other within the job's node timeout, naming the
    lost node, instead of leaving it in a collective.

Waits poll with deadlines (never fixed sleeps), so a loaded machine only makes them slower.

Usage: cluster_e2e_test.py PATH/TO/tandem PATH/TO/examples/tiny.toml [unittest args]
"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

TANDEM = None
TINY = None
HASH_RE = re.compile(r"weights fnv1a ([0-9a-f]{16})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_pipeline_job(path, steps=16, node_timeout_s=None):
    """The tiny job with two one-replica target groups feeding two drafter replicas over a
    replica-routed channel: target/0 feeds drafter/0 and target2/0 feeds drafter/1, so two
    nodes each run one whole pipeline."""
    with open(TINY) as f:
        text = f.read()
    text = re.sub(r"(?m)^checkpoint = .*$", "", text)  # no checkpoints: nothing to lock
    text = re.sub(r"(?m)^max_restarts = .*$", "max_restarts = 0", text)
    text = re.sub(r"(?m)^max_steps = \d+", f"max_steps = {steps}", text)
    text = re.sub(r"(?m)^batches_per_epoch = \d+", f"batches_per_epoch = {steps + 4}", text)
    text = text.replace("[actors.drafter]\n", "[actors.drafter]\n", 1)
    text = re.sub(r"(?m)^(\[actors\.drafter\]\n(?:.*\n)*?)replicas = 1 ", r"\1replicas = 2 ", text)
    begin, end = text.index("[actors.target]\n"), text.index("[actors.drafter]\n")
    second = text[begin:end].replace("[actors.target]\n", "[actors.target2]\nseed = 2\n", 1)
    text += "\n" + second
    if node_timeout_s is not None:
        text = text.replace("[job]\n", f"[job]\nnode_timeout_s = {node_timeout_s}\n", 1)
    with open(path, "w") as f:
        f.write(text)
    return path


class ClusterCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tandem-cluster-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
        self.tmp.cleanup()

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "TANDEM_")) and
               k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        env["TANDEM_HOME"] = os.path.join(self.tmp.name, "home")
        env["TANDEM_TOKEN"] = "cluster-e2e-token"
        env["TANDEM_LOG_LEVEL"] = "info"
        env.update(extra)
        return env

    def start(self, job, args=(), env=None):
        p = subprocess.Popen([TANDEM, "run", job, *args], env=env or self.env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def finish(self, p, deadline_s=900):
        out, _ = p.communicate(timeout=deadline_s)
        return p.returncode, out

    def hashes(self, out):
        return HASH_RE.findall(out)

    def wait_for_line(self, p, pattern, deadline_s=600):
        """Reads p's output until a line matches `pattern`; fails with what it read."""
        lines = []
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            if re.search(pattern, line):
                return
        self.fail("no line matching %r:\n%s" % (pattern, "".join(lines)))


class TwoNodesTest(ClusterCase):
    def one_process_hash(self, job):
        rc, out = self.finish(self.start(job))
        self.assertEqual(rc, 0, out)
        hashes = self.hashes(out)
        self.assertEqual(len(hashes), 2, out)
        self.assertEqual(hashes[0], hashes[1], out)
        return hashes[0]

    def run_two_nodes(self, job, envs_and_args):
        procs = [self.start(job, args, env) for env, args in envs_and_args]
        results = [self.finish(p) for p in procs]
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"node {rank}:\n{out}")
        return [h for _, out in results for h in self.hashes(out)]

    def test_two_nodes_end_with_the_one_process_weights(self):
        job = two_pipeline_job(os.path.join(self.tmp.name, "two.toml"))
        reference = self.one_process_hash(job)
        port = free_port()
        # Flags.
        got = self.run_two_nodes(job, [
            (self.env(), ["--nodes", "2", "--node-rank", str(r), "--head", f"127.0.0.1:{port}"])
            for r in (0, 1)])
        self.assertEqual(got, [reference, reference])
        # Slurm's variables (srun -n2 on one machine).
        port = free_port()
        got = self.run_two_nodes(job, [
            (self.env(SLURM_PROCID=str(r), SLURM_NTASKS="2", SLURM_NODELIST="127.0.0.1",
                      TANDEM_HEAD_PORT=str(port)), []) for r in (0, 1)])
        self.assertEqual(got, [reference, reference])
        # torchrun-style variables (what a Kubernetes JobSet sets).
        port = free_port()
        got = self.run_two_nodes(job, [
            (self.env(RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port)), []) for r in (0, 1)])
        self.assertEqual(got, [reference, reference])


class RefusalTest(ClusterCase):
    def test_another_job_file_is_refused_naming_the_node(self):
        job = two_pipeline_job(os.path.join(self.tmp.name, "a.toml"))
        other = two_pipeline_job(os.path.join(self.tmp.name, "b.toml"), steps=17)
        port = free_port()
        head = self.start(job, ["--nodes", "2", "--node-rank", "0", "--head", f"127.0.0.1:{port}"])
        node = self.start(other, ["--nodes", "2", "--node-rank", "1", "--head",
                                  f"127.0.0.1:{port}"])
        rc1, out1 = self.finish(node, 300)
        rc0, out0 = self.finish(head, 300)
        self.assertNotEqual(rc1, 0, out1)
        self.assertNotEqual(rc0, 0, out0)
        self.assertRegex(out0 + out1, r"node 1 .*job")
        self.assertNotIn("weights fnv1a", out0 + out1)

    def test_a_wrong_token_is_refused(self):
        job = two_pipeline_job(os.path.join(self.tmp.name, "a.toml"))
        port = free_port()
        args = ["--nodes", "2", "--head", f"127.0.0.1:{port}"]
        head = self.start(job, args + ["--node-rank", "0"],
                          self.env())
        bad = self.start(job, args + ["--node-rank", "1"], self.env(TANDEM_TOKEN="wrong"))
        rc, out = self.finish(bad, 300)
        self.assertNotEqual(rc, 0, out)
        self.assertRegex(out, r"(?i)token")
        head.kill()
        head.wait()


class NodeLossTest(ClusterCase):
    def test_kill_9_of_a_node_stops_the_other_naming_it(self):
        timeout_s = 3
        job = two_pipeline_job(os.path.join(self.tmp.name, "long.toml"), steps=100000,
                               node_timeout_s=timeout_s)
        port = free_port()
        args = ["--nodes", "2", "--head", f"127.0.0.1:{port}"]
        head = self.start(job, args + ["--node-rank", "0"])
        node = self.start(job, args + ["--node-rank", "1"])
        # Mid-run: wait until node 1 logs that its replicas started training.
        lines = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            line = node.stdout.readline()
            if not line:
                break
            lines.append(line)
            if re.search(r"drafter/1.*step", line):
                break
        self.assertTrue(lines and re.search(r"drafter/1.*step", lines[-1]), "".join(lines))
        node.send_signal(signal.SIGKILL)
        node.wait()
        t0 = time.monotonic()
        rc, out = self.finish(head, 300)
        waited = time.monotonic() - t0
        self.assertNotEqual(rc, 0, out)
        self.assertRegex(out, r"node 1 ")
        # The bound: the node timeout, plus the stop itself on a loaded machine.
        self.assertLess(waited, timeout_s + 120, out)


if __name__ == "__main__":
    TANDEM, TINY = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
