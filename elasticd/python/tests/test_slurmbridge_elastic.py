"""Tests of the slurmbridge_elastic helper and its build backend (run by elasticd/python's Go
test, or: cd elasticd/python && python3 -m unittest discover -s tests -v)."""
import hashlib
import base64
import json
import os
import sys
import tempfile
import time
import unittest
import zipfile
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "build_backend"))

import slurmbridge_elastic as elastic  # noqa: E402
import slurmbridge_build  # noqa: E402


class ContractTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.hosts = os.path.join(self.dir, "hosts")
        with open(self.hosts, "w") as f:
            f.write("a100-1:1\na100-2:1\n\n")
        self.env = {"ELASTIC_ROLE": "main", "ELASTIC_JOB_ID": "41", "ELASTIC_MIN": "2", "ELASTIC_MAX": "8",
                    "ELASTIC_GPUS_PER_WORKER": "4", "ELASTIC_RDZV_ENDPOINT": "a100-1:29441",
                    "ELASTIC_HOSTS_FILE": self.hosts, "ELASTIC_REPORT_DIR": self.dir, "SLURM_JOB_ID": "41"}

    def test_contract(self):
        with mock.patch.dict(os.environ, self.env, clear=True):
            self.assertEqual(elastic.role(), "main")
            self.assertEqual(elastic.workers(), 2)
            self.assertEqual(elastic.world_size(), 8)  # 2 worker jobs x 4 processes
            with mock.patch.dict(os.environ, {"WORLD_SIZE": "6"}):
                self.assertEqual(elastic.world_size(), 6)  # torchrun's own count wins
            r = elastic.rendezvous()
            self.assertEqual((r.endpoint, r.id, r.nnodes, r.host, r.port, r.is_host),
                             ("a100-1:29441", "slurm-41", "2:8", "a100-1", 29441, True))
            self.assertIn("--nproc_per_node=4", r.torchrun_args())

    def test_per_device_batch(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(elastic.per_device_batch(default=256), 256)
            self.assertIsNone(elastic.per_device_batch())
        with mock.patch.dict(os.environ, {elastic.BATCH_VAR: "96"}, clear=True):
            self.assertEqual(elastic.per_device_batch(default=256), 96)
        for bad in ("0", "-3", "lots"):
            with mock.patch.dict(os.environ, {elastic.BATCH_VAR: bad}, clear=True):
                with self.assertRaises(ValueError):
                    elastic.per_device_batch(default=256)

    def test_missing_rendezvous_is_named(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            with self.assertRaises(KeyError):
                elastic.rendezvous()


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class ReporterTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.env = mock.patch.dict(os.environ, {"ELASTIC_REPORT_DIR": self.dir, "SLURM_JOB_ID": "77",
                                                "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}, clear=True)
        self.env.start()
        self.addCleanup(self.env.stop)
        elastic._resize_hooks.clear()

    def test_report_line_has_the_documented_fields(self):
        elastic.report(95.0, compute_s=0.1, step_s=None)
        (rec,) = lines(os.path.join(self.dir, "77.jsonl"))
        self.assertEqual((rec["worker"], rec["samples_per_sec"], rec["compute_s"]), ("77", 95.0, 0.1))
        self.assertNotIn("step_s", rec)
        self.assertAlmostEqual(rec["time"], time.time(), delta=5)

    def test_local_rank_0_reports_the_job_with_its_slowest_process(self):
        slow = elastic.Reporter(samples_per_step=10, interval=0, local_rank=1)
        slow.end_step(0.300)  # local rank 1 only leaves its compute time for rank 0
        self.assertFalse(os.path.exists(os.path.join(self.dir, "77.jsonl")))
        fast = elastic.Reporter(samples_per_step=10, interval=0.05)
        for _ in range(3):
            with fast.step() as s:
                time.sleep(0.01)
                s.computed()
                time.sleep(0.01)
        time.sleep(0.05)
        fast.end_step(0.010)
        recs = lines(os.path.join(self.dir, "77.jsonl"))
        self.assertTrue(recs)
        rec = recs[-1]
        self.assertEqual(rec["compute_s"], 0.3)  # the slowest local process
        self.assertEqual(rec["world_size"], 4)
        # samples/s of the worker job: steps x per-process batch x 2 local processes / elapsed
        total_steps = sum(r["steps"] for r in recs)
        self.assertEqual(total_steps, 4)
        self.assertAlmostEqual(rec["samples_per_sec"], rec["steps"] * 10 * 2 / (rec["steps"] * rec["step_s"]), delta=1)

    def test_without_computed_no_compute_time(self):
        r = elastic.Reporter(samples_per_step=8, interval=0)
        with r.step():
            pass
        (rec,) = lines(os.path.join(self.dir, "77.jsonl"))
        self.assertNotIn("compute_s", rec)
        self.assertGreater(rec["samples_per_sec"], 0)

    def test_resize_hook_across_a_torchrun_restart(self):
        seen = []
        elastic.on_resize(lambda old, new: seen.append((old, new)))
        elastic.Reporter(samples_per_step=1)  # first world: nothing to report
        self.assertEqual(seen, [])
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "6"}):
            elastic.Reporter(samples_per_step=1)  # the restarted processes of a bigger world
        self.assertEqual(seen, [(4, 6)])
        elastic.Reporter(samples_per_step=1)
        self.assertEqual(seen, [(4, 6), (6, 4)])

    def test_resize_hook_in_place(self):
        seen = []
        elastic.on_resize(lambda old, new: seen.append((old, new)))
        size = [3]
        r = elastic.Reporter(samples_per_step=1, interval=0, world=lambda: size[0])
        r.end_step()
        size[0] = 5
        r.end_step()
        r.end_step()
        self.assertEqual(seen, [(3, 5)])


class BackendTest(unittest.TestCase):
    def test_wheel_holds_the_package_and_a_valid_record(self):
        out = tempfile.mkdtemp()
        name = slurmbridge_build.build_wheel(out)
        self.assertEqual(name, "slurmbridge_elastic-0.2.0-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(out, name)) as z:
            names = z.namelist()
            self.assertIn("slurmbridge_elastic/__init__.py", names)
            self.assertIn("slurmbridge_elastic/torch.py", names)
            self.assertIn("slurmbridge_elastic/membership.py", names)
            record = z.read("slurmbridge_elastic-0.2.0.dist-info/RECORD").decode().splitlines()
            for line in record:
                path, digest, size = line.rsplit(",", 2)
                if not digest:
                    continue
                data = z.read(path)
                want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                self.assertEqual((digest, int(size)), ("sha256=" + want, len(data)), path)
            self.assertIn("Name: slurmbridge-elastic", z.read("slurmbridge_elastic-0.2.0.dist-info/METADATA").decode())
        self.assertEqual(slurmbridge_build.get_requires_for_build_wheel(), [])


if __name__ == "__main__":
    unittest.main()
