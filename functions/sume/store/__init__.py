"""The job store: the job item and its transitions, S3 bodies, queue pointers. For every slice."""
