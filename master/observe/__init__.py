"""What the master shows about itself: the cluster view, Prometheus metrics, utilisation history."""
