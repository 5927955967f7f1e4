#!/usr/bin/env python3
"""Finds where a running slurmctld keeps the job record fields job_modify reads, to check
job_record_layout.h against a build whose source is not at hand (a distribution's micro
release). Run as root beside the slurmctld, after submitting a held job with distinctive
values, e.g. as a user:

    sbatch --hold -p a100 --gres=gpu:a100:3 -c 3 -n 1 --mem=12345 --comment=class=probe --requeue --wrap true
    probe-layout.py $(pgrep -x slurmctld) JOBID a100 proj-a class=probe guar-proj-a '#ARRAYJOBID'

(an argument #N looks for the number N as well).

It reads /proc/PID/mem (no ptrace stop): finds the job record by JOB_MAGIC and the job id,
follows each pointer-sized word to the strings and to the details record (DETAILS_MAGIC), and
prints every field's offset from the record's JOB_MAGIC, and the details record's numbers.
"""
import re
import struct
import sys

JOB_MAGIC, DETAILS_MAGIC = 0xF0B7392C, 0x0DEA84E7
# How a QOS name begins, in lower case as Slurm stores it: bridge/pools.QOSName of the default
# patterns (DefaultGuaranteedQOS "guar-{account}", DefaultBorrowQOS "borrow-{account}"), the
# part before {account}. Only a string argument that begins so is looked for as a QOS name.
QOS_PREFIXES = ("guar-", "borrow-")


def regions(pid):
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        name = parts[5] if len(parts) > 5 else ""
        if parts[1].startswith("rw") and (name in ("", "[heap]")) and hi - lo < 1 << 30:
            yield lo, hi


def main():
    pid, job_id = int(sys.argv[1]), int(sys.argv[2])
    numbers = [int(a[1:]) for a in sys.argv[3:] if a.startswith("#")]
    strings = [a for a in sys.argv[3:] if not a.startswith("#")]
    mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    spans = []
    for lo, hi in regions(pid):
        try:
            mem.seek(lo)
            spans.append((lo, mem.read(hi - lo)))
        except OSError:
            pass

    def read(addr, n):
        for lo, data in spans:
            if lo <= addr and addr + n <= lo + len(data):
                return data[addr - lo:addr - lo + n]
        return None

    def cstr(addr):
        b = read(addr, 64)
        if b is None or b"\0" not in b:
            return None
        return b.split(b"\0", 1)[0].decode("latin-1")

    magic = struct.pack("<I", JOB_MAGIC)
    for lo, data in spans:
        for m in re.finditer(re.escape(magic), data):
            base = lo + m.start()
            rec = read(base, 2048) or read(base, 1024)
            if rec is None:
                continue
            ids = [o for o in range(0, len(rec) - 4, 4) if struct.unpack_from("<I", rec, o)[0] == job_id]
            if not ids:
                continue
            print(f"job record: JOB_MAGIC at {base:#x}; job id {job_id} at +{ids}")
            for n in numbers:
                print(f"  uint32 {n} at +{[o for o in range(0, len(rec) - 4, 4) if struct.unpack_from('<I', rec, o)[0] == n]}")
                print(f"  uint16 {n} at +{[o for o in range(0, len(rec) - 2, 2) if struct.unpack_from('<H', rec, o)[0] == n]}")
            for o in range(0, len(rec) - 8, 8):
                p = struct.unpack_from("<Q", rec, o)[0]
                if p < 4096:
                    continue
                s = cstr(p)
                if s in strings or (s and "gpu" in s):
                    print(f"  +{o}: char * -> {s!r}")
                # A record that points to one of the strings: the QOS, through its name.
                inner = read(p, 256)
                if inner:
                    for k in range(0, 256, 8):
                        q = struct.unpack_from("<Q", inner, k)[0]
                        if q >= 4096 and cstr(q) in strings and cstr(q).lower().startswith(QOS_PREFIXES):
                            print(f"  +{o}: struct * -> +{k}: char * -> {cstr(q)!r}")
                d = read(p, 4)
                if d and struct.unpack("<I", d)[0] == DETAILS_MAGIC:
                    print(f"  +{o}: details -> {p:#x}")
                    det = read(p, 512)
                    words = [(k, struct.unpack_from("<I", det, k)[0]) for k in range(0, len(det), 4)]
                    print("    details uint32 words (offset=value, nonzero):",
                          " ".join(f"{k}={v}" for k, v in words if v and v < 1 << 20))


main()
