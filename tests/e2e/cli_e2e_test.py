#!/usr/bin/env python3
"""End-to-end tests of the tandem CLI: a real daemon (and a real `tandem run`) driven over
its Unix socket and TCP port, with good and bad input. Each test uses its own temporary
TANDEM_HOME. Waits poll with generous deadlines (never fixed sleeps), so a loaded 2-core
machine only makes them slower, not flaky.

Usage: cli_e2e_test.py PATH/TO/tandem PATH/TO/examples/pingpong.toml [unittest args]
"""
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

TANDEM = None
PINGPONG = None
DEADLINE_S = 60  # per wait; a healthy run needs well under a second


def poll(fn, what, deadline_s=DEADLINE_S):
    """Calls fn() until it returns a truthy value; fails the test after deadline_s."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        last = fn()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def long_job(dirname, objects=10_000_000):
    """The pingpong job with enough objects to still run while the test inspects it."""
    with open(PINGPONG) as f:
        text = f.read()
    text = text.replace("objects = 2000 ", f"objects = {objects} ")
    path = os.path.join(dirname, "long.toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def read_frame(sock):
    """One reply frame: (magic, payload bytes)."""
    header = b""
    while len(header) < 8:
        chunk = sock.recv(8 - len(header))
        if not chunk:
            raise AssertionError("connection closed before a reply")
        header += chunk
    size = struct.unpack("<I", header[4:])[0]
    payload = b""
    while len(payload) < size:
        chunk = sock.recv(size - len(payload))
        if not chunk:
            break
        payload += chunk
    return header[:4], payload


class TandemCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="tandem-e2e-")
        self.home = os.path.join(self.tmp.name, "home")
        self.env = dict(os.environ, TANDEM_HOME=self.home, TANDEM_LOG_LEVEL="info")
        self.env.pop("TANDEM_TOKEN", None)
        self.daemon_started = False

    def tearDown(self):
        if self.daemon_started:
            self.cli("shutdown", check=False)
            sock = os.path.join(self.home, "tandem.sock")
            poll(lambda: not os.path.exists(sock), "daemon socket removal")
        self.tmp.cleanup()

    def cli(self, *args, check=True, env=None, timeout=DEADLINE_S):
        p = subprocess.run([TANDEM, *args], capture_output=True, text=True,
                           env=env or self.env, timeout=timeout)
        if check and p.returncode != 0:
            self.fail(f"tandem {' '.join(args)} exited {p.returncode}: {p.stderr}")
        return p

    def status_json(self, job=None):
        p = self.cli("--json", "status", *([job] if job else []))
        return json.loads(p.stdout)

    def start_daemon(self, *extra, env=None):
        p = self.cli("start", *extra, env=env)
        self.daemon_started = True
        return p

    def check_running_status(self, st):
        names = sorted(a["name"] for a in st["actors"])
        self.assertEqual(names, ["consumer/0", "consumer/1", "consumer/2",
                                 "producer/0", "producer/1"])
        classes = {a["group"]: a["class"] for a in st["actors"]}
        self.assertEqual(classes, {"producer": "demo.producer", "consumer": "demo.consumer"})
        for a in st["actors"]:
            self.assertEqual(a["gpu"], -1)
            self.assertIn("restarts", a)
            self.assertIn("mailbox_depth", a)
        [ch] = st["channels"]
        self.assertEqual((ch["name"], ch["capacity"], ch["min_ready"]), ("objects", 64, 4))
        self.assertEqual((ch["writers"], ch["readers"]), (2, 3))
        self.assertLessEqual(ch["depth"], 64)
        self.assertGreater(ch["pushed"], 0)
        self.assertEqual(st["store"]["capacity"], 16 << 20)
        self.assertGreaterEqual(st["store"]["high_water"], st["store"]["used"])
        self.assertGreater(st["store"]["high_water"], 0)
        stages = {s["name"] for s in st["stages"]}
        self.assertTrue({"demo.produce", "demo.queue_get"} <= stages, stages)
        self.assertIn("demo.produce", st["profile_table"])
        self.assertTrue(st["verdict"])
        self.assertGreater(st["items_total"], 0)


class DaemonTest(TandemCase):
    def test_lifecycle(self):
        self.start_daemon()
        self.assertEqual(os.stat(self.home).st_mode & 0o777, 0o700)
        self.assertEqual(os.stat(os.path.join(self.home, "tandem.sock")).st_mode & 0o777, 0o600)
        job = self.cli("submit", long_job(self.tmp.name)).stdout.strip()
        self.assertEqual(job, "j1")
        st = poll(lambda: (s := self.status_json(job))["items_done"] > 0 and s["stages"] and s,
                  "the job to make progress")
        self.assertEqual(st["state"], "running")
        self.check_running_status(st)
        self.assertIn("consumer/2", self.cli("list", "actors").stdout)
        jobs = json.loads(self.cli("--json", "list", "jobs").stdout)
        self.assertEqual([j["id"] for j in jobs], ["j1"])
        text = self.cli("status", job).stdout
        self.assertIn("verdict:", text)
        self.assertIn("channels:", text)
        logs = self.cli("logs", job).stdout
        self.assertIn("starting", logs)
        self.cli("stop", job)
        done = poll(lambda: (s := self.status_json(job))["state"] not in ("running", "stopping")
                    and s, "the job to stop")
        self.assertEqual(done["state"], "stopped", done["error"])
        self.assertEqual(done["store"]["objects"], 0)
        logs = self.cli("logs", job, "--follow").stdout  # ends because the job has ended
        self.assertIn("stop requested", logs)
        bad = self.cli("stop", "nosuchjob", check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("no job 'nosuchjob'", bad.stderr)
        again = self.cli("start", check=False)
        self.assertEqual(again.returncode, 1)
        self.assertIn("already", again.stderr)

    def test_submit_wait_succeeds(self):
        self.start_daemon()
        p = self.cli("--json", "submit", PINGPONG, "--wait")
        st = json.loads(p.stdout)
        self.assertEqual(st["state"], "succeeded")
        self.assertEqual(st["items_done"], 4000)
        self.assertEqual(st["store"]["objects"], 0)

    def test_bad_job_files_are_refused(self):
        self.start_daemon()
        d = self.tmp.name
        with open(PINGPONG) as f:
            base = f.read()
        cases = {
            "malformed.toml": ("[job\nname = 1\n", "malformed TOML"),
            "wrongtype.toml": (base.replace("replicas = 3", 'replicas = "three"'), "replicas"),
            "unknownkey.toml": (base.replace("capacity = 64", "capacty = 64"),
                                "channels.objects.capacty: unknown key; did you mean capacity?"),
            # An actor class's own keys are checked too, by validate and submit.
            "actorkey.toml": (base.replace("object_bytes = 65536", "object_byte = 65536"),
                              "actors.producer.object_byte: unknown key; did you mean "
                              "object_bytes?"),
            "actorrange.toml": (base.replace("object_bytes = 65536", "object_bytes = 0"),
                                "actors.producer.object_bytes: 0 is out of range"),
            "storeoverflow.toml": (base.replace("capacity_mb = 16", "capacity_mb = 17592186044416"),
                                   "store.capacity_mb: 17592186044416 is out of range"),
            "unknownclass.toml": (base.replace('"demo.consumer"', '"demo.consumr"'),
                                  "did you mean 'demo.consumer'"),
            "toomanygpus.toml": (base.replace("replicas = 3", "replicas = 3\ngpus = 1"), "GPU"),
        }
        for name, (text, want) in cases.items():
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(text)
            for cmd in (["validate", path], ["submit", path]):
                p = self.cli(*cmd, check=False)
                self.assertEqual(p.returncode, 2, f"{cmd}: {p.stdout} {p.stderr}")
                self.assertIn(want, p.stderr, cmd)
                self.assertIn(name, p.stderr, cmd)  # errors name the file
        # Not a job file at all: a directory, and a device that never ends.
        for path, want in ((d, "is a directory"), ("/dev/zero", "larger than the limit")):
            for cmd in (["validate", path], ["submit", path]):
                p = self.cli(*cmd, check=False, timeout=30)
                self.assertEqual(p.returncode, 2, f"{cmd}: {p.stdout} {p.stderr}")
                self.assertIn(want, p.stderr, cmd)
        self.assertEqual(self.status_json(), [])  # nothing was started, the daemon still serves

    def test_garbage_and_oversized_frames(self):
        self.start_daemon()
        path = os.path.join(self.home, "tandem.sock")
        probes = [
            (b"hello, this is not a frame\n", b"bad frame"),
            (b"TNDM" + struct.pack("<I", 64 << 20), b"exceeds the limit"),
            (b"TNDM" + struct.pack("<I", 16) + b"\xff" * 16, b"malformed message"),
            (b"TNDM" + struct.pack("<I", 5) + b"\x01" * 5, b"malformed message"),
        ]
        for data, want in probes:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(DEADLINE_S)
                s.connect(path)
                s.sendall(data)
                magic, payload = read_frame(s)
                self.assertEqual(magic, b"TNDM")
                self.assertIn(want, payload, data[:12])
        # A client that connects and goes silent does not block others.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
            idle.connect(path)
            idle.sendall(b"TND")
            self.assertEqual(self.status_json(), [])


class HardeningTest(TandemCase):
    """What a hostile or careless client could do to a daemon."""

    def test_concurrent_starts_report_the_real_outcome(self):
        os.makedirs(self.home, mode=0o700)
        procs = [subprocess.Popen([TANDEM, "--json", "start"], env=self.env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        results = [(p.wait(timeout=DEADLINE_S), *p.communicate()) for p in procs]
        self.daemon_started = True
        ok = [json.loads(out) for code, out, _ in results if code == 0]
        self.assertEqual(len(ok), 1, results)  # exactly one daemon, and one start says so
        pong = self.cli("--json", "status")  # it answers
        self.assertEqual(json.loads(pong.stdout), [])
        for code, out, err in results:
            if code != 0:
                self.assertEqual(code, 1, err)
                self.assertIn("already", err)
        with open(os.path.join(self.home, "daemon.log")) as f:
            self.assertIn(f"tandem daemon (pid {ok[0]['pid']}) serving", f.read())

    def test_idle_connections_announcing_big_frames_cost_no_memory(self):
        out = self.cli("--json", "start")
        self.daemon_started = True
        pid = json.loads(out.stdout)["pid"]

        def rss_kib():
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
            return 0

        before = rss_kib()
        path = os.path.join(self.home, "tandem.sock")
        idle = []
        for _ in range(30):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.sendall(b"TNDM" + struct.pack("<I", 16 << 20) + b"x")
            idle.append(s)
        self.assertEqual(self.status_json(), [])  # still answers, after reading those headers
        time.sleep(0.5)  # room for a server that allocates what headers announce to show it
        grown_mib = (rss_kib() - before) / 1024
        for s in idle:
            s.close()
        self.assertLess(grown_mib, 64, f"30 idle connections took {grown_mib:.0f} MiB")

    def test_wrong_token_submit_exits_1_and_is_logged(self):
        port = free_port()
        env = dict(self.env, TANDEM_TOKEN="s3cret-token")
        self.start_daemon("--listen-tcp", str(port), env=env)
        bad = dict(self.env, TANDEM_TOKEN="wrong")
        p = self.cli("--tcp-port", str(port), "submit", PINGPONG, check=False, env=bad)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("unauthenticated", p.stderr)
        with open(os.path.join(self.home, "daemon.log")) as f:
            self.assertIn("token check failed for a request from 127.0.0.1:", f.read())

    def test_job_name_with_control_characters_is_escaped(self):
        self.start_daemon()
        with open(PINGPONG) as f:
            text = f.read().replace('name = "pingpong"', 'name = "evil\\nname\\u001b[31m"')
        path = os.path.join(self.tmp.name, "evil.toml")
        with open(path, "w") as f:
            f.write(text)
        self.cli("submit", path, "--wait")
        table = self.cli("list", "jobs").stdout
        self.assertIn("evil\\nname\\x1b[31m", table)
        self.assertNotIn("\x1b", table)
        self.assertEqual(self.status_json()[0]["name"], "evil\nname\x1b[31m")


class TokenAndMetricsTest(TandemCase):
    def test_tcp_token_and_metrics(self):
        port, mport = free_port(), free_port()
        env = dict(self.env, TANDEM_TOKEN="s3cret-token")
        self.start_daemon("--listen-tcp", str(port), "--metrics-port", str(mport), env=env)
        ok = self.cli("--tcp-port", str(port), "--json", "status", env=env)
        self.assertEqual(json.loads(ok.stdout), [])
        wrong = self.cli("--tcp-port", str(port), "status", check=False,
                         env=dict(self.env, TANDEM_TOKEN="wrong"))
        self.assertEqual(wrong.returncode, 1)
        self.assertIn("unauthenticated", wrong.stderr)
        token_file = os.path.join(self.tmp.name, "token")
        with open(token_file, "w") as f:
            f.write("s3cret-token\n")
        os.chmod(token_file, 0o644)
        loose = self.cli("--tcp-port", str(port), "--token-file", token_file, "status",
                         check=False)
        self.assertEqual(loose.returncode, 2)
        self.assertIn("chmod 600", loose.stderr)
        os.chmod(token_file, 0o600)
        self.cli("--tcp-port", str(port), "--token-file", token_file, "status")
        self.cli("submit", PINGPONG, "--wait", env=env)
        body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=30).read()
        text = body.decode()
        for family in ("tandem_actor_state", "tandem_channel_depth", "tandem_store_used_bytes",
                       "tandem_stage_seconds_total"):
            self.assertIn(f"# TYPE {family}", text)
        self.assertIn('stage="demo.produce"', text)
        self.assertIn(f"tandem_store_capacity_bytes{{job=\"j1\",job_name=\"pingpong\"}} {16 << 20}",
                      text)
        for path, code in (("/metricsXYZ", 404), ("/metrics/../../etc/passwd", 404)):
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"http://127.0.0.1:{mport}{path}", timeout=30)
            self.assertEqual(e.exception.code, code, path)
        req = urllib.request.Request(f"http://127.0.0.1:{mport}/metrics", method="POST", data=b"")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=30)
        self.assertEqual(e.exception.code, 405)


class RunTest(TandemCase):
    def test_run_in_background_serves_status(self):
        os.makedirs(self.home, mode=0o700)
        proc = subprocess.Popen([TANDEM, "run", long_job(self.tmp.name)], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            st = poll(lambda: (self.cli("--json", "status", check=False).returncode == 0 and
                               (s := self.status_json()) and s[0]["items_done"] > 0 and
                               s[0]["stages"] and s[0]),
                      "tandem run to answer status")
            self.assertEqual(st["state"], "running")
            self.check_running_status(st)
            self.assertIn("starting", self.cli("logs", st["id"]).stdout)
            submit = self.cli("submit", PINGPONG, check=False)
            self.assertNotEqual(submit.returncode, 0)  # a run process takes no new jobs
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 130, err)  # 128 + SIGINT (docs/cli.md)
        self.assertIn("job 'pingpong' finished", out)
        self.assertIn("0 live objects", out)

    def tiny_job(self, name, max_steps, ckpt):
        """examples/tiny.toml with its checkpoint dir at `ckpt` and `max_steps` steps."""
        with open(os.path.join(os.path.dirname(PINGPONG), "tiny.toml")) as f:
            text = f.read()
        for old, new in (("max_steps = 240 ", f"max_steps = {max_steps} "),
                         ('dir = "/tmp/tandem-tiny-ckpt"', f'dir = "{ckpt}"')):
            self.assertIn(old, text, "examples/tiny.toml changed")
            text = text.replace(old, new)
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_two_runs_sharing_a_checkpoint_dir(self):
        # Two jobs on one checkpoint dir must not write over each other's steps. The second
        # `tandem run` is refused, naming the dir and the first; a killed holder's lock is
        # taken over by the next run, which says whose it was.
        ckpt = os.path.join(self.tmp.name, "ckpt")
        lock = os.path.join(ckpt, ".tandem-lock")
        env1 = dict(self.env, TANDEM_HOME=os.path.join(self.tmp.name, "home1"))
        env2 = dict(self.env, TANDEM_HOME=os.path.join(self.tmp.name, "home2"))
        first = subprocess.Popen([TANDEM, "run", self.tiny_job("long.toml", 100000, ckpt)],
                                 env=env1, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def locked():
                try:
                    with open(lock) as f:
                        return f"pid={first.pid}" in f.read()
                except OSError:
                    return False
            poll(locked, "the first run to lock its checkpoint dir", deadline_s=300)
            second = self.cli("run", self.tiny_job("short.toml", 2, ckpt), check=False,
                              env=env2, timeout=300)
            self.assertNotEqual(second.returncode, 0, second.stdout)
            self.assertIn(f"'{ckpt}' is in use by another job", second.stderr)
            self.assertIn("job 'tiny'", second.stderr)
            self.assertIn(f"pid {first.pid}", second.stderr)
            self.assertIsNone(first.poll(), "the refused run must not disturb the first")
        finally:
            first.kill()  # SIGKILL: the lock's record stays behind, stale
            first.wait()
        third = self.cli("run", self.tiny_job("short.toml", 2, ckpt), check=False, env=env2,
                         timeout=300)
        self.assertEqual(third.returncode, 0, third.stderr)
        self.assertIn("took over the stale lock", third.stderr)
        self.assertIn(f"pid {first.pid}", third.stderr)

    def test_run_default_job(self):
        # The built-in job is examples/tiny.toml: a tiny target and drafter on synthetic data.
        # Its checkpoint dir is the fixed /tmp/tandem-tiny-ckpt, so while another run of the
        # default job on this machine (another checkout's suite, a user) holds that dir's lock,
        # `tandem run` is refused as documented ("is in use by another job"); the test waits
        # for that run to end and tries again, and its own run must then succeed.
        end = time.monotonic() + 900
        while True:
            # ~30 s alone on 2 cores; more under a parallel ctest
            p = self.cli("run", check=False, timeout=300)
            busy = p.returncode != 0 and "is in use by another job" in p.stderr
            if not busy or time.monotonic() > end:
                break
            time.sleep(1)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("checksum mismatches 0", p.stdout)
        self.assertIn("0 live objects", p.stdout)


if __name__ == "__main__":
    TANDEM, PINGPONG = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=[sys.argv[0], *sys.argv[3:]], verbosity=2)
