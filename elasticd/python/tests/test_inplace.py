"""In-place transitions of slurmbridge_elastic.torch with real processes and gloo on this machine:
a job that grows 1 -> 2 -> 3, shrinks by TERM to 2 and loses a process to SIGKILL, while its
first process keeps running throughout. Needs torch (python3-torch, installed by the testbed);
without it the test fails in CI and is skipped elsewhere."""
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from slurmbridge_elastic import membership  # noqa: E402

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


def free_port():
    """A free port below the ephemeral range (32768 and up on Linux), so that no outgoing
    connection of a busy machine takes it between this check and the store's bind."""
    for _ in range(100):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


class MembershipTest(unittest.TestCase):
    def gen(self, *members, number=3):
        return membership.Generation(number=number, members=tuple(members))

    def test_survivors_keep_their_order_and_joiners_follow_in_arrival_order(self):
        g = membership.next_generation(self.gen("1.0", "5.0", "7.0"), leaving=["5.0"], waiting=["9.0", "8.0"], max_procs=8)
        self.assertEqual(g.members, ("1.0", "7.0", "9.0", "8.0"))
        self.assertEqual((g.number, g.joined, g.left, g.recovered), (4, ("9.0", "8.0"), ("5.0",), False))
        self.assertTrue(g.needs_sync())

    def test_joiners_wait_beyond_the_largest_world(self):
        g = membership.next_generation(self.gen("1.0", "2.0"), waiting=["3.0", "4.0", "5.0"], max_procs=3)
        self.assertEqual(g.members, ("1.0", "2.0", "3.0"))
        self.assertIn("2 job(s) wait: the job's largest world is 3", g.reasons)

    def test_a_graceful_shrink_needs_no_sync(self):
        g = membership.next_generation(self.gen("1.0", "2.0", "3.0"), leaving=["3.0"], max_procs=3)
        self.assertEqual((g.members, g.joined), (("1.0", "2.0"), ()))
        self.assertFalse(g.needs_sync())

    def test_after_a_failure_only_those_that_answered_stay_and_all_restore(self):
        g = membership.next_generation(self.gen("1.0", "2.0", "3.0"), max_procs=3, alive=["1.0", "3.0"])
        self.assertEqual((g.members, g.left, g.recovered), (("1.0", "3.0"), ("2.0",), True))
        self.assertTrue(g.needs_sync())

    def test_a_member_is_never_admitted_twice(self):
        g = membership.next_generation(self.gen("1.0", "2.0"), waiting=["2.0", "3.0", "3.0"], max_procs=8)
        self.assertEqual(g.members, ("1.0", "2.0", "3.0"))

    def test_the_first_world_puts_the_host_first(self):
        g = membership.first_generation("1.0", ["2.0", "1.0", "2.1"], max_procs=2)
        self.assertEqual((g.number, g.members), (1, ("1.0", "2.0")))
        self.assertTrue(g.needs_sync())

    def test_a_job_joins_whole_once_all_its_processes_wait(self):
        # Worker job 7 has two of its four processes waiting, job 8 all four.
        waiting = ["7.0.a", "8.0.a", "8.1.a", "7.1.a", "8.2.a", "8.3.a"]
        g = membership.next_generation(self.gen("1.0.a", "1.1.a", "1.2.a", "1.3.a"), waiting=waiting, max_procs=16,
                                       procs_per_job=4)
        self.assertEqual(g.joined, ("8.0.a", "8.1.a", "8.2.a", "8.3.a"))
        # No room for a whole job: none joins, not a part of one.
        g = membership.next_generation(self.gen("1.0.a", "1.1.a", "1.2.a", "1.3.a"), waiting=waiting, max_procs=6,
                                       procs_per_job=4)
        self.assertEqual(g.joined, ())

    def test_a_job_leaves_whole_and_the_main_job_loses_only_the_dead(self):
        cur = self.gen("1.0.a", "1.1.a", "5.0.a", "5.1.a", "6.0.a", "6.1.a")
        g = membership.next_generation(cur, leaving=["5.1.a"], max_procs=8, procs_per_job=2)
        self.assertEqual(g.members, ("1.0.a", "1.1.a", "6.0.a", "6.1.a"))
        self.assertIn("1 process leaving with their job", g.reasons)
        g = membership.next_generation(cur, max_procs=8, procs_per_job=2,
                                       alive=["1.0.a", "5.0.a", "5.1.a", "6.1.a"])
        self.assertEqual(g.members, ("1.0.a", "5.0.a", "5.1.a"))  # 1.1 dropped alone; job 6 whole
        self.assertTrue(g.recovered)

    def test_member_ids_are_unique_per_process_and_checked(self):
        a, b = membership.member_id("41", 0, "1a2b"), membership.member_id("41", 0, "3c4d")
        self.assertNotEqual(a, b)  # a requeued worker job is a new member
        self.assertEqual(membership.job_of(a), "41")
        self.assertTrue(membership.valid_member(a))
        for forged in ("", "41.0", "41.0.xyz", "41.0.1a\n2", "../x.0.1", "41.0.1a2b; rm -rf"):
            self.assertFalse(membership.valid_member(forged), forged)

    def test_records_round_trip(self):
        g = membership.next_generation(self.gen("1.0", "2.0"), leaving=["2.0"], waiting=["3.0"], max_procs=4)
        self.assertEqual(membership.Generation.from_record(json.loads(json.dumps(g.to_record()))), g)


