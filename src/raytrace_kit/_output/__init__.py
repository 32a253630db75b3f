"""Outputs: what lands in the session log dir (call context, encoding, schema, writer, logger).

Imported by the worker and the driver alike; imports neither.
"""
