"""The real Kubernetes control plane on one machine (`python -m localcluster up --real`)."""
