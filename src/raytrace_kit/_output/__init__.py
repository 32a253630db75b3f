"""Outputs: what lands in the session log dir (call context, schema, writer, logger, paths).

Imported by the worker and the driver alike; imports neither.
"""
