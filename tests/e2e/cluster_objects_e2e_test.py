#!/usr/bin/env python3
"""End-to-end tests of hidden batches crossing nodes: examples/cluster/tiny-3node.toml on three
real `tandem run` processes over 127.0.0.1, node 0 running both targets and nodes 1 and 2 one
drafter each, so every batch travels over an object link:

  * the final drafter weights are bitwise equal to the same job run in one process;
  * `kill -9` of a drafter's node mid-run stops the two others within the job's node timeout,
    naming the lost node, instead of leaving them waiting on a link or in a collective.

Waits poll with deadlines (never fixed sleeps), so a loaded machine only makes them slower.

Usage: cluster_objects_e2e_test.py PATH/TO/tandem PATH/TO/examples/cluster/tiny-3node.toml
       [unittest args]
"""
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_e2e_test as base  # noqa: E402  (the shared harness: processes, env, hashes)

EXAMPLE = None


def three_node_job(path, steps=16, node_timeout_s=None):
    """The example with `steps` drafter steps (each target producing a few more batches)."""
    with open(EXAMPLE) as f:
        text = f.read()
    text = re.sub(r"(?m)^max_steps = \d+", f"max_steps = {steps}", text)
    text = re.sub(r"(?m)^batches_per_epoch = \d+", f"batches_per_epoch = {steps + 4}", text)
    if node_timeout_s is not None:
        text = text.replace("[job]\n", f"[job]\nnode_timeout_s = {node_timeout_s}\n", 1)
    with open(path, "w") as f:
        f.write(text)
    return path


class ThreeNodesTest(base.ClusterCase):
    def node_args(self, port, rank):
        return ["--nodes", "3", "--node-rank", str(rank), "--head", f"127.0.0.1:{port}"]

    def test_hidden_batches_cross_nodes_and_weights_match_one_process(self):
        job = three_node_job(os.path.join(self.tmp.name, "three.toml"))
        rc, out = self.finish(self.start(job))
        self.assertEqual(rc, 0, out)
        reference = self.hashes(out)
        self.assertEqual(len(reference), 2, out)
        self.assertEqual(reference[0], reference[1], out)

        port = base.free_port()
        procs = [self.start(job, self.node_args(port, r)) for r in range(3)]
        results = [self.finish(p) for p in procs]
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"node {rank}:\n{out}")
        # Node 0 ran the targets (two links out), nodes 1 and 2 one drafter each (one link in).
        self.assertIn("object links: 2 out, 0 in", results[0][1])
        self.assertEqual(self.hashes(results[0][1]), [], results[0][1])
        for rank in (1, 2):
            self.assertIn("object links: 0 out, 1 in", results[rank][1])
            self.assertEqual(self.hashes(results[rank][1]), [reference[0]],
                             f"node {rank}:\n{results[rank][1]}")

    def test_kill_9_of_a_drafter_node_stops_the_others_naming_it(self):
        timeout_s = 3
        job = three_node_job(os.path.join(self.tmp.name, "long.toml"), steps=100000,
                             node_timeout_s=timeout_s)
        port = base.free_port()
        procs = [self.start(job, self.node_args(port, r)) for r in range(3)]
        victim = procs[1]
        self.wait_for_line(victim, r"drafter/0.*step")  # mid-run
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        t0 = time.monotonic()
        for rank in (0, 2):
            rc, out = self.finish(procs[rank], 300)
            waited = time.monotonic() - t0
            self.assertNotEqual(rc, 0, f"node {rank}:\n{out}")
            self.assertRegex(out, r"node 1[ )]", f"node {rank}:\n{out}")
            # The bound: the node timeout, plus the stop itself on a loaded machine.
            self.assertLess(waited, timeout_s + 120, f"node {rank}:\n{out}")


if __name__ == "__main__":
    base.TANDEM, EXAMPLE = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:])
