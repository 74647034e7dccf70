"""Describe a PyTorch model without a GPU (model cards); needs the ``describe`` extra (torch).

Nothing outside this package imports torch, and the master never imports this package.
"""
