"""Whose processes these are, and cleaning up after them: tuner and server identities
(``identity``, ``owners``), stopping leftovers and the stop policy (``stopping``),
recovery after a tuner died and heartbeats (``recovery``), the GPU guard (``gpu_guard``)."""
