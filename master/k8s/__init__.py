"""horus-k8s: the secondary Kubernetes scheduler (docs/kubernetes.md), its extender mode and its leader
election, a thin async shell over horus_core.k8s."""
