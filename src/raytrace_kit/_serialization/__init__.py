"""Serializability checks: what Ray could not ship, where it came from, and the fix.

``walk`` judges values with Ray's own serializer and finds every culprit; ``report`` holds
the verdict, renders it and turns it into an error and a ``serialization.fail`` event.
"""
