"""The master's read-only HTTP side: the web dashboard and the Prometheus endpoint."""
