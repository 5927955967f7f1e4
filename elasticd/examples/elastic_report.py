"""The examples' import of slurmbridge_elastic, the Python helper for elastic jobs.

    from elastic_report import elastic      # the helper module
    from elastic_report import report       # report(samples_per_sec, worker=None, **fields)

The helper is installed with `pip install ./elasticd/python` (no network needed); where it is
not, the checkout's copy beside this directory (elasticd/python) is used, so the examples run
from a checkout or from the testbed's published copy as they are. report() appends one JSON line
to $ELASTIC_REPORT_DIR/<worker>.jsonl (see elasticd/README.md); slurmbridge_elastic.Reporter
also measures steps and each worker's compute time per step, which elasticd needs to find a
slow worker in synchronous training.
"""
import os
import sys

try:
    import slurmbridge_elastic as elastic
except ImportError:
    # elasticd/python beside this directory: as reached (a checkout), or as the directory's real
    # place where it is reached through a symbolic link (a job's copy linking the testbed's or
    # the package's published examples).
    for here in (os.path.abspath(__file__), os.path.realpath(__file__)):
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "python"))
    import slurmbridge_elastic as elastic

report = elastic.report

__all__ = ["elastic", "report"]
