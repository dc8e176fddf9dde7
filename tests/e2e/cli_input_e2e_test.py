#!/usr/bin/env python3
"""End-to-end tests of the tandem CLI's handling of bad input that once wrapped, crashed,
hung or was silently ignored: out-of-range ports and sizes, zero or negative eval counts, a
CUDA device that is not there, job files `run` refuses but `validate` passed, a metrics file
whose values differ by less than a tick step, escape sequences in what is printed, a home
directory owned by someone else. No daemon is started; every command is expected to finish
on its own (each call has a deadline that only stops a hang).

Usage: cli_input_e2e_test.py PATH/TO/tandem PATH/TO/examples/tiny.toml [unittest args]
"""
import os
import subprocess
import sys
import tempfile
import unittest

TANDEM = None
TINY = None
DEADLINE_S = 120


class CliInputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tandem-input-")
        self.home = os.path.join(self.tmp.name, "home")
        self.env = dict(os.environ, TANDEM_HOME=self.home)
        self.env.pop("TANDEM_TOKEN", None)

    def tearDown(self):
        self.tmp.cleanup()

    def cli(self, *args):
        return subprocess.run([TANDEM, *args], capture_output=True, text=True,
                              errors="replace", env=self.env, timeout=DEADLINE_S)

    def refused(self, args, *mentions, code=2):
        p = self.cli(*args)
        self.assertEqual(p.returncode, code, f"tandem {' '.join(args)}: {p.stderr}")
        for m in mentions:
            self.assertIn(m, p.stderr, f"tandem {' '.join(args)}")
        return p

    def tiny_job(self, old, new, name="job.toml"):
        with open(TINY) as f:
            text = f.read()
        self.assertIn(old, text)
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text.replace(old, new).replace("/tmp/tandem-tiny-ckpt",
                                                   os.path.join(self.tmp.name, "ckpt")))
        return path

    def test_ports_and_sizes_out_of_range_are_refused(self):
        # 65536 + 8080 once wrapped to port 8080.
        self.refused(["--tcp-port", "73616", "status"], "--tcp-port", "65535")
        self.refused(["--tcp-port=-2", "status"], "--tcp-port")
        self.refused(["run", "--metrics-port", "65536", TINY], "--metrics-port", "65535")
        self.refused(["start", "--listen-tcp", "100000"], "--listen-tcp", "65535")
        self.refused(["start", "--metrics-port=-5"], "--metrics-port")
        # 2^44 + 1 MiB once wrapped to 1 MiB after the shift into bytes.
        self.refused(["start", "--max-request-mb", str((1 << 44) + 1)], "--max-request-mb", "16")
        self.refused(["start", "--max-request-mb", "17"], "--max-request-mb")
        self.refused(["start", "--max-request-mb", "0"], "--max-request-mb")
        self.refused(["start", "--max-pending-mb", str((1 << 44) + 64)], "--max-pending-mb")

    def test_eval_counts_must_be_positive(self):
        base = ["eval", "--target", "t", "--drafter", "d", "--prompts", "p.jsonl"]
        for flag, value in [("--batch", "0"), ("--batch", "-3"), ("--max-new-tokens", "0"),
                            ("--block-size", "0"), ("--max-prompt-tokens", "-1"),
                            ("--max-prompts", "-1"), ("--temperature", "-0.5")]:
            with self.subTest(flag=flag, value=value):
                self.refused(base + [f"{flag}={value}"], flag)

    def test_eval_sampling_flags_are_checked_and_named(self):
        base = ["eval", "--target", "t", "--drafter", "d", "--prompts", "p.jsonl"]
        for args, flag in [(["--temperature=inf"], "--temperature"),
                           (["--temperature=nan"], "--temperature"),
                           (["--temperature=0.7", "--top-p=0"], "--top-p"),
                           (["--temperature=0.7", "--top-p=1.5"], "--top-p"),
                           (["--temperature=0.7", "--top-k=-1"], "--top-k"),
                           (["--top-p=0.9"], "--temperature"),
                           (["--greedy-drafts"], "--temperature")]:
            with self.subTest(args=args):
                self.refused(base + args, flag)

    def test_eval_on_a_missing_gpu_is_an_error_not_an_abort(self):
        base = ["eval", "--target", os.path.join(self.tmp.name, "none"), "--drafter", "d",
                "--prompts", "p.jsonl"]
        # No machine has 9999 GPUs: the message names the device (it used to be a CHECK).
        self.refused(base + ["--device", "cuda:9999"], "--device cuda:9999", "CUDA GPU")
        # `cuda`: without a GPU the same clear error; with one, the missing target's.
        p = self.cli(*base, "--device", "cuda")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertTrue("CUDA GPU" in p.stderr or "none" in p.stderr, p.stderr)
        self.refused(base + ["--device", "cuda:x"], "expected auto, cpu, cuda or cuda:N")

    def test_validate_refuses_what_run_refuses(self):
        ok = self.tiny_job("epochs = 1", "epochs = 1", "ok.toml")
        p = self.cli("validate", ok)
        self.assertEqual(p.returncode, 0, p.stderr)
        cases = [
            ("layers = [1, 4]", "layers = [4, 4]", ["actors.target.layers", "must increase"]),
            ("layers = [1, 4]", "layers = [0, 1, 2, 3, 4, 5, 5]",
             ["actors.target.layers", "must increase"]),
            ("capacity_mb = 64", "capacity_mb = 16777216",
             ["store.capacity_mb", "more than this machine has"]),
            ("max_position_embeddings = 512", "max_position_embeddings = 32",
             ["actors.target.doc_len", "max_position_embeddings = 32"]),
            ("rope_theta = 10000.0", "rope_thetta = 10000.0",
             ["target_config", "rope_thetta", "did you mean 'rope_theta'"]),
        ]
        for i, (old, new, mentions) in enumerate(cases):
            with self.subTest(new=new):
                job = self.tiny_job(old, new, f"bad{i}.toml")
                self.refused(["validate", job], *mentions)

    def test_report_of_nearly_equal_huge_values_finishes(self):
        # loss 1e17 and 1e17 + 16 are one ulp apart: the axis ticks once never advanced and
        # `tandem report` grew without bound.
        metrics = os.path.join(self.tmp.name, "metrics.jsonl")
        with open(metrics, "w") as f:
            f.write('{"kind": "header", "schema": 1, "job": "ulp"}\n'
                    '{"kind": "train", "t": 1, "step": 1, "loss": 1e17}\n'
                    '{"kind": "train", "t": 2, "step": 2, "loss": 100000000000000016}\n')
        out = os.path.join(self.tmp.name, "report.html")
        p = self.cli("report", metrics, "-o", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLess(os.path.getsize(out), 1 << 20)

    def test_report_warnings_escape_terminal_sequences(self):
        metrics = os.path.join(self.tmp.name, "metrics.jsonl")
        with open(metrics, "w") as f:
            f.write('{"kind": "header", "schema": 1, "job": "x"}\n'
                    '{"kind": "\\u001b[2J\\u001b]0;title\\u0007", "t": 1}\n'
                    '{"kind": "train", "t": 1, "step": 1, "loss": 2}\n')
        p = self.cli("report", metrics, "-o", os.path.join(self.tmp.name, "r.html"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("\x1b", p.stderr)
        self.assertNotIn("\x07", p.stderr)
        self.assertIn("\\x1b[2J", p.stderr)

    def test_a_home_owned_by_another_user_is_refused(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to give the directory to another user")
        os.makedirs(self.home, mode=0o700)
        os.chown(self.home, 54321, 54321)
        self.refused(["status"], self.home, "belongs to uid 54321")


if __name__ == "__main__":
    TANDEM, TINY = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0]] + sys.argv[3:], verbosity=2)
