"""ADR-0033 decisions as pure functions: receipts, deployment intent, checkpoint selection,
fleet agreement and retention. The adapters that read and write Kubernetes and agents call
these; nothing here does I/O.
"""
