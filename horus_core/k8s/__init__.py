"""Kubernetes <-> Horus, pure: pods to job specs, nodes to Horus nodes, gangs and queues, and the
policy's actions back to what the apiserver is sent (annotation patches, Bindings, Evictions,
PodScheduled conditions, Events). No I/O here: ``master/k8s`` is the async shell
(``horus-k8s``, docs/kubernetes.md)."""
