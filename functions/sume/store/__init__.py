"""The job store: one item per job and its transitions, the S3 bodies, the queue pointers."""
