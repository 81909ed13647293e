"""The sans-IO group coordinator engine (KIP-848 consumer groups, classic groups, offsets).

State in, records and responses out: no sockets, files, asyncio or clock reads. Time is an
argument (`now_ms`), randomness comes from an injected `IdSource`.
"""
