"""horus-k8s: the secondary Kubernetes scheduler (docs/kubernetes.md), a thin async shell over
horus_core.k8s."""
