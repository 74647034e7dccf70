"""The master's logic between the gRPC servicers and the store."""
