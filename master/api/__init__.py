"""Thin gRPC servicers: decode the request, call a service, encode the answer."""
