"""Worker side: what runs in the process that executes a call (boundary, instrument, profilers).

Never imports driver-side, local-mode or reporting modules.
"""
