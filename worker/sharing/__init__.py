"""Safe sharing of one GPU between jobs: memory caps and their enforcement."""
