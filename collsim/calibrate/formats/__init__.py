"""Readers of the input formats ``collsim ingest`` understands.

Each reader takes the decoded text of one file and returns
``(rows, meta, warnings)``: ``rows`` a list of dicts keyed by the columns of
:data:`collsim.calibrate.measurements.MEASUREMENT_COLUMNS`, ``meta`` the
file-level facts, ``warnings`` one-line messages that already name the file
and line. Bad input raises :class:`collsim.errors.InputError`.

The readers are ``nccl_text.parse_text``, ``nccl_json.parse_json`` and
``tables.parse_collsim_csv`` / ``tables.parse_published_csv``;
:mod:`collsim.calibrate.ingest` picks one by content.
"""

__all__: list[str] = []
