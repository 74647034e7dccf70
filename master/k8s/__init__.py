"""horus-k8s: Horus as the scheduler of Kubernetes pods (the daemon, its extender, its leader election)."""
