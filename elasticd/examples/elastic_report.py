"""The examples' import of slurmbridge_elastic, the Python helper for elastic jobs.

    from elastic_report import elastic      # the helper module
    from elastic_report import report       # report(samples_per_sec, worker=None, **fields)

The copy beside this directory (elasticd/python) comes first, so that the examples run with the
helper of their own version from a checkout, the testbed's published copy or a package; where
there is none, the one installed with `pip install ./elasticd/python` (no network needed).
report() appends one JSON line to $ELASTIC_REPORT_DIR/<worker>.jsonl (see elasticd/README.md);
slurmbridge_elastic.Reporter
also measures steps and each worker's compute time per step, which elasticd needs to find a
slow worker in synchronous training.
"""
import os
import sys

# The copy beside these examples first (elasticd/python: a checkout's, the testbed's, or the one
# a package installs with them), so that an example runs with the helper of its own version; an
# installed helper (pip install) where there is none. As reached, or as the directory's real
# place where it is reached through a symbolic link (a job's copy linking the published ones).
for here in (os.path.realpath(__file__), os.path.abspath(__file__)):
    beside = os.path.join(os.path.dirname(os.path.dirname(here)), "python")
    if os.path.isdir(os.path.join(beside, "slurmbridge_elastic")) and beside not in sys.path:
        sys.path.insert(0, beside)
import slurmbridge_elastic as elastic  # noqa: E402

report = elastic.report

__all__ = ["elastic", "report"]
