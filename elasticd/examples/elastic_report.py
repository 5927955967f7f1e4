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
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
    import slurmbridge_elastic as elastic

report = elastic.report

__all__ = ["elastic", "report"]
