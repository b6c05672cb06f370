"""The worker's slice: a job's follow-up work (artifacts, announcement, finish). For worker.py."""
