"""From render to traffic: the deployment scheduler, per-pod diff and the parallel deployer."""
