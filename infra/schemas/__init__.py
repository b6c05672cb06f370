"""The events' JSON Schemas: the files in ``schemas/``, built without CDK (``files``:
``python -m infra.schemas.files``), and the stack's schema registry of them (``registry``)."""
