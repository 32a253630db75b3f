"""Local mode: debuggable calls run in this process, with Ray's semantics.

``mode`` (the setting) → ``run`` (one call) → ``actors`` → ``hooks`` (``ray.*``) →
``switch`` (the public ``local_mode()``/``set_local_mode()``). Nothing outside the driver
imports this package.
"""
