"""A small package whose code runs in Ray's workers (test data for coverage of remote code)."""
