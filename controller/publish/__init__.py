"""Publication: the ordinary HAProxyCfg with its children and pod receipts, and checkpoints."""
