"""Driver side: what runs where calls are decorated and submitted (usually the driver).

``decorate`` → ``proxy`` (``.remote``/``.options``/``.with_debug``) → ``checks`` before
submission, ``pinning`` for ``pin=``, ``blocks`` for calls made inside a profile block.
Any process that submits a debuggable call (a task submitting another) runs this side.
"""