@unittest.skipUnless(HAVE_TORCH or os.environ.get("CI"), "torch is not installed (the testbed installs python3-torch)")
class InPlaceTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.events = os.path.join(self.dir, "events.jsonl")
        port = free_port()
        self.env = dict(os.environ, EVENTS=self.events, ELASTIC_JOB_ID="1", ELASTIC_MIN="1", ELASTIC_MAX="3",
                        ELASTIC_GPUS_PER_WORKER="1", ELASTIC_RDZV_ENDPOINT=f"127.0.0.1:{port}",
                        ELASTIC_REPORT_DIR=self.dir, LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", CUDA_VISIBLE_DEVICES="")
        self.env.pop("TORCHELASTIC_RUN_ID", None)
        self.procs = {}
        self.ended = set()  # the jobs the test ended on purpose

    def tearDown(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, job, role):
        with open(os.path.join(self.dir, f"{job}.out"), "w") as out:
            self.procs[job] = subprocess.Popen([sys.executable, os.path.join(HERE, "inplace_worker.py")],
                                               env=dict(self.env, SLURM_JOB_ID=str(job), ELASTIC_ROLE=role),
                                               stdout=out, stderr=subprocess.STDOUT)

    def logs(self):
        """Each process's output, with the stacks of those still running."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGUSR1)
        time.sleep(1)
        out = {}
        for j in self.procs:
            with open(os.path.join(self.dir, f"{j}.out")) as f:
                out[j] = f.read()
        return out

    def wait_exit(self, job, timeout=120):
        self.ended.add(job)
        try:
            return self.procs[job].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail(f"job {job} still runs {timeout}s on; events {self.read()}; logs {self.logs()}")

    def read(self):
        try:
            with open(self.events) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def await_world(self, size, after_gen=0, timeout=180):
        # Generous: in CI this runs beside other releases' suites on 2 cores, where importing
        # torch alone can take tens of seconds. A process that ends early fails it at once.
        deadline = time.time() + timeout
        while time.time() < deadline:
            for job, p in self.procs.items():
                if p.poll() is not None and job not in self.ended:
                    self.fail(f"job {job} ended with status {p.returncode} while a world of {size} was awaited; "
                              f"events {self.read()}; logs {self.logs()}")
            worlds = [e for e in self.read() if e["kind"] == "world" and e["size"] == size and e["gen"] > after_gen]
            gens = sorted({e["gen"] for e in worlds})
            for g in gens:
                members = [e for e in worlds if e["gen"] == g]
                if len(members) == size:
                    time.sleep(0.5)  # a few steps in it
                    return g, members
            time.sleep(0.1)
        self.fail(f"no world of {size} after world {after_gen} within {timeout}s; events {self.read()}; logs {self.logs()}")

    def test_grow_shrink_and_a_lost_process_keep_the_first_process_running(self):
        self.start(1, "main")
        g1, [host] = self.await_world(1)
        self.start(2, "worker")
        g2, w2 = self.await_world(2, g1)
        self.start(3, "worker")
        g3, w3 = self.await_world(3, g2)
        for world in (w2, w3):
            # Joiners got rank 0's state: one checksum, not each job's own seed's.
            self.assertEqual(len({e["checksum"] for e in world}), 1, world)
            self.assertEqual(len({e["opt_checksum"] for e in world}), 1, world)
            self.assertNotEqual(world[0]["opt_checksum"], 0, world)
            self.assertEqual(len({e["samples"] for e in world}), 1, world)
            self.assertEqual({e["mode"] for e in world}, {"in-place"})
        # The first process is the same process in every world, rank 0, and its samples only grow.
        self.assertEqual({e["pid"] for e in w2 + w3 if e["job"] == "1"}, {host["pid"]})
        self.assertEqual({e["rank"] for e in w2 + w3 if e["job"] == "1"}, {0})
        self.assertLess(host["samples"], [e for e in w3 if e["job"] == "1"][0]["samples"])

        # elasticd's shrink: TERM to worker 3, which leaves at its next step and ends well.
        self.procs[3].send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_exit(3), 0)
        g4, w4 = self.await_world(2, g3)
        self.assertEqual({e["job"] for e in w4}, {"1", "2"})
        self.assertEqual({e["pid"] for e in w4}, {self.procs[1].pid, self.procs[2].pid})
        self.assertIn("left", [e["kind"] for e in self.read() if e["job"] == "3"])

        # A failed node: worker 2 dies; the survivor restores its last commit and goes on alone.
        self.ended.add(2)
        self.procs[2].kill()
        g5, w5 = self.await_world(1, g4)
        self.assertEqual([e["pid"] for e in w5], [self.procs[1].pid])
        self.assertGreater(w5[0]["samples"], 0)
        self.assertIsNone(self.procs[1].poll(), "the first process stopped")
        self.procs[1].send_signal(signal.SIGTERM)
        self.assertEqual(self.wait_exit(1), 0)


if __name__ == "__main__":
    unittest.main()
