"""Local mode: debuggable calls run in this process, with Ray's semantics.

``setting`` (the setting in force) → ``arguments``, ``call``, ``run`` and ``outcome`` (one
call) → ``actor``, ``handles``, ``actor_loop``, ``async_calls`` (actors) → ``hooks``
(``ray.*``) → ``switch`` (the public ``local_mode()``/``set_local_mode()``). Nothing
outside the driver imports this package.
"""
