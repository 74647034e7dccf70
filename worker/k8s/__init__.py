"""The Kubernetes node agent (``horus-worker --kubernetes``): pods, cgroups, caps and the node report."""
